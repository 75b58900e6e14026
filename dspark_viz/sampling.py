"""Pure sampling math: distributions from logits, sampling, lossless block verification.

Legend: V vocabulary, ℓ verified draft length, T temperature (0 = greedy).

verify_block implements the speculative-sampling rule (Leviathan et al. 2023, Chen et al. 2023):
accept x_k with probability min(1, p_target(x_k) / p_draft(x_k)) left to right; at the first
rejection m < ℓ draw the bonus token from normalize(max(0, p_target − p_draft)) at slot m+1;
after full acceptance draw it from p_target at slot ℓ+1. Greedy decoding is the special case
where both distributions are one-hot. A committed stop token ends the round without a bonus.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

RESIDUAL_EPS = 1e-12  # residual mass below this is treated as zero (then sample from p_target)


def probs_from_logits(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """(…, V) logits → (…, V) float32 distribution; T = 0 gives the one-hot argmax."""
    logits = logits.float()
    if temperature < 0:
        raise ValueError(f"temperature must be ≥ 0, got {temperature}")
    if temperature == 0:
        out = torch.zeros_like(logits)
        return out.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    return torch.softmax(logits / temperature, dim=-1)


def sample(p: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """Draw one index from a (V,) distribution (exact argmax when it is one-hot).

    Inverse CDF: the first i with cumsum(p)_i > u, u ~ U[0, Σp). A zero-mass token owns an empty
    interval, so it is never drawn. One cumsum and one search: cheaper than torch.multinomial, which
    prepares a sampler per call.
    """
    if p.dim() != 1:
        raise ValueError("sample expects a (V,) distribution")
    if generator is not None and generator.device != p.device:
        p = p.to(generator.device)
    cdf = p.to(torch.float32 if p.device.type == "mps" else torch.float64).cumsum(0)    # (V,)
    u = torch.rand(1, generator=generator, device=p.device, dtype=cdf.dtype) * cdf[-1]  # (1,)
    i = int(torch.searchsorted(cdf, u, right=True))
    if i >= len(cdf):                      # u rounded up to the total: the last token with mass
        i = int(torch.nonzero(p).max())
    return i


def residual(p_target: torch.Tensor, p_draft: torch.Tensor) -> torch.Tensor:
    """normalize(max(0, p_target − p_draft)); falls back to p_target when the mass is ~0.  (V,)"""
    r = (p_target - p_draft).clamp_min(0)
    z = r.sum()
    return p_target if float(z) <= RESIDUAL_EPS else r / z


@dataclass
class Verdict:
    accepted: int              # m: number of accepted draft tokens
    bonus: int | None          # bonus token (None if a stop token ended the round)
    bonus_source: str          # residual | target | none
    p_target_at: list[float]   # p_target(x_k) for the slots the target looked at (k ≤ m+1, ≤ ℓ)
    stopped: bool              # a committed token is a stop token


def verify_block(
    draft_tokens: list[int],            # (ℓ,)
    p_draft: torch.Tensor,              # (ℓ, V) the exact vectors the drafts were sampled from
    p_target: torch.Tensor,             # (ℓ+1, V) target distribution at each slot (same T)
    generator: torch.Generator | None = None,
    stop_ids: frozenset[int] | set[int] = frozenset(),
) -> Verdict:
    ell = len(draft_tokens)
    assert p_target.shape[0] == ell + 1 and (ell == 0 or p_draft.shape[0] == ell)
    p_at: list[float] = []
    if ell:                                # one gather per side instead of 2ℓ scalar reads
        slots = torch.arange(ell, device=p_target.device)
        toks = torch.tensor(draft_tokens, device=p_target.device)
        pt_all = p_target[slots, toks].tolist()                                # (ℓ,)
        pd_all = p_draft[slots.to(p_draft.device), toks.to(p_draft.device)].tolist()  # (ℓ,)
    for k, x in enumerate(draft_tokens):
        pt, pd = pt_all[k], pd_all[k]
        p_at.append(pt)
        if pd <= 0:
            raise ValueError(f"draft token {x} at slot {k + 1} has p_draft = 0: not sampled from p_draft")
        ratio = pt / pd
        if ratio < 1.0:  # accept with probability pt / pd
            u = float(torch.rand((), generator=generator, device=_dev(generator)))
            if u >= ratio:
                bonus = sample(residual(p_target[k], p_draft[k]), generator)
                return Verdict(k, bonus, "residual", p_at, bonus in stop_ids)
        if x in stop_ids:
            return Verdict(k + 1, None, "none", p_at, True)
    bonus = sample(p_target[ell], generator)
    return Verdict(ell, bonus, "target", p_at, bonus in stop_ids)


def verify_greedy(draft_tokens: list[int], logits: torch.Tensor, stop_ids: frozenset[int] | set[int] = frozenset()
                  ) -> Verdict:
    """verify_block at T = 0, read off the target's logits (ℓ+1, V): a draft is accepted while it is the argmax,
    the bonus is the argmax at the first mismatch (or after the last draft). That is verify_block's verdict on the
    one-hot rows probs_from_logits(…, 0) gives, for any draft rows that give their tokens mass (then
    p_target / p_draft is 0 or ≥ 1 and the residual is the target's one-hot row), without building the rows or
    drawing the uniforms that cannot change an outcome."""
    best = logits.argmax(-1).tolist()                                          # (ℓ+1,)
    p_at: list[float] = []
    for k, x in enumerate(draft_tokens):
        if x != best[k]:
            p_at.append(0.0)
            return Verdict(k, best[k], "residual", p_at, best[k] in stop_ids)
        p_at.append(1.0)
        if x in stop_ids:
            return Verdict(k + 1, None, "none", p_at, True)
    bonus = best[len(draft_tokens)]
    return Verdict(len(draft_tokens), bonus, "target", p_at, bonus in stop_ids)


def _dev(generator: torch.Generator | None) -> torch.device | str:
    return generator.device if generator is not None else "cpu"


def verify_outcomes(draft_tokens, p_draft_rows, p_target_rows, stop_ids=()) -> list[tuple]:
    """The exact law of ``verify_block``: every outcome with its probability.

    Pure and type-generic: rows may be lists of ``fractions.Fraction`` (exact), floats or tensors.
    Returns ``[(prob, m, bonus, source), …]`` with source residual | target | none (a committed
    stop token ended the round; bonus None). Outcomes of probability 0 are left out; the probabilities
    sum to 1. Mirrors verify_block step by step (same order, same stop and residual rules).
    """
    ell = len(draft_tokens)
    p_draft_rows = [] if p_draft_rows is None else p_draft_rows
    if len(p_target_rows) != ell + 1 or len(p_draft_rows) < ell:
        raise ValueError("verify_outcomes needs ℓ draft rows and ℓ+1 target rows")
    stop_ids = set(stop_ids)
    out, alive = [], 1                     # alive = P(x_1..x_k accepted and no stop so far)

    def spread(mass, row, m, source):      # one outcome per bonus token b with mass·row[b] > 0
        for b, pb in enumerate(_as_list(row)):
            if pb > 0:
                out.append((mass * pb, m, b, source))

    for k, x in enumerate(draft_tokens):
        pt, pd = _item(p_target_rows[k][x]), _item(p_draft_rows[k][x])
        if pd <= 0:
            raise ValueError(f"draft token {x} at slot {k + 1} has p_draft = 0: not sampled from p_draft")
        ratio = pt / pd
        if ratio < 1:                      # rejected with probability 1 − pt/pd → residual bonus
            rows_t, rows_d = _as_list(p_target_rows[k]), _as_list(p_draft_rows[k])
            r = [max(a - b, 0 * a) for a, b in zip(rows_t, rows_d)]
            z = sum(r)
            res = rows_t if z <= RESIDUAL_EPS else [v / z for v in r]
            spread(alive * (1 - ratio), res, k, "residual")
            alive = alive * ratio
        if x in stop_ids:
            out.append((alive, k + 1, None, "none"))
            return [o for o in out if o[0] > 0]
    spread(alive, p_target_rows[ell], ell, "target")
    return [o for o in out if o[0] > 0]


def _item(v):
    return v.item() if hasattr(v, "item") else v


def _as_list(row) -> list:
    return [_item(v) for v in (row.tolist() if hasattr(row, "tolist") else row)]
