"""The few-row matmul kernel (kernels.py, csrc/skinny_linear.cpp): same products as x·Wᵀ, used only where it applies."""
from __future__ import annotations

import contextlib

import pytest
import torch

from dspark_viz.fast import kernels


@pytest.fixture(scope="module")
def ext():
    why = kernels._why_not()
    if why is not None:                          # e.g. a CPU without AVX2, or DSPARK_SKINNY=0
        pytest.skip(f"kernel not applicable here: {why}")
    mod = kernels.load()
    assert mod is not None, "the kernel should build on a machine with a compiler and AVX2 (make setup installs ninja)"
    return mod


@pytest.fixture(params=["avx2", "avx512", "avx512-fma"])
def isa(request, ext):
    """Each variant in turn (avx512 runs the AVX2 code on a CPU without AVX-512F; avx512-fma is avx512 on a CPU
    without AVX512-BF16)."""
    ext.set_isa(request.param)
    yield request.param
    ext.set_isa("avx512")


@pytest.mark.parametrize("rows", range(1, 9))
@pytest.mark.parametrize("inner,outer", [(576, 1536), (1536, 576), (13, 7), (8, 1), (100, 65)])
def test_matches_stock_product(ext, isa, rows, inner, outer):
    g = torch.Generator().manual_seed(rows * 1000 + inner)
    x = torch.randn(rows, inner, generator=g)                    # (M, I)
    w = torch.randn(outer, inner, generator=g)                   # (O, I)
    y = ext.skinny_linear(x, w)                                  # (M, O)
    ref = (x.double() @ w.double().t()).float()
    assert y.shape == (rows, outer)
    # fp32 sums of `inner` products of unit normals: errors of order sqrt(I)·ε·|terms|
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5 * inner ** 0.5 * 4)


def test_isa_names_the_variant_in_use(ext):
    ext.set_isa("avx2")
    assert ext.isa() == "avx2"
    ext.set_isa("avx512-fma")                                    # AVX-512 FMAs alone: never the bf16 dot product
    assert ext.isa() in ("avx512", "avx2")
    ext.set_isa("avx512")
    assert ext.isa() in ("avx512+bf16", "avx512", "avx2")        # what this CPU has
    with pytest.raises(RuntimeError, match="avx2, avx512 or avx512-fma"):
        ext.set_isa("sse")
    ext.set_isa("avx512")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype,rows,outer", [(torch.float32, 4, 1536), (torch.bfloat16, 20, 1000)])
def test_threads_split_rows_without_changing_results(ext, threads, dtype, rows, outer):
    """Rows of W split across torch's threads: every output is the same sum, whatever the split (1–64 rows in the
    packed forms)."""
    g = torch.Generator().manual_seed(7)
    x, w = torch.randn(rows, 576, generator=g).to(dtype), torch.randn(outer, 576, generator=g).to(dtype)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ext.skinny_linear(x, w)
        torch.set_num_threads(threads)
        assert torch.equal(ext.skinny_linear(x, w), one)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("inner,outer", [(576, 1536), (13, 7), (100, 65)])
def test_bf16_matches_fp32_sums_rounded_once(ext, isa, rows, inner, outer):
    """bf16: W widened exactly, fp32 sums, one rounding to bf16 — so y equals the fp32 product of the same
    bf16 values rounded to bf16, up to the fp32 summation order (at most one bf16 step apart)."""
    g = torch.Generator().manual_seed(7 * rows + inner)
    x = torch.randn(rows, inner, generator=g).bfloat16()
    w = torch.randn(outer, inner, generator=g).bfloat16()
    y = ext.skinny_linear(x, w)
    assert y.dtype == torch.bfloat16 and y.shape == (rows, outer)
    exact = x.double() @ w.double().t()                                  # the bf16 inputs, exactly
    ref = exact.bfloat16().double()
    step = exact.abs().clamp_min(1e-30) * 2.0 ** -7                       # one bf16 ulp (8-bit mantissa)
    assert bool(((y.double() - ref).abs() <= step + 1e-6).all())
    stock = torch.nn.functional.linear(x, w)                              # torch's bf16 GEMM
    torch.testing.assert_close(y.float(), stock.float(), rtol=1.6e-2, atol=1e-2)


