"""Real batched mode (batched.py): several requests verified in one forward, each keeping its own law."""
from __future__ import annotations

import pytest

from dspark_viz.cost import SPSProfile
from dspark_viz.decode import speculative_generate
from dspark_viz.drafters import LookupDrafter, RandomDrafter
from dspark_viz.model.toy import tiny_llama_target
from dspark_viz.scheduler import FixedLength, HardwareAware
from dspark_viz.serving.batched import batched_generate, sim_vs_real

PROMPTS = [[1, 2, 3, 4, 5, 1, 2, 3], [7, 8, 9], [10, 11, 10, 11, 10, 11, 12, 13, 14, 15, 16], [20]]


@pytest.fixture(scope="module")
def tiny():
    return tiny_llama_target(vocab_size=48, hidden_size=32, n_layers=2, eos=47)


@pytest.mark.parametrize("T", [0.0, 1.0])
@pytest.mark.parametrize("make", [lambda: LookupDrafter(gamma=4, vocab_size=48),
                                  lambda: RandomDrafter(48, gamma=4, seed=2)], ids=["lookup", "random"])
def test_batched_equals_one_request_at_a_time(tiny, make, T):
    """Same lengths (FixedLength) and per-request seeds: every request's tokens equal the single-request
    loop's, so batching inherits its exactness (padding, holes and positions do not leak across rows)."""
    d = make()
    res = batched_generate(tiny, d, prompt_ids=PROMPTS, policy=FixedLength(3), temperature=T, max_new_tokens=20,
                           seed=5)
    for r, p in enumerate(PROMPTS):
        one = speculative_generate(tiny, d, prompt_ids=p, policy=FixedLength(3), temperature=T, max_new_tokens=20,
                                   seed=5 + r)
        assert res.traces[r].output_ids == one.output_ids, r
    assert res.rounds and all(br.B == sum(1 + e for e in br.lengths) for br in res.rounds)
    assert res.tokens == sum(len(t.output_ids) - 1 for t in res.traces)


def test_batched_scheduler_allocates_across_requests(tiny):
    d = RandomDrafter(48, gamma=4, seed=2)
    steep = SPSProfile("steep", [1, 4, 8, 16], [10.0, 8.0, 5.0, 2.0])
    res = batched_generate(tiny, d, prompt_ids=PROMPTS, policy=HardwareAware(), sps=steep, temperature=1.0,
                           max_new_tokens=12, seed=0)
    assert any(len(set(br.lengths)) > 1 for br in res.rounds)          # lengths differ across requests
    gap = sim_vs_real(res, steep)
    assert gap["rounds"] == len(res.rounds) and gap["real_throughput"] > 0 and gap["predicted_throughput"] > 0


def test_batched_bad_input(tiny):
    d = LookupDrafter(gamma=4, vocab_size=48)
    with pytest.raises(ValueError, match="1…8 requests"):
        batched_generate(tiny, d, prompt_ids=[[1]] * 9)
    with pytest.raises(ValueError, match="empty"):
        batched_generate(tiny, d, prompt_ids=[[1], []])


def test_batched_neural_drafter_features_per_row():
    """A DSpark drafter reads each row's own target features (padding stripped) in the batch."""
    import torch

    from dspark_viz.drafters.config import DrafterConfig
    from dspark_viz.drafters.neural_drafter import NeuralDrafter
    from dspark_viz.drafters.neural import build_model, init_from_target

    t = tiny_llama_target(vocab_size=48, hidden_size=64, n_layers=4, eos=47)
    cfg = DrafterConfig.for_target(t, "dspark", draft_vocab=40, rank=8, gamma=4)
    torch.manual_seed(0)
    m = build_model(cfg, t, torch.arange(40))
    init_from_target(m, t)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    d = NeuralDrafter(m, "dspark", t)
    res = batched_generate(t, d, prompt_ids=PROMPTS[:3], policy=FixedLength(4), temperature=1.0, max_new_tokens=16,
                           seed=1)
    for r, p in enumerate(PROMPTS[:3]):
        one = speculative_generate(t, d, prompt_ids=p, policy=FixedLength(4), temperature=1.0, max_new_tokens=16,
                                   seed=1 + r)
        assert res.traces[r].output_ids == one.output_ids, r


def test_batched_evaluation_gives_the_sequential_traces(tiny):
    from dspark_viz.evaluation.full_block import evaluate_drafter

    d = RandomDrafter(48, gamma=4, seed=2)
    tiny.chat_ids = lambda text: [int(c) % 47 for c in text.encode()][:12]     # a toy chat template
    recs = [{"turns": [t], "domain": dom} for t, dom in
            (("abc", "math"), ("hello there", "chat"), ("def f(x):", "code"), ("zzz", "math"), ("xy", "chat"))]
    seq = evaluate_drafter(tiny, d, recs, temperature=1.0, max_new_tokens=12, seed=3, progress=False)
    bat = evaluate_drafter(tiny, d, recs, temperature=1.0, max_new_tokens=12, seed=3, progress=False, batch=3)
    assert [t.output_ids for t in bat["traces"]] == [t.output_ids for t in seq["traces"]]
    assert bat["tau"] == seq["tau"] and bat["per_domain"] == seq["per_domain"]


def test_batched_with_a_gate_per_request_keeps_each_output(tiny):
    """``fallback=True``: each request has its own speculation gate in the shared round; a round it skips is a
    plain step for that row only, so every request's greedy output still equals its single-request one."""
    d = LookupDrafter(gamma=4, vocab_size=48)
    res = batched_generate(tiny, d, prompt_ids=PROMPTS, policy=FixedLength(3), temperature=0.0, max_new_tokens=24,
                           seed=1, fallback=True)
    for r, p in enumerate(PROMPTS):
        one = speculative_generate(tiny, d, prompt_ids=p, policy=FixedLength(3), temperature=0.0,
                                   max_new_tokens=24, seed=1 + r, fallback=False)
        assert res.traces[r].output_ids == one.output_ids, r
        assert all(rd.gate is not None for rd in res.traces[r].rounds)
    assert all(rd.t_schedule > 0 for tr in res.traces for rd in tr.rounds if rd.drafts)
    with pytest.raises(ValueError, match="fallback"):
        batched_generate(tiny, d, prompt_ids=PROMPTS, fallback="yes")
