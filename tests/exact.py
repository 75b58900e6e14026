"""Exact law of the speculative decoding loop on a toy target, by enumerating every branch.

Legend: V vocabulary, γ block size, ℓ verified length, m accepted drafts, n_tokens output length.

Importable helper (tests put this folder on sys.path): any drafter with a known, exact p_draft
(``fractions.Fraction`` rows), any confidence function and any Policy can be checked for
losslessness by comparing

    exact_output_distribution(...)  ==  target_output_distribution(...)

Both return {output tuple: Fraction}. The output is (x0, y1, y2, …): x0 is the prefill token, drawn
from ``first_token_dist``; a tuple is shorter than n_tokens when a stop token ends it. The loop below
mirrors dspark_viz.decode.generate_rounds step by step: draft γ tokens left to right from p_draft,
c_k read from the prefix up to x_{k−1}, ℓ = policy.choose(...) capped by the remaining budget
(commit ≤ budget), then the exact law of verify_block (sampling.verify_outcomes), commit m tokens +
bonus, next round.

Conventions: ``target`` is a V×V bigram table (rows = p_target(· | previous token)) or a callable
``seq -> row`` where seq is the committed output so far (x0 first); ``drafter_dist_fn(seq)`` gives
the draft row for the next slot after ``seq`` (committed output + the drafts so far);
``confidence_fn(seq)`` gives c_k for the slot after ``seq`` (it reads x_{k−1} = seq[-1]), or None
for a drafter without a confidence head.
"""
from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import Callable, Sequence

from dspark_viz.sampling import verify_outcomes

Row = Sequence[Fraction]


def _row_fn(target) -> Callable[[list[int]], Row]:
    return target if callable(target) else (lambda seq: target[seq[-1]])


def target_output_distribution(target, first_token_dist: Row, n_tokens: int,
                               stop_ids=()) -> dict[tuple[int, ...], Fraction]:
    """The target's own law of the first n_tokens output tokens (plain ancestral sampling)."""
    p_target, stop_ids, out = _row_fn(target), set(stop_ids), defaultdict(Fraction)

    def walk(seq: list[int], prob: Fraction) -> None:
        if len(seq) >= n_tokens or seq[-1] in stop_ids:
            out[tuple(seq)] += prob
            return
        for x, p in enumerate(p_target(seq)):
            if p > 0:
                walk(seq + [x], prob * p)

    for x, p in enumerate(first_token_dist):
        if p > 0:
            walk([x], Fraction(p))
    return dict(out)


def draft_branches(seq: list[int], drafter_dist_fn, gamma: int):
    """Every draft block after `seq`: (tokens (γ,), p_draft rows (γ, V), probability of the block)."""
    def rec(drafts, rows, prob):
        if len(drafts) == gamma:
            yield list(drafts), list(rows), prob
            return
        row = drafter_dist_fn(seq + drafts)
        for x, p in enumerate(row):
            if p > 0:
                yield from rec(drafts + [x], rows + [row], prob * p)

    yield from rec([], [], Fraction(1))


def exact_output_distribution(target, drafter_dist_fn, confidence_fn, policy, gamma: int, n_tokens: int,
                              first_token_dist: Row, stop_ids=(), sps=None) -> dict[tuple[int, ...], Fraction]:
    """Exact law of the first n_tokens tokens produced by the speculative decoding loop with
    max_new_tokens = n_tokens (see the module docstring for the argument conventions)."""
    p_target, stop_ids, out = _row_fn(target), set(stop_ids), defaultdict(Fraction)
    if hasattr(policy, "reset"):
        policy.reset()

    def run(seq: list[int], prob: Fraction) -> None:        # seq: committed output; seq[-1] = anchor x0
        if len(seq) >= n_tokens or seq[-1] in stop_ids:
            out[tuple(seq)] += prob
            return
        budget = n_tokens - len(seq)
        for drafts, rows, p_block in draft_branches(seq, drafter_dist_fn, gamma):
            conf = None if confidence_fn is None else [confidence_fn(seq + drafts[:i]) for i in range(gamma)]
            ell = policy.choose([conf], sps).lengths[0]
            ell = max(0, min(ell, budget - 1, gamma))        # the decode loop's cap: commit ≤ budget
            toks = drafts[:ell]
            pt_rows = [p_target(seq + toks[:k]) for k in range(ell + 1)]   # (ℓ+1, V)
            for p_v, m, bonus, _src in verify_outcomes(toks, rows[:ell], pt_rows, stop_ids):
                run(seq + toks[:m] + ([bonus] if bonus is not None else []), prob * p_block * p_v)

    for x, p in enumerate(first_token_dist):
        if p > 0:
            run([x], Fraction(p))
    return dict(out)


def total_variation(d1: dict, d2: dict) -> Fraction:
    """½ Σ |d1 − d2| over the union of outcomes (exact for Fraction inputs)."""
    keys = set(d1) | set(d2)
    return sum((abs(d1.get(k, 0) - d2.get(k, 0)) for k in keys), Fraction(0)) / 2
