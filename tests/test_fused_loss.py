"""The compiled training loss (train/fused.py) computes what the eager one computes: the loss, its parts and the
gradients for the logits and the confidence logits agree to float rounding; the distinct-rows form of p_target
gives the eager loss exactly; a run picks the compiled loss only when asked or long enough, and falls back to
the eager one (saying so) where compiling fails.

Legend: N blocks, γ block size, V_d draft vocabulary, U distinct target rows.
"""
from __future__ import annotations

import pytest
import torch

from dspark_viz.train import fused
from dspark_viz.train.losses import drafter_loss, loss_terms, position_weights


def _batch(N=24, g=5, V=96, U=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rows = torch.softmax(torch.randn(U, V, generator=gen) * 2, -1) * 0.93          # (U, V_d): mass outside V_d
    row_of = torch.randint(U, (N, g), generator=gen)                               # (N, γ)
    labels = torch.randint(-1, V, (N, g), generator=gen)
    mask = torch.ones(N, g)
    mask[:4, 3:] = 0                                                               # blocks running past the end
    return (torch.randn(N, g, V, generator=gen), labels, rows, row_of, mask, position_weights(g),
            torch.randn(N, g, generator=gen))


def _grads(terms, batch, **kw):
    logits, labels, rows, row_of, mask, w, conf = batch
    lg, cf = logits.clone().requires_grad_(), conf.clone().requires_grad_()
    loss, st = drafter_loss(lg, labels, rows, mask, w, cf, row_of=row_of, terms=terms, **kw)
    loss.backward()
    return loss.detach(), st, lg.grad, cf.grad


def test_distinct_rows_give_the_materialised_loss_exactly():
    logits, labels, rows, row_of, mask, w, conf = _batch()
    a = loss_terms(logits, labels, rows, mask, w, conf, row_of)
    b = loss_terms(logits, labels, rows[row_of], mask, w, conf)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("with_conf", [True, False])
def test_compiled_loss_and_gradients_match_eager(with_conf):
    """Loss, stats and both gradients within float rounding of eager (summation order may differ)."""
    batch = _batch()
    kw = {} if with_conf else {"w_conf": 0.0}
    try:
        got = _grads(fused.compiled_terms(), batch, **kw)
    except Exception as e:                                   # noqa: BLE001 — no compiler here: nothing to compare
        pytest.skip(f"torch.compile does not work here: {type(e).__name__}")
    ref = _grads(loss_terms, batch, **kw)
    assert torch.allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)
    for k in ("loss", "ce", "l1", "bce", "tau_est", "acc1"):
        assert got[1][k] == pytest.approx(ref[1][k], rel=1e-5, abs=1e-6), k
    assert got[1]["positions"] == ref[1]["positions"]
    assert torch.allclose(got[2], ref[2], rtol=1e-4, atol=1e-8)
    if with_conf:
        assert torch.allclose(got[3], ref[3], rtol=1e-4, atol=1e-8)
    else:
        assert got[3] is None and ref[3] is None                 # w_conf = 0: the confidence logits unused
    other = _batch(N=17, U=23, seed=1)                       # other sizes: the shapes are dynamic
    assert torch.allclose(_grads(fused.compiled_terms(), other, **kw)[2], _grads(loss_terms, other, **kw)[2],
                          rtol=1e-4, atol=1e-8)


def test_a_run_compiles_only_when_asked_or_long_enough():
    assert fused.wanted("on", 1) and not fused.wanted("off", 10 ** 6)
    assert fused.wanted("auto", fused.MIN_STEPS) and not fused.wanted("auto", fused.MIN_STEPS - 1)
    with pytest.raises(ValueError, match="compile must be"):
        fused.wanted("yes", 10)


def test_a_failing_compile_falls_back_to_the_eager_loss(monkeypatch):
    said = []

    def probe(fn):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(fused, "_failed", None)
    monkeypatch.setattr(fused, "_probed", False)
    assert fused.terms_or_eager("on", 10, probe, said.append) is loss_terms
    assert "compiling the loss failed" in said[0] and "no C++ compiler" in said[0]
    assert fused.terms_or_eager("off", 10, probe, said.append) is loss_terms
