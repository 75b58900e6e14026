"""The ragged forward (fast/ragged.py, csrc ragged_attention): rows of many sequences in one call, each in its own
cache slot, with no padding and no mask — its logits are the stock forward's, each row's attention depends on its
own slot alone, and bad shapes are refused.

Legend: N rows in a call, S slots, C a slot's capacity, H / Hk query / key-value heads, D head size.
"""
from __future__ import annotations

import pytest
import torch
from conftest import embedded_target

from dspark_viz.fast import kernels, ragged
from dspark_viz.model.toy import tiny_llama_target


def _ext_or_skip():
    ext = kernels.load()
    if ext is None or not hasattr(ext, "ragged_attention"):
        pytest.skip(f"kernel not applicable here: {kernels._why_not()}")
    return ext


def _reference(q, K, V, slot, n_keys, scale):
    """float64 attention of each row over its slot's first n_keys positions → (N, H·D)."""
    N, H, D = q.shape
    rep = H // K.shape[1]
    out = []
    for i in range(N):
        k = K[slot[i], :, :n_keys[i]].double().repeat_interleave(rep, 0)          # (H, n, D)
        v = V[slot[i], :, :n_keys[i]].double().repeat_interleave(rep, 0)
        p = torch.softmax((q[i].double()[:, None, :] @ k.transpose(1, 2))[:, 0] * scale, -1)   # (H, n)
        out.append((p[:, None, :] @ v)[:, 0].reshape(-1))
    return torch.stack(out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_ragged_attention_is_each_rows_own_attention(dtype):
    ext = _ext_or_skip()
    g = torch.Generator().manual_seed(0)
    S, Hk, C, D, H, N = 5, 3, 40, 64, 9, 23
    K, V = (torch.randn(S, Hk, C, D, generator=g).to(dtype) for _ in range(2))
    q = torch.randn(N, H, D, generator=g).to(dtype)
    slot = torch.randint(0, S, (N,), generator=g)
    n_keys = torch.randint(1, C + 1, (N,), generator=g)
    out = ext.ragged_attention(q, K, V, slot, n_keys, 0.125)                         # (N, H·D)
    ref = _reference(q, K, V, slot, n_keys, 0.125)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert (out.double() - ref).abs().max() < tol
    for i in (0, 7, N - 1):                                # a row alone: the same bits as beside the others
        one = ext.ragged_attention(q[i:i + 1], K, V, slot[i:i + 1], n_keys[i:i + 1], 0.125)
        assert torch.equal(one[0], out[i])
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):                             # another split of the rows across threads
            torch.set_num_threads(threads)
            assert torch.equal(ext.ragged_attention(q, K, V, slot, n_keys, 0.125), out)
    finally:
        torch.set_num_threads(before)


def test_ragged_attention_refuses_bad_rows():
    ext = _ext_or_skip()
    K = V = torch.zeros(2, 1, 8, 8)
    q = torch.zeros(1, 2, 8)
    for slot, n in (([2], [3]), ([0], [0]), ([0], [9])):
        with pytest.raises(RuntimeError, match="out of range"):
            ext.ragged_attention(q, K, V, torch.tensor(slot), torch.tensor(n), 1.0)
    with pytest.raises(RuntimeError, match="int64"):
        ext.ragged_attention(q, K, V, torch.tensor([0], dtype=torch.int32), torch.tensor([1]), 1.0)


