"""Settings read from the environment: the OpenMP spin the package sets before torch loads."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dspark_viz import settings


def _spincount(env: dict) -> str:
    code = "import dspark_viz, os, sys; print(os.environ.get('GOMP_SPINCOUNT')); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    return out.split()


def test_the_package_sets_an_openmp_spin_before_torch_loads():
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    spin, torch_loaded = _spincount(env)
    assert spin in (str(settings.SPIN_QUIET), str(settings.SPIN_BUSY)) and torch_loaded == "False"


def test_a_spin_the_user_set_is_kept():
    assert _spincount({**os.environ, "GOMP_SPINCOUNT": "50000"})[0] == "50000"


@pytest.mark.parametrize("others, threads, cores, spin", [
    (0, 2, 2, settings.SPIN_QUIET),         # every core free for our threads: spin long
    (1, 2, 2, settings.SPIN_BUSY),          # another busy process on one of two cores: spin short
    (1, 1, 2, settings.SPIN_QUIET),         # one thread of ours beside one busy process: a core each
    (3, 4, 8, settings.SPIN_QUIET),
    (5, 4, 8, settings.SPIN_BUSY),
    (None, 2, 2, settings.SPIN_QUIET),      # no /proc (not Linux): the quiet default
])
def test_the_spin_is_short_only_when_the_run_queue_leaves_no_core_per_thread(monkeypatch, others, threads, cores,
                                                                             spin):
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    monkeypatch.setattr(settings, "runnable_others", lambda: others)
    monkeypatch.setattr(settings.os, "cpu_count", lambda: cores)
    settings.openmp_defaults()
    assert os.environ["GOMP_SPINCOUNT"] == str(spin)


def test_the_run_queue_reading_counts_others_only():
    n = settings.runnable_others(samples=2, gap=0.0)
    if not os.path.exists("/proc/loadavg"):
        assert n is None
    else:
        assert isinstance(n, int) and n >= 0
