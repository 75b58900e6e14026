"""Why a parallel drafter proposes incoherent blocks and a Markov head does not, computed exactly.

Legend: V vocabulary, γ block size, k slot (1-based), x0 the anchor (last committed token), x_k the draft at
slot k, m accepted drafts, τ = m + 1 committed tokens per round (the bonus included), α_k conditional acceptance.

Paper §3.1: "When the context admits multiple plausible continuations, e.g., "of course" and "no problem", a
parallel drafter may produce incoherent combinations such as "of problem" or "no course", because each
position marginalizes over all possible predecessors rather than conditioning on the one actually sampled."

The target is a first-order Markov chain: a V×V bigram table, p_target(x_k | x_{k−1}) = target[x_{k−1}][x_k],
started from the anchor x0. Softmax of arbitrary logits is not rational, so the drafters are written as their
probability rows (``fractions.Fraction``), and every number below is exact:

    ParallelDrafter     p_draft(x_k) = marginals[k−1]              (γ, V)     one row per slot, blind to x_{<k}
    MarkovHeadDrafter   p_draft(x_k | x_{k−1}) = tables[k−1][x_{k−1}]   (γ, V, V)  slot 1 reads x0

The ideal drafter of each kind on a given target:
  - ``independent_marginals_drafter``: q_k = the target's marginal at slot k, what a parallel drafter trained
    with per-slot cross-entropy learns (it "marginalizes over all possible predecessors").
  - ``markov_head_drafter``: q_k(· | x_{k−1}) = p_target(· | x_{k−1}), what softmax(U_k + B[x_{k−1}]) expresses
    on a first-order Markov target with U_k constant and B[x] = log p_target(· | x) (a zero probability is the
    limit B → −∞). Paper: "once position 1 samples "of", the Markov head boosts "course" and suppresses
    "problem" at position 2".

Hand calculation on ``of_course_target()`` (x0 = <ctx>; <ctx> → of | no, ½ each; of → course; no → problem;
course, problem → "."), γ = 2:
  parallel   q_1 = (of ½, no ½) = p_target(· | <ctx>): α_1 = 1. q_2 = (course ½, problem ½) whatever x_1 was;
             after "of", "course" has p_target = 1 ≥ ½ (accepted), "problem" has p_target = 0 (rejected, the
             bonus is "course"): α_2 = ½. τ = 1 + α_1 + α_1·α_2 = 5/2; incoherent blocks "of problem" and
             "no course", ¼ each: ½.
  Markov     q_k = p_target at every slot: every ratio p_target / p_draft is 1, α_1 = α_2 = 1, τ = 3, incoherent 0.
  γ = 3 adds slot 3 = "." in both (right whenever slot 2 was): parallel α = (1, ½, 1), τ = 3; Markov τ = 4.

One round is enumerated with ``exact.draft_branches`` (every drafted block) and ``sampling.verify_outcomes``
(the exact law of the accept / reject / bonus rule); ``output_law`` completes a round's committed tokens with
the target's own sampling, and equals ``target_law`` for any drafter: speculative sampling is lossless.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational
from typing import ClassVar, Sequence

from .exact import draft_branches, target_output_distribution
from .sampling import verify_outcomes

Row = tuple[Fraction, ...]
Table = tuple[Row, ...]


def _row(values: Sequence, what: str) -> Row:
    """One probability row as exact Fractions, or a ValueError saying what is wrong with it."""
    for i, v in enumerate(values):
        if not isinstance(v, Rational):
            raise ValueError(f"{what}: probabilities must be exact (int or Fraction), got {v!r} at token {i}")
        if v < 0:
            raise ValueError(f"{what}: negative probability {v} at token {i}")
    row = tuple(Fraction(v) for v in values)
    if sum(row) != 1:
        raise ValueError(f"{what}: the row sums to {sum(row)}, not 1")
    return row


def _table(rows: Sequence[Sequence], what: str) -> Table:
    """A V×V table of rows; row x is the law after token x."""
    V = len(rows)
    for x, r in enumerate(rows):
        if len(r) != V:
            raise ValueError(f"{what}: a V×V table needs {V} entries per row, row {x} has {len(r)}")
    return tuple(_row(r, f"{what}, row {x}") for x, r in enumerate(rows))


@dataclass(frozen=True)
class ParallelDrafter:
    """Independent per-slot rows: slot k samples from marginals[k−1] whatever was drafted before it."""
    marginals: tuple[Row, ...]                                   # (γ, V)
    kind: ClassVar[str] = "independent marginals (parallel)"

    def __post_init__(self):
        rows = tuple(_row(r, f"parallel drafter, slot {k + 1}") for k, r in enumerate(self.marginals))
        if len({len(r) for r in rows}) > 1:
            raise ValueError(f"parallel drafter: slots have different vocabulary sizes {[len(r) for r in rows]}")
        object.__setattr__(self, "marginals", rows)

    @property
    def slots(self) -> int:
        return len(self.marginals)

    @property
    def vocab_size(self) -> int:
        return len(self.marginals[0]) if self.marginals else 0

    def p_draft(self, k: int, prev: int) -> Row:
        """The row slot k (1-based) samples from; ``prev`` = x_{k−1} is ignored."""
        return self.marginals[k - 1]


@dataclass(frozen=True)
class MarkovHeadDrafter:
    """Per-slot conditional tables: slot k samples from tables[k−1][x_{k−1}] (x_0 = the anchor)."""
    tables: tuple[Table, ...]                                    # (γ, V, V)
    kind: ClassVar[str] = "Markov head"

    def __post_init__(self):
        tables = tuple(_table(t, f"Markov-head drafter, slot {k + 1}") for k, t in enumerate(self.tables))
        if len({len(t) for t in tables}) > 1:
            raise ValueError(f"Markov-head drafter: slots have different vocabulary sizes {[len(t) for t in tables]}")
        object.__setattr__(self, "tables", tables)

    @property
    def slots(self) -> int:
        return len(self.tables)

    @property
    def vocab_size(self) -> int:
        return len(self.tables[0]) if self.tables else 0

    def p_draft(self, k: int, prev: int) -> Row:
        """The row slot k (1-based) samples from, given x_{k−1} = ``prev`` (the anchor for slot 1)."""
        return self.tables[k - 1][prev]


@dataclass(frozen=True)
class RoundStats:
    """One round's exact statistics. survival[k−1] = Π_{j≤k} conditional_acceptance[j−1]."""
    tau: Fraction                                # E[m + 1]: committed tokens per round, bonus included
    survival: tuple[Fraction, ...]               # (γ,) P(x_1..x_k all accepted)
    conditional_acceptance: tuple[Fraction, ...] # (γ,) P(x_k accepted | x_1..x_{k−1} accepted); 0 if never reached
    incoherent: Fraction                         # P(the drafted block has target probability 0)


