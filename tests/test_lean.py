"""The lean decoder-layer forward (lean.py): bit-identical to transformers' layers where it runs, stock elsewhere."""
from __future__ import annotations

import pytest
import torch

from dspark_viz import lean


def _forward(t, ids, new, **kw):
    cache, _ = t.prefill(ids)
    return t.forward(torch.tensor([new]), cache, features=True, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 11])
def test_logits_and_features_equal_stock_layers(real_target, n):
    t = real_target
    if t.layer_path != "lean":
        pytest.skip(f"target layers: {t.layer_path}")
    ids = t.chat_ids("Name three colours.")
    new = [1000 + 37 * i for i in range(n)]
    fast = _forward(t, ids, new)
    with lean.stock_layers(t.model):
        stock = _forward(t, ids, new)
    assert torch.equal(fast.logits, stock.logits) and torch.equal(fast.features, stock.features)
    assert "forward" in t.model.model.layers[0].__dict__              # reinstalled after the block


@pytest.mark.slow
def test_lean_path_runs_and_steps_aside(real_target, monkeypatch):
    """2–8 rows take the lean forward in every layer; prefill and one-token steps keep the stock one."""
    t = real_target
    if t.layer_path != "lean":
        pytest.skip(f"target layers: {t.layer_path}")
    calls = {"n": 0}
    norm = lean._norm

    def counting(*a):
        calls["n"] += 1
        return norm(*a)

    monkeypatch.setattr(lean, "_norm", counting)
    cache, _ = t.prefill(t.chat_ids("Hi."))           # prefill: stock
    assert calls["n"] == 0
    t.forward(torch.tensor([[11]]), cache)            # 1 row: stock
    assert calls["n"] == 0
    t.forward(torch.tensor([[12, 13, 14]]), cache)    # 3 rows: lean, two norms per layer
    assert calls["n"] == 2 * t.n_layers


def test_switch_off_and_shape_checks(monkeypatch):
    monkeypatch.setenv("DSPARK_LEAN_LAYERS", "0")
    assert not lean.enabled()
    assert not lean.install(torch.nn.Linear(2, 2), ext=object())           # off by env: nothing installed
    monkeypatch.delenv("DSPARK_LEAN_LAYERS")
    assert not lean._fits(torch.nn.Linear(2, 2))                            # not a decoder layer
