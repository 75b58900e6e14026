"""Width invariance of the project's few-token path (fast/, csrc/): a token's logits and the features the drafters
read are bit-identical whether it is computed alone (a decode step) or inside a forward of 2–64 tokens (a
verification block, HF prompt lookup's blocks), at fp32 and bf16, in every kernel variant this CPU has, at any thread count. Its
consequence: greedy speculative decoding equals greedy decoding token for token at bf16 too.

Legend: n tokens in one forward, V vocabulary, d hidden size, m chosen feature layers.
"""
from __future__ import annotations

import pytest
import torch
from conftest import embedded_target

from dspark_viz.decode import plain_generate, speculative_generate
from dspark_viz.fast import kernels, lean, tune
from dspark_viz.scheduler import FixedLength, HardwareAware

pytestmark = pytest.mark.slow                        # the embedded target, at two dtypes

NEW = [1000 + 611 * i for i in range(8)]             # 8 tokens after the prompt (any ids do)


def _fast_or_skip(t) -> None:
    """Skip where the project's path is not in use (no compiler, no AVX2, DSPARK_SKINNY=0, DSPARK_FUSED_LAYERS=0, …):
    the promise is the fused path's; torch's stock path picks its kernels by the number of rows."""
    why = kernels._why_not()
    if why is not None:
        pytest.skip(f"kernel not applicable here: {why}")
    if t.paths.matmul != "skinny-kernel" or t.paths.layers != "lean" or not lean.fused(t.model):
        pytest.skip(f"the fused few-token path is not in use (matmul {t.paths.matmul}, layers {t.paths.layers}, "
                    f"fused {lean.fused(t.model)})")


@pytest.fixture(scope="module", params=["fp32", "bf16"])
def target(request):
    t = embedded_target(request.param, tune_paths=False)
    _fast_or_skip(t)
    return t


def _widths(t, cache, prefix_len: int, widths: list[int], new: list[int] = NEW, **kw):
    """The tokens of ``new`` fed in forwards of the given widths after the cached prefix → per-token outputs."""
    t.crop(cache, prefix_len)
    outs, i = [], 0
    for w in widths:
        outs.append(t.forward(torch.tensor([new[i:i + w]]), cache, features=True, hidden=True, **kw))
        i += w
    return (torch.cat([o.logits for o in outs], 1), torch.cat([o.features for o in outs], 1),   # (1, 8, V), (1, 8, m·d)
            torch.cat([o.hidden for o in outs], 1))                                            # (1, 8, d)


@pytest.mark.parametrize("path", ["fast", "fast-avx512-fma", "fast-avx2"])
def test_a_token_gets_the_same_bits_alone_and_in_any_block(target, path):
    """For n = 1 … 8: forward(prefix + n tokens) gives every one of its tokens the logits, features and final
    hidden state that token gets when decoded one at a time — torch.equal, not a tolerance. At 2 threads too."""
    t = target
    if path not in tune.paths_here(t.dtype):
        pytest.skip(f"no {path} variant on this CPU for {t.dtype}")
    ids = t.chat_ids("Name three colours.")
    cache, _ = t.prefill(ids)
    before = torch.get_num_threads()
    try:
        with tune.run_on(t.model, path):
            torch.set_num_threads(1)
            ref = _widths(t, cache, len(ids), [1] * 8)                       # a decode step per token
            for n in range(2, 9):                                            # prefix + n tokens in one forward
                got = _widths(t, cache, len(ids), [n] + [1] * (8 - n))
                for a, b in zip(got, ref):
                    assert torch.equal(a, b), (t.dtype, path, n)
            got = _widths(t, cache, len(ids), [3, 5])                        # a block after a block
            assert all(torch.equal(a, b) for a, b in zip(got, ref))
            t.crop(cache, len(ids))
            last = t.forward(torch.tensor([NEW]), cache, last_only=True).logits  # (1, 1, V): the LM head on one row
            assert torch.equal(last, ref[0][:, -1:])
            torch.set_num_threads(2)                                         # another split across threads
            for widths in ([8], [1] * 8, [4, 4]):
                got = _widths(t, cache, len(ids), widths)
                assert all(torch.equal(a, b) for a, b in zip(got, ref)), (t.dtype, path, widths, "2 threads")
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("path", ["fast", "fast-avx512-fma", "fast-avx2"])
def test_a_token_gets_the_same_bits_in_forwards_of_up_to_64(target, path):
    """Past 8 tokens one sequence's forward stays on the fused path (its products read each weight once for up
    to 64 rows, in each variant — the AVX2 one forced where the CPU has more): 40 tokens give the bits they get one at a time, in one forward of 40, in 12 + 28 and 9 + 31, at 1 and 2
    threads."""
    t = target
    if path not in tune.paths_here(t.dtype):
        pytest.skip(f"no {path} variant on this CPU for {t.dtype}")
    new = [1000 + 173 * i for i in range(40)]
    ids = t.chat_ids("Name three colours.")
    cache, _ = t.prefill(ids)
    before = torch.get_num_threads()
    try:
        with tune.run_on(t.model, path):
            torch.set_num_threads(1)
            ref = _widths(t, cache, len(ids), [1] * 40, new)
            for widths in ([40], [12, 28], [9, 31]):
                assert all(torch.equal(a, b) for a, b in zip(_widths(t, cache, len(ids), widths, new), ref)), widths
            torch.set_num_threads(2)
            assert all(torch.equal(a, b) for a, b in zip(_widths(t, cache, len(ids), [40], new), ref))
    finally:
        torch.set_num_threads(before)