def of_course_target() -> tuple[tuple[str, ...], Table]:
    """The paper's example: after <ctx> the target says "of course" or "no problem" (½ each), then "."; after
    "." a new phrase starts. Returns (vocabulary (V,), bigram table (V, V))."""
    vocab = ("<ctx>", "of", "course", "no", "problem", ".")
    h, o = Fraction(1, 2), Fraction(1)
    bigram = ((0, h, 0, h, 0, 0),      # <ctx> → of | no
              (0, 0, o, 0, 0, 0),      # of → course
              (0, 0, 0, 0, 0, o),      # course → .
              (0, 0, 0, 0, o, 0),      # no → problem
              (0, 0, 0, 0, 0, o),      # problem → .
              (0, h, 0, h, 0, 0))      # . → of | no
    return vocab, _table(bigram, "of_course_target")


def _check(target, gamma: int, anchor: int, drafter=None) -> Table:
    target = _table(target, "target")
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ValueError(f"γ must be an integer ≥ 1, got {gamma!r}")
    if not 0 <= anchor < len(target):
        raise ValueError(f"anchor {anchor} is not a token of the target's vocabulary of size {len(target)}")
    if drafter is not None:
        if drafter.vocab_size != len(target):
            raise ValueError(f"the drafter's vocabulary has size {drafter.vocab_size}, the target's {len(target)}")
        if drafter.slots < gamma:
            raise ValueError(f"the drafter has {drafter.slots} slots, γ = {gamma} needs {gamma}")
    return target


def markov_head_drafter(target, gamma: int) -> MarkovHeadDrafter:
    """The ideal Markov head: q_k(· | x_{k−1}) = p_target(· | x_{k−1}) at every slot k = 1..γ."""
    target = _check(target, gamma, 0)
    return MarkovHeadDrafter((target,) * gamma)


def block_law(drafter, gamma: int, anchor: int = 0) -> dict[tuple[int, ...], Fraction]:
    """The drafter's law of the block (x_1..x_γ) after the anchor x0: {block (γ,): probability}."""
    if isinstance(gamma, bool) or not isinstance(gamma, int) or not 1 <= gamma <= drafter.slots:
        raise ValueError(f"γ must be an integer in 1..{drafter.slots} (the drafter's slots), got {gamma!r}")
    if not 0 <= anchor < drafter.vocab_size:
        raise ValueError(f"anchor {anchor} is not a token of the drafter's vocabulary of size {drafter.vocab_size}")

    def row(seq: list[int]) -> Row:                              # seq = [x0, x_1..x_{k−1}]
        return drafter.p_draft(len(seq), seq[-1])

    return {tuple(block): Fraction(p) for block, _rows, p in draft_branches([anchor], row, gamma)}


