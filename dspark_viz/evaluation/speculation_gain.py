"""The speculation gain (paper Eq. 1) at each verified length ℓ: tokens per second of a drafted round against a
plain step's, on one engine.

Legend: γ block size, ℓ verified drafts, m accepted drafts of a round, n committed tokens of a round (m + the
bonus), a_k = P(m ≥ k) prefix survival, t_draft / t_verify(ℓ) / t_plain seconds (round_timing.RoundTimes).

Eq. 1 gives the latency per generated token of speculative decoding, L = (T_draft + T_verify) / τ. Plain decoding
commits one token per step of t_plain, so on the same engine

    gain(ℓ) = E[n | ℓ] · t_plain / (t_draft + t_verify(ℓ)),      E[n | ℓ] = 1 + Σ_{k ≤ ℓ} a_k

and speculating at ℓ pays exactly when gain(ℓ) > 1. ``expected_committed`` reads E[n | ℓ] for every ℓ off
recorded rounds that verified their whole block (a round's acceptance of slot k does not depend on how many
slots after k were verified, so one full-block round answers every ℓ ≤ γ). A round that accepted a stop token
ends without a bonus, so E[n | ℓ] falls short of 1 + Σ_{k≤ℓ} a_k by the share of such rounds among those that
reach it.

Pure functions of traces and numbers; no model, no clock.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from ..trace import Round, Trace


def committed_at(r: Round, ell: int) -> int:
    """Tokens the full-block round ``r`` would have committed had it verified only ℓ of its drafts: the accepted
    ones among the first ℓ, plus the target's bonus token — none when the round accepted a stop token within
    those ℓ (it ends there)."""
    m = r.accepted
    ends_on_stop = r.stopped and r.bonus is None                  # the m-th accepted draft was a stop token
    return min(m, ell) + (0 if ends_on_stop and ell >= m else 1)


def full_block_rounds(traces: Trace | Iterable[Trace]) -> list[Round]:
    """Rounds that drafted and verified every drafted slot (ℓ = γ of that round)."""
    traces = [traces] if isinstance(traces, Trace) else traces
    return [r for t in traces for r in t.rounds if r.drafts and r.ell == len(r.drafts)]


def expected_committed(traces: Trace | Iterable[Trace]) -> np.ndarray:
    """(γ + 1,) E[n | ℓ] for ℓ = 0 … γ, the mean over full-block rounds of what each would commit at ℓ."""
    rounds = full_block_rounds(traces)
    if not rounds:
        raise ValueError("no full-block rounds (ℓ = γ) in these traces: record them with a fixed ℓ = γ policy")
    gamma = min(len(r.drafts) for r in rounds)
    return np.array([np.mean([committed_at(r, ell) for r in rounds]) for ell in range(gamma + 1)])


def gain(e_committed, t_plain: float, t_draft: float, t_verify) -> np.ndarray:
    """(γ + 1,) gain(ℓ) = E[n | ℓ] · t_plain / (t_draft + t_verify(ℓ)) (module docstring)."""
    e = np.asarray(e_committed, dtype=float)
    tv = np.asarray(t_verify, dtype=float)[: len(e)]
    if len(tv) < len(e):
        raise ValueError(f"need a verify time for each ℓ = 0 … {len(e) - 1}, got {len(tv)}")
    return e * float(t_plain) / (float(t_draft) + tv)


def round_gain(e_committed, times) -> np.ndarray:
    """gain(ℓ) with the times of a round_timing.RoundTimes."""
    return gain(e_committed, times.t_plain, times.t_draft, times.t_verify)


def best_length(gains) -> int:
    """The ℓ ≥ 1 with the largest gain (the smallest ℓ on a tie)."""
    g = np.asarray(gains, dtype=float)
    if len(g) < 2:
        raise ValueError("need gains for ℓ = 0 and at least ℓ = 1")
    return 1 + int(np.argmax(g[1:]))


def break_even_survival(t_plain: float, t_draft: float, t_verify_ell: float) -> float:
    """The expected accepted drafts Σ_{k≤ℓ} a_k at which a round at ℓ commits tokens exactly as fast as plain
    decoding: (t_draft + t_verify(ℓ)) / t_plain − 1. At ℓ = 1 it is the acceptance rate a_1 needed; above 1 no
    acceptance rate can make ℓ = 1 pay."""
    return (float(t_draft) + float(t_verify_ell)) / float(t_plain) - 1.0


def gain_frame(times: Mapping[str, object], acceptance: Mapping[str, np.ndarray]):
    """Tidy table for the charts: one row per (machine, acceptance, ℓ ≥ 1) with the round's times (ms), E[n | ℓ],
    the gain and whether ℓ is that curve's best.

    ``times``: machine label → round_timing.RoundTimes; ``acceptance``: label → E[n | ℓ]
    (``expected_committed``)."""
    import pandas as pd

    rows = []
    for machine, t in times.items():
        for acc, e_n in acceptance.items():
            g = round_gain(e_n, t)
            best = best_length(g)
            for ell in range(1, len(e_n)):
                rows.append(dict(machine=machine, acceptance=acc, ell=ell, expected_committed=float(e_n[ell]),
                                 draft_ms=1e3 * t.t_draft, verify_ms=1e3 * t.t_verify[ell],
                                 round_ms=1e3 * t.t_round(ell), plain_ms=1e3 * t.t_plain,
                                 gain=float(g[ell]), best=ell == best))
    return pd.DataFrame(rows)


def verdict(ratio: float, what: str = "speculation with the shipped drafter") -> str:
    """One sentence on a speed ratio against plain decoding (``ratio`` = speculative tokens/s ÷ plain tokens/s)."""
    if not ratio > 0:
        raise ValueError(f"a speed ratio must be > 0, got {ratio}")
    x = f"×{ratio:.2f}" if round(ratio, 2) != 1 else f"×{ratio:.3f}"      # never "slower … ×1.00"
    if ratio >= 1:
        return f"{what} is faster than plain decoding, by {x}."
    return f"{what} is slower than plain decoding: it runs at {x} of plain decoding's speed."


__all__ = ["best_length", "break_even_survival", "committed_at", "expected_committed", "full_block_rounds", "gain",
           "gain_frame", "round_gain", "verdict"]