def _stock_logits(target, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return target.model(input_ids=torch.tensor([ids])).logits[0].float()            # (n, V)


def _ragged_logits(target, prompts: list[list[int]], extra: list[int]):
    """Prefill every prompt in one call, then one call with each sequence's next token (extra[s]) →
    (logits of each prompt's positions, logits of the decode rows)."""
    fwd = ragged.RaggedForward(target)
    cache = fwd.cache(len(prompts) + 1, 8)                                             # grows: reserve()
    cache.reserve(max(map(len, prompts)) + 1)
    ids = torch.tensor([t for p in prompts for t in p])
    slot = torch.cat([torch.full((len(p),), s + 1) for s, p in enumerate(prompts)])  # slot 0 left empty
    pos = torch.cat([torch.arange(len(p)) for p in prompts])
    pre = fwd(cache, ids, slot, pos, torch.arange(len(ids))).float()
    dec = fwd(cache, torch.tensor(extra), torch.arange(1, len(prompts) + 1),
              torch.tensor([len(p) for p in prompts]), torch.arange(len(prompts))).float()
    return pre, dec


def test_ragged_forward_equals_the_stock_forward_on_a_toy():
    t = tiny_llama_target(vocab_size=40, hidden_size=32, n_layers=3)
    assert ragged.supports(t)
    prompts = [[1, 5, 9, 2, 7], [3], [8, 8, 4]]
    pre, dec = _ragged_logits(t, prompts, [11, 12, 13])
    o = 0
    for s, p in enumerate(prompts):
        full = _stock_logits(t, p + [11 + s])
        assert torch.allclose(pre[o:o + len(p)], full[:-1], atol=1e-4, rtol=1e-4)
        assert torch.allclose(dec[s], full[-1], atol=1e-4, rtol=1e-4)
        o += len(p)
    fwd = ragged.RaggedForward(t)
    with pytest.raises(ValueError, match="capacity"):
        fwd(fwd.cache(1, 4), torch.tensor([1]), torch.tensor([0]), torch.tensor([4]), torch.tensor([0]))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_ragged_forward_on_the_embedded_target(dtype):
    """Three chat prompts prefilled together, then a decode row each: the stock forward's logits to within the
    dtype's rounding (fp32 1e-3; bf16: the stock top token is within 0.5 of the ragged top logit)."""
    t = embedded_target(dtype, tune_paths=False)
    prompts = [t.chat_ids(x) for x in ("What is 17 + 25?", "Write a haiku about rain.", "Hi")]
    nxt = [t.tokenizer.encode(" The")[0]] * 3
    pre, dec = _ragged_logits(t, prompts, nxt)
    o = 0
    for s, p in enumerate(prompts):
        full = _stock_logits(t, p + [nxt[s]])
        got = torch.cat([pre[o:o + len(p)], dec[s:s + 1]])
        if dtype == "fp32":
            assert (got - full).abs().max() < 1e-3
        else:
            top = full.argmax(-1)
            assert (got.max(-1).values - got.gather(1, top[:, None])[:, 0]).max() < 0.5
            assert (got.argmax(-1) == top).float().mean() >= 0.9
        o += len(p)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_draw_inverts_the_cdf(dtype):
    """The native draw (csrc/sample_rows.h) picks the token whose CDF interval holds u·total: against a float64
    CDF it agrees on every row whose uniform is not within rounding of an interval's edge, and a token of zero
    mass (−inf logit) is never drawn."""
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(256, 3000, generator=g) * 3).to(dtype)                             # (R, V)
    logits[:, ::7] = float("-inf")
    u = torch.rand(256, generator=g)
    u[:4] = torch.tensor([0.0, 1.0 - 2 ** -24, 0.5, 0.25])
    drawn = ragged.sample_icdf(logits, 0.8, u)
    if drawn is None:
        pytest.skip("native extension not built here")
    cdf = torch.softmax(logits.double() / 0.8, -1).cumsum(-1)                                 # (R, V)
    ref = torch.searchsorted(cdf, (u.double() * cdf[:, -1])[:, None], right=True)[:, 0].clamp_max(2999)
    edge = (cdf - u.double()[:, None] * cdf[:, -1:]).abs().min(-1).values < 1e-5
    assert bool((drawn[~edge] == ref[~edge]).all())
    assert int(edge.sum()) < 8
    assert not bool((drawn % 7 == 0).any())
    with pytest.raises(RuntimeError, match="no token of positive mass"):
        ragged.sample_icdf(torch.full((2, 100), float("-inf"), dtype=dtype), 1.0, torch.zeros(2))


