"""DSpark + lookup (drafters/hybrid.py): the per-round source choice keeps the target's law exactly.

Legend: V vocabulary, γ block size, ℓ verified length.
"""
from __future__ import annotations

from collections import Counter
from fractions import Fraction as F

import pytest
from test_sampling_exact import ALPHA, STOP8, _stat_setup, _table_drafter, chi2_pvalue

from dspark_viz.cost import SPSProfile
from dspark_viz.decode import generate_rounds, plain_generate, speculative_generate
from dspark_viz.drafters.hybrid import HybridDrafter, best_rate, rho_from_tau
from dspark_viz.drafters.lookup import LookupIndex
from dspark_viz.exact import exact_output_distribution, target_output_distribution
from dspark_viz.model.toy import TableTarget
from dspark_viz.scheduler import FixedLength, HardwareAware

STEEP = SPSProfile("steep", [1, 2, 4, 8], [10.0, 7.0, 6.0, 5.0])       # verifying more costs a lot


def test_lookup_match_statistics_count_longest_match_predictions():
    idx = LookupIndex(max_n=2)
    idx.extend([1, 2, 1, 2, 1, 3])
    # predictions from the longest earlier match, before each token is appended:
    # pos 2 (t=1): (2) unseen → no trial;  pos 3 (t=2): (2,1) unseen, (1) → 2: hit at n = 1
    # pos 4 (t=1): (1,2) → 1: hit at n = 2;  pos 5 (t=3): (2,1) → 2: miss at n = 2
    assert idx.trials[1:] == [1, 2] and idx.hits[1:] == [1, 1]
    assert idx.hit_rate(2, prior=0.5, weight=2) == pytest.approx((1 + 1) / (2 + 2))
    assert idx.hit_rate(5) == idx.hit_rate(2)                           # capped at max_n


def test_rho_and_best_rate():
    assert sum(rho_from_tau(2.0, 4) ** k for k in range(1, 5)) == pytest.approx(1.0, abs=1e-9)
    assert rho_from_tau(1.0, 7) == pytest.approx(0.0, abs=1e-9)
    ell, rate = best_rate([0.0, 0.0], STEEP, 0.0)
    assert ell == 0 and rate == pytest.approx(10.0)                     # nothing survives: verify nothing
    ell, rate = best_rate([1.0, 1.0, 1.0], STEEP, 0.0)
    assert ell == 3 and rate == pytest.approx(4 / STEEP.step_time(4))


def _hybrid(dr, prior=0.5, tau=2.5):
    return HybridDrafter(dr, STEEP, lookup_gamma=3, neural_tau=tau, neural_draft_s=0.02, prior=prior)


@pytest.mark.parametrize("prompt,both", [([2, 0, 1, 2, 0], True), ([1, 1, 1], False)], ids=["repeat", "run"])
@pytest.mark.parametrize("stop_ids", [(), (3,)], ids=["no-stop", "stop-d"])
def test_hybrid_output_law_equals_target_exactly(table4, draft4, prompt, both, stop_ids):
    """Exact enumeration of the whole loop with the hybrid's own per-round choice (both sources occur
    after the "repeat" prompt without the stop token)."""
    dr = _table_drafter(draft4)
    hy = _hybrid(dr)
    seen = Counter()

    def round_fn(seq):
        source, toks, conf = hy.round_plan(prompt, seq)
        seen[source] += 1
        if source == "lookup":
            onehot = lambda s: [F(int(i == toks[len(s) - len(seq)])) for i in range(4)]   # noqa: E731
            return onehot, (lambda s: conf[len(s) - len(seq)]), len(toks)
        if source == "none":
            return (lambda s: None), None, 0
        return (lambda s: draft4[s[-1]]), (lambda s: dr.confidence_after(s[-1])), dr.gamma

    got = exact_output_distribution(table4, None, None, HardwareAware(), gamma=3, n_tokens=3,
                                    first_token_dist=table4[prompt[-1]], stop_ids=stop_ids, sps=STEEP,
                                    round_fn=round_fn)
    want = target_output_distribution(table4, table4[prompt[-1]], n_tokens=3, stop_ids=stop_ids)
    if both and not stop_ids:
        assert seen["lookup"] > 0 and seen["neural"] > 0, seen
    assert sum(got.values()) == 1
    assert got == want


def test_hybrid_plan_is_what_propose_does(table4, draft4):
    """round_plan (used by the enumeration) and propose (used by the loop) choose alike."""
    dr = _table_drafter(draft4)
    hy = _hybrid(dr)
    tgt = TableTarget(table4)
    for seed in range(20):
        rs = generate_rounds(tgt, hy, prompt_ids=[2, 0, 1, 2, 0], temperature=1.0, max_new_tokens=10, seed=seed,
                             policy=HardwareAware(), sps=STEEP)
        for r in rs:
            committed = rs.trace.output_ids[: len(rs.trace.output_ids) - r.n_committed]
            src, toks, _ = hy.round_plan([2, 0, 1, 2, 0], committed)
            assert {"lookup": "lookup", "none": "none"}.get(r.source, "neural") == src
            if src == "lookup":
                assert [d.token for d in r.drafts] == toks


