"""Pure metrics over Traces.

Legend: γ block size, ℓ verified length, m accepted drafts, k 1-based position.

τ            mean committed tokens per round (bonus included; the prefill token excluded)
drafted      share of rounds that drafted (the rest are plain steps)
survival_k   P(m ≥ k)                         prefix survival (over rounds that drafted)
cond_acc_k   P(m ≥ k | m ≥ k−1, ℓ ≥ k)        position-wise conditional acceptance (paper Fig. 2)
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from .trace import Trace


def _rounds(traces):
    if isinstance(traces, Trace):
        traces = [traces]
    for t in traces:
        yield from t.rounds


def tau(traces: Trace | Iterable[Trace]) -> float:
    n = c = 0
    for r in _rounds(traces):
        n += 1
        c += r.n_committed
    return c / n if n else float("nan")


def acceptance_counts(traces, gamma: int | None = None) -> dict[str, list[int]]:
    """The counts behind both curves, per k: ``at_risk`` rounds that reached slot k with slots < k accepted
    (and verified slot k), ``accepted`` of those whose slot k was accepted, ``rounds`` that drafted."""
    rs = [r for r in _rounds(traces) if r.drafts]
    g = gamma or max((len(r.drafts) for r in rs), default=0)
    at_risk = [sum(r.accepted >= k - 1 and r.ell >= k for r in rs) for k in range(1, g + 1)]
    accepted = [sum(r.accepted >= k for r in rs) for k in range(1, g + 1)]    # m ≥ k implies ℓ ≥ k
    return {"at_risk": at_risk, "accepted": accepted, "rounds": [len(rs)] * g}


def _ratios(num: list[int], den: list[int]) -> list[float]:
    return [a / n if n else float("nan") for a, n in zip(num, den)]


def survival(traces, gamma: int | None = None) -> list[float]:
    c = acceptance_counts(traces, gamma)
    return _ratios(c["accepted"], c["rounds"])


def conditional_acceptance(traces, gamma: int | None = None) -> list[float]:
    c = acceptance_counts(traces, gamma)
    return _ratios(c["accepted"], c["at_risk"])


def drafted_share(traces) -> float:
    """Share of rounds that drafted at least one token (a round the speculation gate skipped, or whose drafter
    proposed nothing, is a plain step); nan without rounds."""
    n = d = 0
    for r in _rounds(traces):
        n += 1
        d += bool(r.drafts)
    return d / n if n else float("nan")


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a proportion (95 % by default); (nan, nan) when n = 0."""
    if n <= 0:
        return float("nan"), float("nan")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def tokens_per_second(traces) -> float:
    if isinstance(traces, Trace):
        traces = [traces]
    toks = sum(t.n_generated for t in traces)
    secs = sum(t.t_total for t in traces)
    return toks / secs if secs > 0 else float("nan")


def time_split(traces) -> dict[str, float]:
    """Fractions of decode time in draft / verify / schedule / other (prefill counted as verify)."""
    if isinstance(traces, Trace):
        traces = [traces]
    d = v = s = 0.0
    total = 0.0
    for t in traces:
        total += t.t_total
        v += t.t_prefill
        for r in t.rounds:
            d, v, s = d + r.t_draft, v + r.t_verify, s + r.t_schedule
    if total <= 0:
        return {"draft": 0.0, "verify": 0.0, "schedule": 0.0, "other": 0.0}
    return {"draft": d / total, "verify": v / total, "schedule": s / total,
            "other": max(0.0, 1 - (d + v + s) / total)}


def per_domain(traces: Iterable[Trace]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[Trace]] = defaultdict(list)
    for t in traces:
        groups[t.meta.get("domain") or "mixed"].append(t)
    return {d: {"tau": tau(ts), "rounds": sum(len(t.rounds) for t in ts), "requests": len(ts)}
            for d, ts in sorted(groups.items())}


def summary(traces) -> dict:
    traces = [traces] if isinstance(traces, Trace) else list(traces)
    return {"tau": tau(traces), "per_domain": per_domain(traces), "survival": survival(traces),
            "conditional_acceptance": conditional_acceptance(traces), "tok_per_s": tokens_per_second(traces),
            "rounds": sum(len(t.rounds) for t in traces), "time_split": time_split(traces)}