def test_rejects_what_it_cannot_do(ext):
    w = torch.randn(16, 32)
    with pytest.raises(RuntimeError, match="1..64 rows"):
        ext.skinny_linear(torch.randn(65, 32), w)
    with pytest.raises(RuntimeError, match="inner sizes"):
        ext.skinny_linear(torch.randn(2, 31), w)
    with pytest.raises(RuntimeError, match="float32 or bfloat16"):
        ext.skinny_linear(torch.randn(2, 32, dtype=torch.float64), w.double())
    with pytest.raises(RuntimeError, match="alike"):
        ext.skinny_linear(torch.randn(2, 32).bfloat16(), w)


def test_noncontiguous_and_batched_input(ext):
    lin = torch.nn.Linear(24, 10)
    base = torch.randn(1, 24, 3)
    x = base.transpose(1, 2)                                     # (1, 3, 24), not contiguous
    with torch.inference_mode():
        ref = torch.nn.functional.linear(x, lin.weight, lin.bias)
        kernels.patch_linears(lin, ext)
        y = lin(x)
    assert y.shape == (1, 3, 10)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)


def test_patched_linear_keeps_stock_path_where_kernel_does_not_apply(ext):
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32)
    ref = torch.nn.Linear(64, 32)
    ref.load_state_dict(lin.state_dict())
    assert kernels.patch_linears(lin, ext) == 1
    assert kernels.patch_linears(lin, ext) == 0                  # idempotent: already patched
    with torch.inference_mode():
        one = torch.randn(1, 1, 64)                              # one token: the kernel too (a decode step)
        assert kernels.applies(one, lin.weight)
        torch.testing.assert_close(lin(one), ref(one), rtol=1e-5, atol=1e-5)
        many = torch.randn(1, 70, 64)                            # 70 > MAX_ROWS rows: stock
        assert torch.equal(lin(many), ref(many))
        three = torch.randn(1, 3, 64)                            # 3 rows: the kernel
        assert kernels.applies(three, lin.weight)
        torch.testing.assert_close(lin(three), ref(three), rtol=1e-5, atol=1e-5)
    # training: autograd must see the product, so the kernel steps aside
    x = torch.randn(3, 64, requires_grad=True)
    assert not kernels.applies(x, lin.weight)
    lin(x).sum().backward()
    ref_x = x.detach().clone().requires_grad_(True)
    ref(ref_x).sum().backward()
    torch.testing.assert_close(x.grad, ref_x.grad)
    assert lin.weight.grad is not None
    # other dtypes, or mixed ones, keep the stock path
    assert not kernels.applies(torch.randn(3, 64, dtype=torch.float64), lin.weight.double())
    assert not kernels.applies(torch.randn(3, 64, dtype=torch.bfloat16), lin.weight.detach())


@pytest.mark.parametrize("ext_or_none", ["kernel", None])
def test_wide_bf16_products_widen_exactly(monkeypatch, request, ext_or_none):
    """bf16, > 64 rows, on a CPU without native bf16 GEMM: bf16 operands, fp32 sums, one rounding to bf16 —
    what a bf16 GEMM computes, up to summation order: one fp32 GEMM of the widened operands. 1–64 rows take the
    kernel (or stock without it); fp32 and autograd keep their own paths."""
    monkeypatch.setattr(kernels, "native_bf16_gemm", lambda: False)
    ext = request.getfixturevalue("ext") if ext_or_none == "kernel" else None
    torch.manual_seed(1)
    lin = torch.nn.Linear(64, 32, bias=False).bfloat16()
    ref = torch.nn.Linear(64, 32, bias=False).bfloat16()
    ref.load_state_dict(lin.state_dict())
    assert kernels.patch_linears(lin, ext) == 1
    widened = lambda x: torch.nn.functional.linear(x.float(), lin.weight.float()).bfloat16()  # noqa: E731
    with torch.inference_mode():
        for rows in (kernels.MAX_ROWS + 1, 70, 130):
            x = torch.randn(1, rows, 64).bfloat16()
            assert kernels.wide_bf16(x, lin.weight)
            y = lin(x)
            assert y.shape == (1, rows, 32) and y.dtype == torch.bfloat16
            assert torch.equal(y, widened(x))
            exact = x.double() @ lin.weight.double().t()
            step = exact.abs().clamp_min(1e-30) * 2.0 ** -7             # at most one bf16 step from exact
            assert bool(((y.double() - exact.bfloat16().double()).abs() <= step + 1e-6).all())
            torch.testing.assert_close(y.float(), ref(x).float(), rtol=1.6e-2, atol=1e-2)
        for rows in (1, 4, 20, kernels.MAX_ROWS):                # 1–64 rows: the kernel's (or stock without it)
            few = torch.randn(1, rows, 64).bfloat16()
            assert not kernels.wide_bf16(few, lin.weight)
            if ext is None:
                assert torch.equal(lin(few), ref(few))
    assert not kernels.wide_bf16(torch.randn(70, 64), torch.randn(32, 64))            # fp32: stock
    x = torch.randn(70, 64).bfloat16().requires_grad_(True)
    assert not kernels.wide_bf16(x, lin.weight)                                       # autograd: stock
    monkeypatch.setattr(kernels, "native_bf16_gemm", lambda: True)
    assert not kernels.wide_bf16(torch.randn(70, 64).bfloat16(), lin.weight)         # AVX512-BF16 / AMX


