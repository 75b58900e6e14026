"""The Markov-head toy (dspark_viz/markov_toy.py): the paper's "of course" / "no problem" example, exactly.

Legend: V vocabulary, γ block size, α_k conditional acceptance, τ committed tokens per round (bonus included).
"""
from __future__ import annotations

from fractions import Fraction as F

import pytest
from conftest import random_fraction_table

from dspark_viz.exact import exact_output_distribution
from dspark_viz.markov_toy import (MarkovHeadDrafter, ParallelDrafter, block_law, committed_law, compare,
                                   independent_marginals_drafter, markov_head_drafter, of_course_target,
                                   output_law, round_stats, target_law)
from dspark_viz.scheduler import FixedLength

VOCAB, TARGET = of_course_target()
OF, COURSE, NO, PROBLEM = (VOCAB.index(w) for w in ("of", "course", "no", "problem"))
HALF = F(1, 2)


def _drafters(target, gamma):
    return [independent_marginals_drafter(target, gamma), markov_head_drafter(target, gamma)]


def test_the_example_is_tiny_and_exact():
    assert len(VOCAB) <= 6 and len(TARGET) == len(VOCAB)
    assert all(isinstance(p, F) for row in TARGET for p in row)


def test_the_parallel_drafter_proposes_every_pairing_with_a_quarter():
    law = block_law(independent_marginals_drafter(TARGET, 2), 2)
    assert law == {(OF, COURSE): F(1, 4), (OF, PROBLEM): F(1, 4), (NO, COURSE): F(1, 4), (NO, PROBLEM): F(1, 4)}


def test_the_markov_head_proposes_the_targets_own_blocks():
    assert block_law(markov_head_drafter(TARGET, 2), 2) == {(OF, COURSE): HALF, (NO, PROBLEM): HALF}


def test_hand_calculation_gamma_2():
    par = round_stats(TARGET, independent_marginals_drafter(TARGET, 2), 2)
    assert par.conditional_acceptance == (1, HALF) and par.survival == (1, HALF)
    assert par.tau == F(5, 2) and par.incoherent == HALF
    mar = round_stats(TARGET, markov_head_drafter(TARGET, 2), 2)
    assert mar.conditional_acceptance == (1, 1) and mar.survival == (1, 1)
    assert mar.tau == 3 and mar.incoherent == 0
    assert mar.tau > par.tau
    assert all(isinstance(v, F) for s in (par, mar) for v in (s.tau, s.incoherent, *s.survival,
                                                             *s.conditional_acceptance))


def test_gamma_3_adds_a_sure_slot_to_both():
    par = round_stats(TARGET, independent_marginals_drafter(TARGET, 3), 3)
    assert par.conditional_acceptance == (1, HALF, 1) and par.tau == 3 and par.incoherent == HALF
    mar = round_stats(TARGET, markov_head_drafter(TARGET, 3), 3)
    assert mar.conditional_acceptance == (1, 1, 1) and mar.tau == 4 and mar.incoherent == 0


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_survival_is_the_product_of_conditional_acceptances(gamma, seed):
    target = random_fraction_table(4, seed=seed, lo=0, hi=4)
    drafters = _drafters(target, gamma) + [MarkovHeadDrafter([random_fraction_table(4, seed=10 + k + seed)
                                                              for k in range(gamma)])]
    for drafter in drafters:
        s = round_stats(target, drafter, gamma)
        prod = F(1)
        for surv, alpha in zip(s.survival, s.conditional_acceptance):
            prod *= alpha
            assert surv == prod
        assert s.tau == 1 + sum(s.survival)
        assert s.tau == sum(p * len(c) for c, p in committed_law(target, drafter, gamma).items())


def test_compare_gives_one_table_row_per_drafter():
    rows = compare(TARGET, 2)
    assert rows == [{"drafter": "independent marginals (parallel)", "tau": F(5, 2), "alpha_1": 1, "alpha_2": HALF,
                     "incoherent": HALF},
                    {"drafter": "Markov head", "tau": 3, "alpha_1": 1, "alpha_2": 1, "incoherent": 0}]


def _wrong_drafters(V, gamma):
    """Drafters that disagree with the target at slot 1 too, so rounds commit 1, 2, … tokens."""
    uniform = ParallelDrafter([[F(1, V)] * V for _ in range(gamma)])
    noisy = MarkovHeadDrafter([random_fraction_table(V, seed=20 + k) for k in range(gamma)])
    return [uniform, noisy]


@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_speculative_sampling_is_lossless_for_either_drafter(gamma):
    cases = [(TARGET, d) for d in _drafters(TARGET, gamma) + _wrong_drafters(len(TARGET), gamma)]
    other = random_fraction_table(4, seed=5, lo=0, hi=4)
    cases += [(other, d) for d in _drafters(other, gamma) + _wrong_drafters(4, gamma)]
    for target, drafter in cases:
        first = output_law(target, drafter, gamma, n_tokens=1)
        assert first == {(x,): p for x, p in enumerate(target[0]) if p > 0}
        for n in (2, 3):
            assert output_law(target, drafter, gamma, n_tokens=n) == target_law(target, n)


def test_a_round_that_commits_two_is_not_a_sample_of_two_target_tokens():
    """Why output_law completes short rounds with the target: conditioning on a long round biases the law."""
    target = random_fraction_table(4, seed=5, lo=0, hi=4)
    drafter = _wrong_drafters(4, 2)[0]
    long: dict[tuple[int, ...], F] = {}
    for c, p in committed_law(target, drafter, 2).items():
        if len(c) >= 2:
            long[c[:2]] = long.get(c[:2], F(0)) + p
    z = sum(long.values())
    assert 0 < z < 1 and {c: p / z for c, p in long.items()} != target_law(target, 2)
    assert output_law(target, drafter, 2, n_tokens=2) == target_law(target, 2)


@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_the_drafters_run_in_the_librarys_exact_loop(gamma):
    """The same drafters plugged into exact.exact_output_distribution (several rounds) are lossless too."""
    start = [F(int(x == 0)) for x in range(len(TARGET))]
    for drafter in _drafters(TARGET, gamma):
        def round_fn(seq, drafter=drafter):
            return (lambda s: drafter.p_draft(len(s) - len(seq) + 1, s[-1])), None, gamma

        law = exact_output_distribution(TARGET, None, None, FixedLength(gamma), gamma, 5, start, round_fn=round_fn)
        assert {s[1:]: p for s, p in law.items()} == target_law(TARGET, 4)


def test_bad_input_says_what_is_wrong():
    par = independent_marginals_drafter(TARGET, 2)
    with pytest.raises(ValueError, match="sums to 5/6, not 1"):
        round_stats([[HALF, F(1, 3)], [HALF, HALF]], ParallelDrafter([[HALF, HALF]]), 1)
    with pytest.raises(ValueError, match="negative probability -1/2"):
        ParallelDrafter([[F(3, 2), -HALF]])
    with pytest.raises(ValueError, match="γ must be an integer ≥ 1, got 0"):
        round_stats(TARGET, par, 0)
    with pytest.raises(ValueError, match="vocabulary has size 2, the target's 6"):
        round_stats(TARGET, ParallelDrafter([[HALF, HALF]] * 2), 2)
    with pytest.raises(ValueError, match="has 2 slots, γ = 3 needs 3"):
        round_stats(TARGET, par, 3)
    with pytest.raises(ValueError, match="must be exact"):
        ParallelDrafter([[0.5, 0.5]])
    with pytest.raises(ValueError, match="V×V table"):
        markov_head_drafter([[HALF, HALF]], 1)