@pytest.mark.parametrize("slot, n_keys", [
    ([0, 1, 2, 3, 4, 5], [3, 9, 1, 30, 12, 7]),                 # a decode step: each slot's one new row
    ([0, 2, 2, 2, 5, 1], [7, 3, 4, 5, 30, 12]),                 # three alone, one prompt's three rows
    ([4, 4, 4, 4], [1, 2, 3, 4]),                               # one prompt, nothing alone
    ([3, 0, 1, 2, 5, 4, 3, 3], [9, 5, 6, 7, 8, 2, 10, 11]),     # a slot's rows apart in the call
])
def test_accelerator_attention_is_each_rows_own_attention(slot, n_keys):
    """``attend_grouped`` (the path off the CPU, run here on the CPU): every row attends to its own slot's first
    n_keys positions, whichever branch (the whole cache in place, or the rows grouped by slot) takes it."""
    g = torch.Generator().manual_seed(1)
    S, Hk, rep, C, D = 6, 3, 3, 40, 16
    K, V = torch.randn(S, Hk, C, D, generator=g), torch.randn(S, Hk, C, D, generator=g)
    q = torch.randn(len(slot), Hk * rep, D, generator=g)
    slot, n_keys = torch.tensor(slot), torch.tensor(n_keys)
    got = ragged.attend_grouped(q, K, V, slot, n_keys, 0.25, Hk).double()
    assert (got - _reference(q, K, V, slot, n_keys, 0.25)).abs().max() < 1e-5