def test_switch_off(monkeypatch):
    monkeypatch.setenv("DSPARK_SKINNY", "0")
    assert not kernels.enabled()
    assert "DSPARK_SKINNY=0" in kernels._why_not()


@pytest.mark.slow
def test_target_verification_forward_agrees_with_stock(real_target):
    """A 4-token verification forward through the kernel gives the stock logits up to fp32 rounding."""
    t = real_target
    if t.paths.matmul != "skinny-kernel":
        pytest.skip(f"target uses {t.paths.matmul}")
    ids = t.chat_ids("Name three colours.")
    nxt = torch.tensor([[1000, 2000, 3000, 4000]])
    cache, _ = t.prefill(ids)
    fast = t.forward(nxt, cache).logits                          # (1, 4, V)
    cache, _ = t.prefill(ids)
    with kernels.stock_linears(t.model):
        stock = t.forward(nxt, cache).logits

    torch.testing.assert_close(fast, stock, rtol=1e-4, atol=2e-3)
    assert torch.equal(fast.argmax(-1), stock.argmax(-1))
    assert "forward" in t.model.lm_head.__dict__                 # the patch is back after the block


@pytest.mark.slow
def test_shipped_drafter_block_logits_agree_with_stock(real_target):
    """The drafter loader hands the kernel to the drafter; a γ-row block gives the stock logits up to rounding."""
    from dspark_viz.drafters import load_drafter
    from dspark_viz.drafters.vocab import vocab_logits

    if real_target.paths.matmul != "skinny-kernel":
        pytest.skip(f"target uses {real_target.paths.matmul}")
    m = load_drafter("dspark", real_target).model
    assert m.vocab_product.ext is not None
    h = torch.randn(7, real_target.hidden_size, generator=torch.Generator().manual_seed(1))   # (γ, d)
    with torch.inference_mode():
        fast = vocab_logits(m, h)                                             # (γ, V_d)
        stock = h @ m.W_vd.T
    torch.testing.assert_close(fast, stock, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("rows", range(1, 9))
def test_bf16_tiles_and_row_layout_agree(ext, rows):
    """bf16 runs register tiles; the row layout (kept for A/B, kernels.row_layout) computes the same bf16
    product in another summation order: both within one bf16 step of the exact product rounded once. A row's
    tile result does not depend on the rows beside it (one accumulator per output over I, whatever M is)."""
    g = torch.Generator().manual_seed(100 + rows)
    x = torch.randn(rows, 576, generator=g).bfloat16()
    w = torch.randn(203, 576, generator=g).bfloat16()                     # 203: tiles plus single-row remainders
    tiles = ext.skinny_linear(x, w)
    with kernels.row_layout(ext):
        assert ext.skinny_linear is ext.skinny_linear_rows
        by_rows = ext.skinny_linear(x, w)
    assert ext.skinny_linear is not ext.skinny_linear_rows                # restored
    exact = x.double() @ w.double().t()
    step = exact.abs().clamp_min(1e-30) * 2.0 ** -7
    for y in (tiles, by_rows):
        assert bool(((y.double() - exact.bfloat16().double()).abs() <= step + 1e-6).all())
    for m in range(rows):                                                 # row independence of the tiles
        assert torch.equal(tiles[m], ext.skinny_linear(x[m:m + 1], w)[0])
    xf, wf = x.float(), w.float()           # fp32: the packed form against the row layout's other order
    with kernels.row_layout(ext):
        ref = ext.skinny_linear(xf, wf)
    torch.testing.assert_close(ext.skinny_linear(xf, wf), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.slow
def test_drafter_one_row_products_take_the_kernel(real_target, monkeypatch):
    """Drafters send one-row products (head steps, a one-token context extension) through the kernel, and so
    does the target (a decode step computes what the same token computes inside a verification block)."""
    from dspark_viz.drafters import load_drafter

    dr = load_drafter("dspark", real_target)
    ext = dr.model.vocab_product.ext
    if ext is None:
        pytest.skip("kernel not in use")
    calls, real = [], ext.skinny_linear

    def spy(a, w):
        calls.append(a.shape[0])
        return real(a, w)

    monkeypatch.setattr(ext, "skinny_linear", spy)
    lin = dr.model.backbone.fc
    x = torch.randn(1, lin.in_features)
    with torch.inference_mode():
        y = lin(x)
    assert calls == [1]
    assert torch.allclose(y, x @ lin.weight.T, rtol=1e-4, atol=1e-4)
    calls.clear()
    up = real_target.model.model.layers[0].mlp.up_proj
    with torch.inference_mode():
        up(torch.randn(1, up.in_features))
    assert calls == [1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("inner", [576, 1536, 13, 100, 577])
def test_a_row_gets_the_same_bits_whatever_rows_share_the_call(ext, isa, dtype, inner):
    """Width invariance: every output is summed in one order fixed by the inner size (the same partial
    accumulators, combined the same way), so row m of an M-row product equals the same row computed alone,
    bit for bit, for every M ≤ 8, in every variant and layout — odd inner sizes (tails) included."""
    g = torch.Generator().manual_seed(inner)
    x = torch.randn(8, inner, generator=g).to(dtype)                     # (8, I)
    w = torch.randn(203, inner, generator=g).to(dtype)                   # (O, I): 203 = tiles + remainders
    layouts = [contextlib.nullcontext] + ([lambda: kernels.row_layout(ext)] if dtype == torch.bfloat16 else [])
    for layout in layouts:
        with layout():
            alone = torch.cat([ext.skinny_linear(x[m:m + 1], w) for m in range(8)])        # (8, O)
            for rows in range(2, 9):
                for start in range(0, 8 - rows + 1):
                    assert torch.equal(ext.skinny_linear(x[start:start + rows], w), alone[start:start + rows]), \
                        (isa, dtype, rows, start)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_up_to_64_rows_keep_each_rows_bits_in_every_variant(ext, isa, dtype):
    """Row m of a product of up to 64 rows (one pass over the weights in the packed forms) equals the same row
    alone, bit for bit, in every variant."""
    g = torch.Generator().manual_seed(64)
    x = torch.randn(64, 576, generator=g).to(dtype)
    w = torch.randn(300, 576, generator=g).to(dtype)
    alone = torch.cat([ext.skinny_linear(x[m:m + 1], w) for m in range(64)])
    for rows in (9, 17, 40, 64):
        assert torch.equal(ext.skinny_linear(x[:rows], w), alone[:rows]), (isa, dtype, rows)


def _products_by_variant(ext, x, w, isas, row_counts):
    """{isa: [x[:rows] · wᵀ for each row count]}, each variant in turn (the widest restored after)."""
    try:
        by = {}
        for isa in isas:
            ext.set_isa(isa)
            by[isa] = [ext.skinny_linear(x[:rows], w) for rows in row_counts]
        return by
    finally:
        ext.set_isa("avx512")


@pytest.mark.parametrize("inner,outer", [(576, 1536), (1536, 576), (577, 203), (13, 7), (1, 1)])
def test_fp32_has_the_same_bits_in_both_variants(ext, inner, outer):
    """fp32 in the AVX-512 form (16-output blocks) and the AVX2 form (8-output blocks) fuse the products into one
    accumulator per output in the same order: every row of 1–64 gets the same bits in both variants (a CPU without
    AVX-512F runs the AVX2 form twice)."""
    g = torch.Generator().manual_seed(inner * outer)
    x = torch.randn(64, inner, generator=g)
    w = torch.randn(outer, inner, generator=g)
    by = _products_by_variant(ext, x, w, ("avx512", "avx2"), (1, 3, 8, 9, 64))
    for a, b in zip(by["avx512"], by["avx2"]):
        assert torch.equal(a, b)
    exact = x.double() @ w.double().t()
    assert bool(((by["avx512"][-1].double() - exact).abs() <= 1e-6 * (x.double().abs() @ w.double().abs().t())).all())


@pytest.mark.parametrize("inner,outer", [(576, 1536), (577, 203), (13, 7)])
def test_bf16_by_fmas_has_the_bits_of_the_avx2_form(ext, inner, outer):
    """bf16 by AVX-512 FMAs (weights widened exactly, 16-output blocks) and the AVX2 form (8-output blocks) fuse the
    same products in the same order: the same bits for every row of 1–64."""
    g = torch.Generator().manual_seed(inner + 3 * outer)
    x = torch.randn(64, inner, generator=g).bfloat16()
    w = torch.randn(outer, inner, generator=g).bfloat16()
    by = _products_by_variant(ext, x, w, ("avx512-fma", "avx2"), (1, 5, 8, 17, 64))
    for a, b in zip(by["avx512-fma"], by["avx2"]):
        assert torch.equal(a, b)


def test_native_sample_draws_what_sampling_sample_draws(ext):
    """``sample_index`` (the drafters' per-slot draw): the index ``sampling.sample`` gives and the same generator state
    after, for spread, sparse and one-hot distributions of several sizes, with a generator and with torch's own."""
    from dspark_viz.sampling import sample
    for trial in range(400):
        V = (5, 64, 8192, 49152)[trial % 4]
        g0 = torch.Generator().manual_seed(trial)
        p = torch.rand(V, generator=g0) ** 4
        if trial % 3 == 0:
            p[torch.rand(V, generator=g0) < 0.5] = 0
        if trial % 7 == 0:
            p = torch.zeros(V)
            p[trial % V] = 1.0
        p = p / p.sum()
        g1, g2 = torch.Generator().manual_seed(trial), torch.Generator().manual_seed(trial)
        assert ext.sample_index(p, g1) == sample(p, g2), trial
        assert torch.equal(g1.get_state(), g2.get_state()), trial
    torch.manual_seed(5)
    a = ext.sample_index(torch.tensor([0.2, 0.3, 0.5]))
    torch.manual_seed(5)
    assert a == sample(torch.tensor([0.2, 0.3, 0.5]))
    with pytest.raises(RuntimeError, match="sample_index"):
        ext.sample_index(torch.ones(2, 3) / 6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_native_markov_sample_is_the_python_slot_loop(ext, dtype):
    """``markov_sample`` (a sampled DSpark draft's Markov-head loop): the indices, the rows p_k and the generator
    state of the Python loop it replaces — b = W₂(W₁[prev]) through the kernel, softmax((U_k + b) / T), the draw."""
    from dspark_viz.sampling import probs_from_logits, sample
    g0 = torch.Generator().manual_seed(0)
    gamma, Vd, r = 7, 300, 16
    U = torch.randn(gamma, Vd, generator=g0) * 3                                        # (γ, V_d) fp32
    W1 = (torch.randn(Vd + 1, r, generator=g0) * 0.5).to(dtype)
    W2 = (torch.randn(Vd, r, generator=g0) * 0.5).to(dtype)
    for T in (0.3, 1.0, 2.5):
        g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
        js, P = ext.markov_sample(U, W1, W2, Vd, T, g1)
        prev, want, rows = Vd, [], []
        for k in range(gamma):
            b = ext.skinny_linear(W1[prev:prev + 1], W2)[0].float()                     # (V_d,)
            p = probs_from_logits(U[k] + b, T)
            prev = sample(p, g2)
            want.append(prev)
            rows.append(p)
        assert js == want and torch.equal(P, torch.stack(rows)), T
        assert torch.equal(g1.get_state(), g2.get_state())
    with pytest.raises(RuntimeError, match="temperature"):
        ext.markov_sample(U, W1, W2, 0, 0.0)
    with pytest.raises(RuntimeError, match="markov_sample"):
        ext.markov_sample(U, W1, W2, Vd + 5, 1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_prefetching_rows_ahead_changes_no_bit(ext, isa, dtype):
    """The kernel's prefetch of weight rows ahead (3+ rows of x) moves no value: every product, at every width and in
    every variant (fp32 rows, bf16 dot product or tiles, bf16 rows), is the same with it off."""
    g = torch.Generator().manual_seed(11)
    w = torch.randn(1536, 576, generator=g).to(dtype)                       # (O, I): many rows per thread
    assert ext.prefetch()
    for rows in range(1, 9):
        x = torch.randn(rows, 576, generator=g).to(dtype)                   # (M, I)
        on, on_rows = ext.skinny_linear(x, w), ext.skinny_linear_rows(x, w)
        with kernels.no_prefetch(ext):
            assert not ext.prefetch()
            off, off_rows = ext.skinny_linear(x, w), ext.skinny_linear_rows(x, w)
        assert torch.equal(on, off) and torch.equal(on_rows, off_rows), rows
    assert ext.prefetch()