def _policies(dr):
    """The full block, a short fixed block, and (drafters with a confidence head) the hardware-aware scheduler."""
    out = [FixedLength(dr.gamma), FixedLength(2)]
    if getattr(dr, "has_confidence", False):
        out.append(HardwareAware())
    return out


PROMPTS = ["Give three tips for staying focused while studying.",
           "Write a Python function that returns the sum of a list, with a docstring."]


@pytest.fixture(scope="module")
def bf16_target():
    from dspark_viz.model.target import find_embedded_gguf, load_target

    try:
        find_embedded_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    t = load_target(device="cpu", dtype="bf16", tune_paths=False)   # explicit: the machine's default may be fp32
    _fast_or_skip(t)
    return t


@pytest.mark.parametrize("name", ["lookup", "dspark", "dspark-rnn", "dflash", "eagle", "dspark+lookup"])
def test_greedy_speculative_equals_greedy_decoding_at_bf16(bf16_target, name):
    """Every shipped drafter under several policies commits exactly the tokens greedy decoding commits, at bf16:
    verification blocks and decode steps compute the same logits for the same token."""
    from dspark_viz.drafters import load_drafter, speed_only

    t = bf16_target
    dr = speed_only(load_drafter(name, t))
    widths = set()
    for p in PROMPTS:
        plain = plain_generate(t, p, max_new_tokens=40, temperature=0).output_ids
        for policy in _policies(dr):
            sp = speculative_generate(t, dr, p, policy=policy, max_new_tokens=40, temperature=0)
            assert sp.output_ids == plain, (name, policy.name, p)
            widths |= {r.ell + 1 for r in sp.rounds}                  # tokens in each verification forward
    if name != "lookup":                                              # (n-gram lookup may find nothing to draft)
        assert max(widths) >= 3, widths                               # blocks were verified, not only steps


@pytest.mark.parametrize("name", ["dspark", "dflash"])
def test_merged_commits_give_the_drafter_the_same_context_bits(target, name):
    """Commits that wait for the next proposal (NeuralDrafter.commit on a model with ``merges_extends``) leave the
    drafter's context keys and values bit-identical to one extension per commit, and the next draft the same
    tokens and distributions — the speculation gate's plain rounds and a hybrid's lookup rounds change no draft."""
    from dspark_viz.drafters import load_drafter, speed_only
    from dspark_viz.drafters.neural_drafter import PENDING
    from dspark_viz.protocol import Context

    t = target
    dr = speed_only(load_drafter(name, t))
    assert dr.model.merges_extends
    ids = t.chat_ids("Name three colours.")
    cache, out = t.prefill(ids, features=True)
    new = [1000 + 37 * i for i in range(14)]
    feats = t.forward(torch.tensor([new]), cache, features=True).features[0]             # (14, m·d)
    eager, lazy = dr.model.begin(out.features[0]), dr.begin(Context(ids, out.features[0]))
    i = 0
    for w in (1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 2):          # 14 positions; 10 merge into an 8 and a 2
        dr.model.extend(eager, feats[i:i + w], new[i:i + w])
        dr.commit(lazy, new[i:i + w], feats[i:i + w])
        i += w
    assert PENDING in lazy and lazy["n"] == len(ids)      # nothing extended yet
    pos, anchor = len(ids) + len(new), 4242
    for T in (0.0, 1.0):
        g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        want = dr.model.propose(eager, anchor, pos, T, g1, diag=False)
        got = dr.propose(lazy, anchor, pos, T, g2)
        assert got.tokens == want[0] and torch.equal(got.p_draft, want[1]) and got.confidence == want[2]
    assert PENDING not in lazy and lazy["n"] == eager["n"] == pos
    for (ke, ve), (kl, vl) in zip(eager["kv"], lazy["kv"]):
        assert torch.equal(ke, kl) and torch.equal(ve, vl)