def test_hybrid_skips_a_draft_that_does_not_pay(table4, draft4):
    """A weak neural drafter (τ ≈ 1) and no lookup match: the round is a plain target step, exact too."""
    dr = _table_drafter(draft4)
    hy = HybridDrafter(dr, STEEP, lookup_gamma=3, neural_tau=1.0, neural_draft_s=0.02)
    assert hy.round_plan([], [0])[0] == "none"                   # nothing to look up in a 1-token context
    tgt = TableTarget(table4)
    tr = speculative_generate(tgt, hy, prompt_ids=[3], temperature=1.0, max_new_tokens=6, seed=0,
                              policy=HardwareAware(), sps=STEEP)
    none = [r for r in tr.rounds if r.source == "none"]
    assert none and all(r.ell == 0 and not r.drafts and r.n_committed == 1 for r in none)
    got = exact_output_distribution(
        table4, None, None, HardwareAware(), gamma=3, n_tokens=3, first_token_dist=table4[3], sps=STEEP,
        round_fn=lambda seq: (lambda s: None, None, 0) if hy.round_plan([3], seq)[0] == "none" else
        ((lambda s, t=hy.round_plan([3], seq)[1]: [F(int(i == t[len(s) - len(seq)])) for i in range(4)]),
         (lambda s, c=hy.round_plan([3], seq)[2]: c[len(s) - len(seq)]), len(hy.round_plan([3], seq)[1])))
    assert got == target_output_distribution(table4, table4[3], n_tokens=3)


def test_hybrid_decode_loop_chi_square():
    """20k seeded decodes through generate_rounds with the hybrid (lookup chosen in round 1 here):
    the two tokens after the fixed anchor follow the target's law."""
    table, law, dr = _stat_setup()
    tgt = TableTarget(table, stop_ids=(STOP8,))
    hy = HybridDrafter(dr, STEEP, lookup_gamma=3, neural_tau=1.2, neural_draft_s=0.05, prior=0.9)
    counts, sources = Counter(), Counter()
    for seed in range(20_000):
        rs = generate_rounds(tgt, hy, prompt_ids=[5, 3, 2, 0], policy=FixedLength(3), temperature=1.0,
                             max_new_tokens=8, seed=seed)
        out: list[int] = []
        for r in rs:
            sources[r.source] += 1
            out += r.committed
            if len(out) >= 2 or r.stopped:
                break
        counts[tuple(out[:1]) if out[0] == STOP8 else tuple(out[:2])] += 1
    assert sources["lookup"] > 1000, sources
    assert chi2_pvalue(counts, law) > ALPHA


def test_hybrid_greedy_equals_plain_on_the_real_target(real_target):
    from dspark_viz.drafters import load_drafter

    hy = load_drafter("dspark+lookup", real_target)
    prompts = ["List the days of the week, then list them again in reverse order.",
               "Write a Python function that returns the sum of a list, with a docstring."]
    used = Counter()
    for p in prompts:
        sp = speculative_generate(real_target, hy, p, max_new_tokens=64, temperature=0)
        pl = plain_generate(real_target, p, max_new_tokens=64, temperature=0)
        assert sp.output_ids == pl.output_ids
        used.update(r.source for r in sp.rounds)
    assert used["lookup"] > 0 and used["neural"] + used["none"] > 0, used


def test_neural_draft_cost_comes_from_the_profile(draft4):
    """The arbiter prices the neural proposal with the time `dspark-viz profile` measured for that drafter
    (meta["draft_s"]); an explicit cost wins; without either, a quarter of a one-token step."""
    dr = _table_drafter(draft4)
    dr.name = "mine"
    timed = SPSProfile("timed", STEEP.batch, STEEP.sps, meta={"draft_s": {"mine": 0.004, "other": 0.5}})
    assert HybridDrafter(dr, timed, neural_tau=1.5).neural_draft_s == pytest.approx(0.004)
    assert HybridDrafter(dr, timed, neural_tau=1.5, neural_draft_s=0.02).neural_draft_s == pytest.approx(0.02)
    assert HybridDrafter(dr, STEEP, neural_tau=1.5).neural_draft_s == pytest.approx(0.25 * STEEP.step_time(1))
    cheap, dear = HybridDrafter(dr, timed, neural_tau=1.5), HybridDrafter(dr, STEEP, neural_tau=1.5)
    assert cheap.rate_neural > dear.rate_neural                    # a cheaper draft is worth more tokens/s


@pytest.mark.slow
def test_profile_times_each_shipped_drafter(real_target):
    from dspark_viz.serving.measure import measure_draft_costs

    costs = measure_draft_costs(real_target, ["dspark", "no-such-drafter"], repeats=2, ctx_len=64)
    assert set(costs) == {"dspark"} and 0 < costs["dspark"] < 1.0