def independent_marginals_drafter(target, gamma: int, anchor: int = 0) -> ParallelDrafter:
    """The ideal parallel drafter: q_k = the marginal at slot k of the target's block law after the anchor."""
    target = _check(target, gamma, anchor)
    marginals = [[Fraction(0)] * len(target) for _ in range(gamma)]                  # (γ, V)
    for block, p in block_law(markov_head_drafter(target, gamma), gamma, anchor).items():
        for k, x in enumerate(block):
            marginals[k][x] += p
    return ParallelDrafter(tuple(tuple(r) for r in marginals))


def _round_outcomes(target: Table, drafter, gamma: int, anchor: int):
    """Every (block (γ,), probability, m, committed tokens (m+1,)) of one round: the drafted block, then the
    verification outcome of ``sampling.verify_outcomes``."""
    for block, p_block in block_law(drafter, gamma, anchor).items():
        prefix = (anchor,) + block                                               # (γ+1,)
        p_draft = [drafter.p_draft(k, prefix[k - 1]) for k in range(1, gamma + 1)]   # (γ, V)
        p_target = [target[x] for x in prefix]                                    # (γ+1, V)
        for p, m, bonus, _source in verify_outcomes(list(block), p_draft, p_target):
            yield block, p_block * Fraction(p), m, block[:m] + (bonus,)


def round_stats(target, drafter, gamma: int, anchor: int = 0) -> RoundStats:
    """τ, prefix survival, conditional acceptance and the incoherent share of one round, exactly."""
    target = _check(target, gamma, anchor, drafter)
    coherent = block_law(markov_head_drafter(target, gamma), gamma, anchor)  # the target's own block law
    survival, tau = [Fraction(0)] * gamma, Fraction(0)
    for _block, p, m, committed in _round_outcomes(target, drafter, gamma, anchor):
        tau += p * len(committed)
        for k in range(m):
            survival[k] += p
    incoherent = sum((p for b, p in block_law(drafter, gamma, anchor).items() if b not in coherent), Fraction(0))
    before = [Fraction(1)] + survival[:-1]
    alpha = tuple(s / b if b else Fraction(0) for s, b in zip(survival, before))
    return RoundStats(tau, tuple(survival), alpha, incoherent)


def committed_law(target, drafter, gamma: int, anchor: int = 0) -> dict[tuple[int, ...], Fraction]:
    """The law of the tokens one round commits (m accepted drafts + the bonus): {tokens (m+1,): probability}."""
    target = _check(target, gamma, anchor, drafter)
    out: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
    for _block, p, _m, committed in _round_outcomes(target, drafter, gamma, anchor):
        out[committed] += p
    return dict(out)


def target_law(target, n_tokens: int, anchor: int = 0) -> dict[tuple[int, ...], Fraction]:
    """The target's own law of the first n_tokens tokens after the anchor."""
    target = _check(target, 1, anchor)
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 0:
        raise ValueError(f"n_tokens must be an integer ≥ 0, got {n_tokens!r}")
    start = [Fraction(int(x == anchor)) for x in range(len(target))]
    law = target_output_distribution(target, start, n_tokens + 1)           # tuples (x0, y_1..y_n)
    return {seq[1:]: p for seq, p in law.items()}


def output_law(target, drafter, gamma: int, n_tokens: int = 2, anchor: int = 0) -> dict[tuple[int, ...], Fraction]:
    """The law of the first n_tokens tokens after the anchor when one speculative round commits first and the
    target samples the rest (what a lossless next round gives). Lossless: equal to ``target_law``.

    A round that commits fewer than n_tokens tokens is completed by the target from its last token; looking
    only at rounds that commit ≥ n_tokens would condition on acceptance and is not the target's law."""
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 1:
        raise ValueError(f"n_tokens must be an integer ≥ 1, got {n_tokens!r}")
    out: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
    for committed, p in committed_law(target, drafter, gamma, anchor).items():
        head = committed[:n_tokens]
        for tail, q in target_law(target, n_tokens - len(head), head[-1]).items():
            out[head + tail] += p * q
    return dict(out)


def compare(target, gamma: int, anchor: int = 0) -> list[dict]:
    """One row per ideal drafter (parallel, Markov head): τ, α_1..α_γ and the incoherent share, for a table."""
    rows = []
    for drafter in (independent_marginals_drafter(target, gamma, anchor), markov_head_drafter(target, gamma)):
        s = round_stats(target, drafter, gamma, anchor)
        rows.append({"drafter": drafter.kind, "tau": s.tau,
                     **{f"alpha_{k}": a for k, a in enumerate(s.conditional_acceptance, 1)},
                     "incoherent": s.incoherent})
    return rows


__all__ = ["ParallelDrafter", "MarkovHeadDrafter", "RoundStats", "of_course_target", "independent_marginals_drafter",
           "markov_head_drafter", "block_law", "round_stats", "committed_law", "target_law", "output_law", "compare"]
