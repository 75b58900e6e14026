"""Exact law of the speculative decoding loop on a toy target, by enumerating every branch.

Legend: V vocabulary, γ block size, ℓ verified length, m accepted drafts, n_tokens output length.

Any drafter with a known, exact p_draft (``fractions.Fraction`` rows), any confidence function and any
Policy can be checked for losslessness by comparing

    exact_output_distribution(...)  ==  target_output_distribution(...)

Both return {output tuple: Fraction}. The output is (x0, y1, y2, …): x0 is the prefill token, drawn
from ``first_token_dist``; a tuple is shorter than n_tokens when a stop token ends it. The loop below
mirrors dspark_viz.round.speculative_round step by step: draft γ tokens left to right from p_draft,
c_k read from the prefix up to x_{k−1}, ℓ = policy.choose(...) capped by the remaining budget
(round.cap_length: commit ≤ budget), then the exact law of verify_block (sampling.verify_outcomes), commit m tokens +
bonus, next round.

Conventions: ``target`` is a V×V bigram table (rows = p_target(· | previous token)) or a callable
``seq -> row`` where seq is the committed output so far (x0 first); ``drafter_dist_fn(seq)`` gives
the draft row for the next slot after ``seq`` (committed output + the drafts so far);
``confidence_fn(seq)`` gives c_k for the slot after ``seq`` (it reads x_{k−1} = seq[-1]), or None
for a drafter without a confidence head.

Teaching variants (``rejection=``; NOT what the library's decode loop does): what happens at the first
rejected slot m+1.
  "residual"  the bonus is drawn from normalize(max(0, p_target − p_draft)) — the real rule, lossless
  "target"    the bonus is drawn from p_target itself (looks harmless; biased)
  "none"      no bonus after a rejection: commit the accepted prefix only and draft again (biased)
After full acceptance the bonus comes from p_target in every variant. Used by tests and notebook 01.
"""
from __future__ import annotations

import copy
from collections import defaultdict
from fractions import Fraction
from typing import Callable, Sequence

from .round import cap_length
from .sampling import verify_outcomes

Row = Sequence[Fraction]
REJECTION_RULES = ("residual", "target", "none")


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


def round_outcomes(toks, rows, pt_rows, stop_ids=(), rejection: str = "residual") -> list[tuple]:
    """Outcomes ``(prob, m, bonus, source)`` of verifying ``toks`` under a rejection rule.

    "residual" is ``sampling.verify_outcomes`` unchanged; the variants rewrite only its residual outcomes
    (same rejection mass at the same slot m+1): "target" redraws the bonus from p_target at that slot,
    "none" commits no bonus (bonus None, source "dropped").
    """
    if rejection not in REJECTION_RULES:
        raise ValueError(f"rejection must be one of {REJECTION_RULES}, got {rejection!r}")
    outs = verify_outcomes(toks, rows, pt_rows, stop_ids)
    if rejection == "residual":
        return outs
    kept = [o for o in outs if o[3] != "residual"]
    mass: dict[int, Fraction] = defaultdict(Fraction)          # rejection mass per accepted length m
    for p, m, _b, src in outs:
        if src == "residual":
            mass[m] += p
    for m, p in sorted(mass.items()):
        if rejection == "none":
            kept.append((p, m, None, "dropped"))
        else:
            kept += [(p * q, m, b, "target") for b, q in enumerate(pt_rows[m]) if q > 0]
    return kept


def exact_output_distribution(target, drafter_dist_fn, confidence_fn, policy, gamma: int, n_tokens: int,
                              first_token_dist: Row, stop_ids=(), sps=None,
                              rejection: str = "residual",
                              copy_policy: bool = False, round_fn=None) -> dict[tuple[int, ...], Fraction]:
    """Exact law of the first n_tokens tokens produced by the speculative decoding loop with
    max_new_tokens = n_tokens (see the module docstring for the argument conventions and the
    ``rejection`` teaching variants).

    ``round_fn(seq) -> (drafter_dist_fn, confidence_fn, gamma)``, when given, picks the drafter of each
    round from the committed output (a drafter that switches proposal source per round, e.g. the
    neural + lookup hybrid); it must only read ``seq``.

    A stateless policy is reset once. copy_policy=True instead deep-copies the policy before every
    ``choose``: a stateful policy (AsyncGlobal, warmed up on past rounds) then answers every branch from the
    same past, instead of remembering sibling branches of the enumeration as if they had happened.
    """
    p_target, stop_ids, out = _row_fn(target), set(stop_ids), defaultdict(Fraction)
    if hasattr(policy, "reset") and not copy_policy:
        policy.reset()

    def one_round(seq: list[int]) -> list[tuple[Fraction, list[int]]]:
        """(probability, newly committed tokens) of every outcome of one round after `seq`."""
        budget, res = n_tokens - len(seq), []
        dist_fn, conf_fn, g = round_fn(seq) if round_fn is not None else (drafter_dist_fn, confidence_fn, gamma)
        for drafts, rows, p_block in draft_branches(seq, dist_fn, g):
            conf = None if conf_fn is None else [conf_fn(seq + drafts[:i]) for i in range(g)]
            pol = copy.deepcopy(policy) if copy_policy else policy
            ell = pol.choose([conf], sps).lengths[0] if g else 0   # nothing drafted: a plain target step
            ell = cap_length(ell, budget, g)                 # the round's own cap: commit ≤ budget
            toks = drafts[:ell]
            pt_rows = [p_target(seq + toks[:k]) for k in range(ell + 1)]   # (ℓ+1, V)
            for p_v, m, bonus, _src in round_outcomes(toks, rows[:ell], pt_rows, stop_ids, rejection):
                res.append((p_block * p_v, toks[:m] + ([bonus] if bonus is not None else [])))
        return res

    def run(seq: list[int], prob: Fraction) -> None:        # seq: committed output; seq[-1] = anchor x0
        if len(seq) >= n_tokens or seq[-1] in stop_ids:
            out[tuple(seq)] += prob
            return
        outcomes = one_round(seq)
        stuck = sum((p for p, new in outcomes if not new), Fraction(0))
        if stuck:                                            # "none": a round that commits nothing is redrawn
            if stuck == 1:
                raise ValueError(f"after {seq} no round ever commits a token under rejection={rejection!r}")
            outcomes = [(p / (1 - stuck), new) for p, new in outcomes if new]   # geometric series of retries
        for p, new in outcomes:
            run(seq + new, prob * p)

    for x, p in enumerate(first_token_dist):
        if p > 0:
            run([x], Fraction(p))
    return dict(out)


def total_variation(d1: dict, d2: dict) -> Fraction:
    """½ Σ |d1 − d2| over the union of outcomes (exact for Fraction inputs)."""
    keys = set(d1) | set(d2)
    return sum((abs(d1.get(k, 0) - d2.get(k, 0)) for k in keys), Fraction(0)) / 2


def marginal(law: dict[tuple[int, ...], Fraction], position: int) -> dict[int | None, Fraction]:
    """Law of the token at ``position`` of the output tuples (None: the output ended before it)."""
    out: dict[int | None, Fraction] = defaultdict(Fraction)
    for seq, p in law.items():
        out[seq[position] if position < len(seq) else None] += p
    return dict(sorted(out.items(), key=lambda kv: (kv[0] is None, kv[0] if kv[0] is not None else 0)))


__all__ = ["target_output_distribution", "exact_output_distribution", "draft_branches", "round_outcomes",
           "total_variation", "marginal", "REJECTION_RULES"]
