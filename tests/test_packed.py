"""The bf16 product in its packed outer-product form (csrc/packed_bf16.h), on CPUs with AVX512-BF16: 1–64 rows in
one pass, one summation order per output whatever shares the call, packs that follow their weights."""
from __future__ import annotations

import gc

import pytest
import torch
from conftest import embedded_target

from dspark_viz.fast import kernels


@pytest.fixture(scope="module")
def ext():
    why = kernels._why_not()
    if why is not None:
        pytest.skip(f"kernel not applicable here: {why}")
    mod = kernels.load()
    assert mod is not None
    if mod.isa() != "avx512+bf16":
        pytest.skip("this CPU has no AVX512-BF16: bf16 takes the AVX2 packed form (tests/test_kernels.py)")
    return mod


def test_takes_64_rows_in_one_pass(ext):
    assert ext.max_rows(True) == 64 and ext.max_rows(False) == 64


@pytest.mark.parametrize("inner,outer", [(576, 1536), (1536, 576), (577, 203), (13, 7)])
def test_a_row_gets_the_same_bits_beside_up_to_63_others(ext, inner, outer):
    """Row m of a product of 1–64 rows equals the same row computed alone, bit for bit (odd sizes: the pads)."""
    g = torch.Generator().manual_seed(inner + outer)
    x = torch.randn(64, inner, generator=g).bfloat16()
    w = torch.randn(outer, inner, generator=g).bfloat16()
    alone = torch.cat([ext.skinny_linear(x[m:m + 1], w) for m in range(64)])          # (64, O)
    for rows in (2, 3, 7, 8, 9, 12, 16, 17, 33, 64):
        for start in (0, 64 - rows):
            assert torch.equal(ext.skinny_linear(x[start:start + rows], w), alone[start:start + rows]), (rows, start)
    exact = x.double() @ w.double().t()
    step = exact.abs().clamp_min(1e-30) * 2.0 ** -7                                    # one bf16 step
    fp32 = 4e-7 * (x.double().abs() @ w.double().abs().t())                            # fp32 summation, bounded
    assert bool(((alone.double() - exact.bfloat16().double()).abs() <= step + fp32).all())


def test_a_pack_follows_its_weight(ext):
    """A weight changed in place (tracked by its version counter, or through .data, caught by the fingerprint)
    is packed again; the products are those of the new values."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 64, generator=g).bfloat16()
    w = torch.randn(48, 64, generator=g).bfloat16()
    ref = lambda: (x.float() @ w.float().t()).bfloat16()            # noqa: E731
    y0 = ext.skinny_linear(x, w)
    made = ext.pack_stats()["made"]
    assert torch.equal(ext.skinny_linear(x, w), y0) and ext.pack_stats()["made"] == made      # reused
    w.mul_(-1.0)                                                     # in place: a new version
    assert torch.equal(ext.skinny_linear(x, w), -y0) and ext.pack_stats()["made"] == made + 1
    w.data.copy_(torch.randn(48, 64, generator=g).bfloat16())       # .data: no version, a new fingerprint
    torch.testing.assert_close(ext.skinny_linear(x, w).float(), ref().float(), rtol=1.6e-2, atol=1e-2)
    assert ext.pack_stats()["made"] == made + 2


def test_packs_are_freed_with_their_weights(ext):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(2, 64, generator=g).bfloat16()
    ws = [torch.randn(32, 64, generator=g).bfloat16() for _ in range(5)]
    for w in ws:
        ext.skinny_linear(x, w)
    live = ext.pack_stats()["live"]
    del ws, w
    gc.collect()
    ext.skinny_linear(x, torch.randn(32, 64, generator=g).bfloat16())   # a new pack sweeps the dead ones
    assert ext.pack_stats()["live"] <= live - 5 + 1


@pytest.mark.slow
def test_a_fused_forward_packs_nothing_on_the_spot(ext):
    """Every entry point names its weights before multiplying (ensure_weights), so a decode step, a 12-token
    verification and the shipped drafters' rounds (their layers, vocabulary products and the Markov head's slot
    loop) find their packs made."""
    t = embedded_target("bf16", tune_paths=False)
    ids = t.chat_ids("Name three colours.")
    cache, _ = t.prefill(ids)
    t.forward(torch.tensor([[1000]]), cache)
    spot = ext.pack_stats()["on_the_spot"]
    t.forward(torch.tensor([[1000 + 7 * i for i in range(12)]]), cache)
    t.forward(torch.tensor([[2000]]), cache)
    assert ext.pack_stats()["on_the_spot"] == spot
    from dspark_viz.serving.measure import measure_draft_costs

    assert set(measure_draft_costs(t, ["dspark", "dspark-rnn", "dflash", "eagle"], repeats=2, ctx_len=40)) == {
        "dspark", "dspark-rnn", "dflash", "eagle"}
    assert ext.pack_stats()["on_the_spot"] == spot