def test_the_accelerator_path_samples_what_the_cpu_path_samples():
    """sample_stream on the ragged forward with the accelerator's attention (forced here on the CPU): the same
    answers as with the CPU's attention, at T = 0 and at T = 1 (the same uniforms)."""
    from dspark_viz.train.sample import sample_stream
    t = tiny_llama_target(vocab_size=40, hidden_size=32, n_layers=3)
    prompts = [(i, [1 + i % 7, 5, 9, 2][: 1 + i % 4], 100 + i) for i in range(9)]

    def run(grouped, T):
        fwd = ragged.forward_for(t)
        fwd.grouped = grouped
        return dict(sample_stream(t, prompts, T, max_new_tokens=12, slots=4))

    for T in (0.0, 1.0):
        assert run(True, T) == run(False, T)
    ragged.forward_for(t).grouped = False


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_exact_rows_are_each_sequences_own_forward(dtype, threads):
    """The exact ragged forward (ragged_layer): random blocks of 1–8 rows from eight sequences in one call (up to 64
    rows), and each sequence's block alone in a call of its own — every row's logits and features bit-identical to
    the target's own few-token forward of that block over that sequence's cache, at 1 and 2 threads."""
    t = embedded_target(dtype, tune_paths=False)
    fwd = ragged.forward_for(t)
    if not fwd.can_exact:
        pytest.skip("the exact ragged forward needs the kernel and the fused layers here")
    g = torch.Generator().manual_seed(7 + threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        texts = ["What is 17 + 25?", "Write a haiku about rain.", "Hi", "Name three colours.", "Explain gravity.",
                 "Sort [3, 1, 2].", "Translate 'cat' to French.", "Why is the sky blue?"]
        prompts = [t.chat_ids(x) for x in texts]
        caches, cache = [], fwd.cache(len(prompts), 8)
        for s, p in enumerate(prompts):
            own, _ = t.prefill(p)
            cache.adopt(s, own.layers)
            caches.append(own)
        for _ in range(2):                                                   # two rounds of blocks
            blocks = [torch.randint(0, t.vocab_size, (int(torch.randint(1, 9, (1,), generator=g)),),
                                    generator=g).tolist() for _ in prompts]
            want = [t.forward(torch.tensor([b]), c, features=True) for b, c in zip(blocks, caches)]
            start = [c.get_seq_length() - len(b) for b, c in zip(blocks, caches)]
            ids = torch.tensor([x for b in blocks for x in b])
            slot = torch.cat([torch.full((len(b),), s) for s, b in enumerate(blocks)])
            pos = torch.cat([torch.arange(p0, p0 + len(b)) for p0, b in zip(start, blocks)])
            cache.reserve(int(pos.max()) + 1)
            rows = torch.arange(len(ids))
            together, feats = fwd(cache, ids, slot, pos, rows, features=t.feature_layers, exact=True)
            o = 0
            for s, (b, w) in enumerate(zip(blocks, want)):
                n = len(b)
                alone, f_alone = fwd(cache, torch.tensor(b), torch.full((n,), s), pos[o:o + n], torch.arange(n),
                                     features=t.feature_layers, exact=True)
                assert torch.equal(together[o:o + n].float(), w.logits[0].float()), (dtype, threads, s)
                assert torch.equal(alone.float(), w.logits[0].float())
                assert torch.equal(feats[o:o + n], w.features[0]) and torch.equal(f_alone, w.features[0])
                o += n
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["fast-avx512-fma", "fast-avx2"])
def test_exact_rows_take_the_variant_the_machine_chose(path):
    """Where the machine chose another kernel variant for the target (fast/tune.py), the exact ragged forward runs
    it too: each row's logits keep the bits of the target's own forward of its block, in that variant."""
    from dspark_viz.fast import tune

    t = embedded_target("bf16", tune_paths=False)
    fwd = ragged.forward_for(t)
    if not fwd.can_exact or path not in tune.paths_here(t.dtype):
        pytest.skip(f"no {path} variant or no exact ragged forward here")
    kept = dict(t.paths.sizes)
    t.paths.sizes = {n: path for n in tune.SIZES}
    try:
        prompts = [t.chat_ids(x) for x in ("Hi", "Name three colours.", "Why is the sky blue?")]
        caches, cache = [], fwd.cache(len(prompts), 8)
        for s, p in enumerate(prompts):
            own, _ = t.prefill(p)
            cache.adopt(s, own.layers)
            caches.append(own)
        blocks = [[1000 + 17 * i for i in range(n)] for n in (1, 5, 8)]
        want = [t.forward(torch.tensor([b]), c) for b, c in zip(blocks, caches)]
        start = [c.get_seq_length() - len(b) for b, c in zip(blocks, caches)]
        ids = torch.tensor([x for b in blocks for x in b])
        slot = torch.cat([torch.full((len(b),), s) for s, b in enumerate(blocks)])
        pos = torch.cat([torch.arange(p0, p0 + len(b)) for p0, b in zip(start, blocks)])
        cache.reserve(int(pos.max()) + 1)
        together = fwd(cache, ids, slot, pos, torch.arange(len(ids)), exact=True)
        assert torch.equal(together.float(), torch.cat([w.logits[0] for w in want]).float())
        assert t.paths.at(40) == path                                   # 9–64 tokens keep the variant of 1–8
    finally:
        t.paths.sizes = kept


@pytest.mark.slow
def test_hf_generate_takes_the_variant_the_machine_chose():
    """HF `generate` in the bench runs the kernel variant the target's own forwards run, so at T = 0 it commits what
    our plain decoding commits in that variant (bf16, where the machine has more than one)."""
    from dspark_viz.evaluation.speed_methods import BenchSettings, hf_generate, plain
    from dspark_viz.fast import tune

    t = embedded_target("bf16", tune_paths=False)
    if "fast-avx512-fma" not in tune.paths_here(t.dtype):
        pytest.skip("one bf16 kernel variant on this CPU")
    kept = dict(t.paths.sizes)
    t.paths.sizes = {n: "fast-avx512-fma" for n in tune.SIZES}
    try:
        s = BenchSettings(max_new_tokens=24)
        for prompt in ("Name three colours.", "Write a haiku about rain.", "Explain gravity in one sentence."):
            ids = t.chat_ids(prompt)
            assert hf_generate(t, ids, s).output_ids == plain(t, ids, s).output_ids, prompt
    finally:
        t.paths.sizes = kept
