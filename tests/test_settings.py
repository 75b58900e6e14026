"""Settings read from the environment: the OpenMP spin default the package sets before torch loads."""
from __future__ import annotations

import os
import subprocess
import sys


def _spincount(env: dict) -> str:
    code = "import dspark_viz, os, sys; print(os.environ.get('GOMP_SPINCOUNT')); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    return out.split()


def test_the_package_sets_a_short_openmp_spin_before_torch_loads():
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    spin, torch_loaded = _spincount(env)
    assert spin == "1000" and torch_loaded == "False"          # set at import, before anything loads torch


def test_a_spin_the_user_set_is_kept():
    assert _spincount({**os.environ, "GOMP_SPINCOUNT": "50000"})[0] == "50000"
