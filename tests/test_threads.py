"""A thread that stops computing gives its OpenMP helpers back, so another thread's parallel regions spin instead
of sleeping (dspark_viz.threads). Counted, not timed: the process's voluntary context switches while a worker
thread runs a few thousand parallel regions, with as many torch threads as CPUs."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from dspark_viz import threads

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import json, os, resource, sys, threading, torch
from dspark_viz import threads
torch.set_num_threads(os.cpu_count())
x = torch.zeros(1 << 20)

def regions(k):                        # each add_ on 1M floats is one OpenMP parallel region
    for _ in range(k):
        x.add_(1.0)

@threads.gives_back
def call():
    regions(50)

@threads.gives_back
def stream():
    for _ in range(3):
        regions(20)
        yield None

mode = sys.argv[1]
if mode == "call":
    call()
elif mode == "stream":
    list(stream())
else:
    regions(50)                        # the main thread's own pool, kept ("keep") or given back ("give")
    if mode == "give":
        assert threads.give_back()
out = {}

def work():
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    regions(2000)
    out["switches"] = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - r0

t = threading.Thread(target=work)
t.start()
t.join()
print(json.dumps(out))
"""

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2 or not threads.available(),
                                reason="needs 2+ CPUs and libgomp (the runtime whose per-thread pools this fixes)")


def _switches(mode: str) -> int:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("OMP_NUM_THREADS", None)
    p = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])["switches"]


def test_a_kept_pool_makes_another_threads_barriers_sleep_and_giving_it_back_stops_that():
    kept, given = _switches("keep"), _switches("give")
    assert kept > 500, kept              # libgomp's throttled spin: about one sleep per region
    assert given < kept / 10, (given, kept)


@pytest.mark.parametrize("mode", ["call", "stream"])
def test_a_decorated_entry_point_gives_back_when_it_returns(mode):
    assert _switches(mode) < _switches("keep") / 10


def test_the_computing_entry_points_give_back():
    from dspark_viz.decode import speculative_generate
    from dspark_viz.model.target import load_target
    from dspark_viz.evaluation.speed_methods import _hf
    from dspark_viz.serving.batched import batched_generate

    faces = []
    if importlib.util.find_spec("gradio") is not None:
        from dspark_viz.ui.app.live import live_decode
        faces.append(live_decode)
    for fn in (load_target, speculative_generate, batched_generate, _hf, *faces):
        assert getattr(fn, "gives_back", False), fn.__qualname__


def test_give_back_outside_any_pool_is_harmless():
    import torch

    assert threads.give_back() and threads.give_back()
    assert float(torch.ones(1 << 20).sum()) == float(1 << 20)         # parallel regions run again afterwards
