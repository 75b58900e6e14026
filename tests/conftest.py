"""Shared fixtures: the real SmolLM2 target (loaded once per session) and exact toy targets.

Threads: DSPARK_TEST_THREADS, else OMP_NUM_THREADS, else 1 (tests are timed on shared CPUs).
"""
from __future__ import annotations

import os
from fractions import Fraction as F

import pytest
import torch

from dspark_viz.model.toy import TableTarget
from dspark_viz.settings import test_threads

torch.set_num_threads(test_threads())
# The suite tests the fast path itself, on every size: no per-machine path or dtype choice here
# (tests/test_tune.py measures that on its own, into a temporary cache).
os.environ.setdefault("DSPARK_TUNE", "0")
os.environ.setdefault("DSPARK_FALLBACK", "0")     # rounds that do not depend on wall-clock timing

# Under CI=true a kernel that should build here but did not fails the run: the bit-identity tests that need the
# extension would otherwise skip, and a green suite would have checked nothing of the fast path.
NEEDS_EXTENSION = ("extension not built", "native extension is not available", "StackPlan is not available",
                   "StackPlan are not available")


def _extension_expected() -> str | None:
    """Why the kernel extension must be present (CI, a CPU it applies to, not switched off), or None."""
    if os.environ.get("CI", "").lower() != "true":
        return None
    from dspark_viz.fast import kernels

    return None if kernels._why_not() is not None else "CI=true on a CPU the kernel applies to"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.skipped or not isinstance(rep.longrepr, tuple):
        return
    reason = str(rep.longrepr[2])
    if any(s in reason for s in NEEDS_EXTENSION) and (why := _extension_expected()) is not None:
        rep.outcome = "failed"
        rep.longrepr = (f"{item.nodeid}: skipped for want of the kernel extension ({reason}), but {why}: the "
                        "build failed (see the RuntimeWarning from dspark_viz.fast.kernels.load)")


def embedded_target(dtype: str = "fp32", **kw):
    """The embedded SmolLM2-135M-Instruct target on CPU at ``dtype``; skips the test where the carrier package is
    not installed."""
    from dspark_viz.model.target import find_embedded_gguf, load_target

    try:
        find_embedded_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    return load_target(device="cpu", dtype=dtype, **kw)


@pytest.fixture(scope="session")
def real_target():
    """The embedded SmolLM2-135M-Instruct target, fp32 on CPU (≈ 5 s, once per session)."""
    return embedded_target("fp32")


# -- exact toy tables (rows are p_target(· | previous token), Fractions summing to 1) ----------------
TABLE4 = [                              # V = 4; token 3 ('d') is the stop token in stop tests
    [F(1, 2), F(1, 4), F(1, 8), F(1, 8)],
    [F(0), F(1, 3), F(1, 3), F(1, 3)],  # a zero: drafts of 'a' after 'b' are always rejected
    [F(3, 5), F(1, 5), F(1, 10), F(1, 10)],
    [F(1, 4), F(1, 4), F(1, 4), F(1, 4)],
]
DRAFT4 = [                              # p_draft: different from the target, with its own zeros
    [F(1, 4), F(1, 2), F(1, 4), F(0)],
    [F(1, 2), F(1, 6), F(1, 6), F(1, 6)],
    [F(1, 3), F(1, 3), F(0), F(1, 3)],
    [F(1, 10), F(2, 5), F(1, 4), F(1, 4)],
]


@pytest.fixture
def table4():
    return [row[:] for row in TABLE4]


@pytest.fixture
def draft4():
    return [row[:] for row in DRAFT4]


@pytest.fixture
def table_target(table4):
    """TableTarget over TABLE4, no stop token."""
    return TableTarget(table4)


def random_fraction_table(V: int, seed: int, lo: int = 1, hi: int = 20) -> list[list[F]]:
    """A V×V row-stochastic table of Fractions with integer weights in [lo, hi) / row sum."""
    g = torch.Generator().manual_seed(seed)
    ints = torch.randint(lo, hi, (V, V), generator=g).tolist()
    return [[F(a, sum(r)) for a in r] for r in ints]


@pytest.fixture
def table8():
    return random_fraction_table(8, seed=3)
