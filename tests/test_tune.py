"""The machine decides: per-size path choice and default dtype, kept per machine fingerprint."""
from __future__ import annotations

import json

import pytest
import torch

from dspark_viz.evaluation import dtype_choice
from dspark_viz.fast import tune
from dspark_viz.model import dtypes


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DSPARK_CACHE", str(tmp_path))
    monkeypatch.setenv("DSPARK_TUNE", "1")
    return tmp_path


def test_fingerprint_names_cpu_threads_torch_and_kernel():
    fp = tune.fingerprint()
    assert fp["cpu"] and fp["threads"] == torch.get_num_threads() and fp["torch"] == torch.__version__
    assert set(fp["flags"]) <= set(tune.FLAGS) and len(fp["kernel"]) == 12


def test_choice_file_is_per_fingerprint(fresh_cache, monkeypatch):
    tune.write_choice({"default_dtype": "bfloat16", "sizes": {"float32": {"path": {"1": "stock"}}}})
    tune.write_choice({"sizes": {"bfloat16": {"path": {}}}})                    # merged, not replaced
    d = tune.read_choice()
    assert d["default_dtype"] == "bfloat16" and set(d["sizes"]) == {"float32", "bfloat16"}
    assert tune.kept_default_dtype() == "bfloat16"
    assert dtypes.resolve(None, "cpu") == torch.bfloat16                   # the CPU default follows it
    assert dtypes.resolve(None, "cuda") == torch.bfloat16
    n = torch.get_num_threads()
    monkeypatch.setattr(torch, "get_num_threads", lambda: n + 1)                # another thread count …
    assert tune.read_choice() == {} and tune.kept_default_dtype() is None       # … is another machine
    assert dtypes.resolve(None, "cpu") == torch.float32


def test_a_corrupt_choice_file_is_ignored(fresh_cache):
    p = tune.choice_path()
    p.parent.mkdir(parents=True)
    p.write_text("{not json")
    assert tune.read_choice() == {}


def test_one_width_invariant_path_per_dtype_ties_to_the_widest():
    """Every size of a dtype takes one variant (one arithmetic for every width): the least total time over the
    sizes; torch's stock path is not width-invariant and is not chosen, even where it is faster."""
    times = {1: {"fast": 5.0, "fast-avx2": 4.0, "stock": 1.0}, 2: {"fast": 5.0, "fast-avx2": 6.0, "stock": 1.0},
             4: {"fast": 5.0, "fast-avx2": 4.5, "stock": 1.0}}
    assert tune.best_path(times) == "fast-avx2"                                  # 14.5 ms against 15
    times[2]["fast-avx2"] = 6.5
    assert tune.best_path(times) == "fast"                                       # a tie goes to the first-listed
    assert tune.best_path({1: {"stock": 3.0}, 2: {"stock": 4.0}}) == "stock"     # nothing of ours was timed


def test_tune_off_measures_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("DSPARK_CACHE", str(tmp_path))
    monkeypatch.setenv("DSPARK_TUNE", "0")
    assert dtype_choice.choose_default_dtype() == "float32"
    assert not (tmp_path / "tune").exists()


@pytest.mark.slow
def test_paths_are_measured_once_and_taken(real_target, fresh_cache):
    t = real_target
    if t.paths.matmul == "stock":
        pytest.skip("the fast path is off here (DSPARK_SKINNY=0 or not applicable): nothing to choose")
    t.choose_paths()
    kept = tune.read_choice()["sizes"]["float32"]
    assert set(map(int, kept["ms"])) == set(tune.SIZES) == set(map(int, kept["path"]))
    assert all(v["fast"] > 0 and v["stock"] > 0 for v in kept["ms"].values())
    assert set(kept["path"].values()) == {kept["choice"]} and kept["choice"] in tune.INVARIANT   # one per dtype
    assert t.paths.sizes == {int(n): p for n, p in kept["path"].items()} and "measured now" in t.paths.choice
    t.choose_paths()
    assert "measured on this machine" in t.paths.choice
    # a size forced onto the stock path computes the same logits as the fast path, up to summation order
    ids = t.chat_ids("Count to five.")
    cache_a, out_a = t.prefill(ids)
    t.paths.sizes = {n: "stock" for n in tune.SIZES}
    cache_b, out_b = t.prefill(ids)
    x = torch.tensor([ids[-4:]])
    la = t.forward(x, cache_a, choose_path=False).logits
    lb = t.forward(x, cache_b).logits
    t.paths.sizes = {}
    assert float((la - lb).abs().max()) < 1e-3 * float(la.abs().max())
    json.dumps(tune.read_choice())                                              # the file stays plain JSON
