"""A trace-driven serving simulation: R requests replay recorded rounds under a policy and a profile.

Legend: R concurrent requests, γ block size, ℓ_r verified drafts of request r, m drafts the target
accepted in a recorded round (under full-block verification), c_k / a_k conditional confidence /
prefix survival, Θ throughput.

R slots each replay one recorded Trace after another. One step = every slot's next recorded round; the
policy picks ℓ_r from the round's confidences (calibrated when the trace has them); request r then
commits min(m_r, ℓ_r) + 1 tokens (accepted prefix + bonus) and the step costs 1/SPS(Σ(1+ℓ_r)) +
draft_time seconds. The same seed replays the same rounds for every policy (paired comparison).

``OracleReference`` ("oracle" in a sweep) is the yardstick, not a policy: it reads each round's outcome
and verifies only drafts that will be accepted. What it cannot reach no scheduler can on these drafts,
and the gap between it and HardwareAware bounds what better confidences could buy.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..cost import SPSProfile
from ..registry import LiveNames
from ..scheduler import Policy, StaticThreshold, make_policy, sweep_names

if TYPE_CHECKING:  # pragma: no cover
    from ..trace import Trace


# -- simulation ---------------------------------------------------------------------------------
@dataclass
class SimRound:
    conf: list[float] | None            # (γ,) confidences the policy sees (calibrated when recorded)
    m: int                              # accepted drafts under the recorded verification
    gamma: int                          # drafted slots (caps ℓ)
    censored: bool                      # recorded with ℓ < γ and fully accepted: m is a lower bound


@dataclass
class SimResult:
    policy: str
    R: int
    n_rounds: int
    throughput: float                   # committed tokens / s, all requests
    per_user: float                     # tokens / s of one request (throughput / R)
    mean_budget: float                  # mean ℓ per request-step
    tau: float                          # mean committed tokens per request-step
    mean_batch: float                   # mean B per step
    total_tokens: int
    total_time: float
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _replay(trace) -> list[SimRound]:
    out = []
    for r in trace.rounds:
        if not r.drafts:
            continue
        ds = sorted(r.drafts, key=lambda d: d.k)
        if all(d.confidence_cal is not None for d in ds):
            conf = [float(d.confidence_cal) for d in ds]
        elif all(d.confidence is not None for d in ds):
            conf = [float(d.confidence) for d in ds]
        else:
            conf = None
        out.append(SimRound(conf, int(r.accepted), len(ds), r.accepted >= r.ell and r.ell < len(ds)))
    return out


def simulate(traces: Sequence["Trace"], policy: "Policy", profile: SPSProfile, R: int, n_rounds: int = 200,
             draft_time: float = 0.0, seed: int = 0) -> SimResult:
    """Serve R concurrent requests for n_rounds steps by replaying recorded rounds (see module doc).

    Traces should be recorded with full-block verification (ℓ = γ); a round recorded with ℓ < γ that was
    fully accepted is replayed as if slot ℓ+1 would have been rejected (pessimistic; counted in meta).
    Policies that need confidences skip rounds without them (then replays are no longer paired with
    confidence-free policies on the same traces). ℓ is capped at each round's γ.
    """
    if R < 1 or n_rounds < 1:
        raise ValueError("R and n_rounds must be ≥ 1")
    need_conf = getattr(policy, "needs_confidence", False)
    pools = [[x for x in _replay(t) if x.conf is not None or not need_conf] for t in traces]
    pools = [p for p in pools if p]
    if not pools:
        raise ValueError(f"no replayable rounds for policy {policy.name!r}"
                         + (" (it needs confidences and the traces have none)" if need_conf else ""))
    rng = np.random.default_rng(seed)
    slot_trace = rng.integers(len(pools), size=R)                       # (R,) which trace each slot replays
    slot_pos = np.zeros(R, dtype=int)
    policy.reset()
    total_t, total_tok, total_ell, total_B, censored = 0.0, 0, 0, 0, 0
    for _ in range(n_rounds):
        rounds = []
        for r in range(R):
            if slot_pos[r] >= len(pools[slot_trace[r]]):                # request finished: a new one arrives
                slot_trace[r], slot_pos[r] = rng.integers(len(pools)), 0
            rounds.append(pools[slot_trace[r]][slot_pos[r]])
            slot_pos[r] += 1
        if getattr(policy, "anticipating", False):                       # OracleReference reads the outcomes
            ell = policy.lengths(rounds, profile)
        else:
            conf = [x.conf for x in rounds]                              # (R,) × (γ,) or None
            ell = [min(e, x.gamma) for e, x in zip(policy.choose(conf, profile, explain=False).lengths, rounds)]
        B = sum(1 + e for e in ell)
        total_t += profile.step_time(B) + draft_time
        total_tok += sum(min(x.m, e) + 1 for x, e in zip(rounds, ell))
        total_ell += sum(ell)
        total_B += B
        censored += sum(x.censored and e > x.m for x, e in zip(rounds, ell))
    thr = total_tok / total_t
    return SimResult(policy.name, R, n_rounds, thr, thr / R, total_ell / (R * n_rounds),
                     total_tok / (R * n_rounds), total_B / n_rounds, total_tok, total_t,
                     meta={"profile": profile.name, "draft_time": draft_time, "seed": seed,
                           "censored_replays": censored})


class OracleReference:
    """Not a policy: a reference that knows each round's outcome m (it reads the recorded acceptance, so it
    can neither run in a decode loop nor stay lossless). Per step it picks the budget B ∈ [R, R + Σ γ_r] with
    the most committed tokens per second, (R + min(B − R, Σ m_r)) / t(B), and fills it with drafts that will
    be accepted first (one per request in turn), then, only where a larger forward is faster (the measured
    CPU profile's one-token step is its slowest), with drafts that will be rejected. For the same budget no
    policy commits more tokens in a step: the yardstick against which the real policies are read."""
    name = "oracle"
    anticipating = True
    needs_confidence = False

    def reset(self) -> None:
        pass

    def lengths(self, rounds: Sequence[SimRound], profile: SPSProfile) -> list[int]:
        m, cap = [x.m for x in rounds], [x.gamma for x in rounds]        # (R,) each
        R, good = len(m), sum(m)
        B = np.arange(R, R + sum(cap) + 1)                               # candidate budgets
        tokens = R + np.minimum(B - R, good)
        extra = int(B[np.argmax(tokens / profile.step_time(B))]) - R      # first maximum: the smallest B
        ell = [0] * R
        for limit in (m, cap):                                           # accepted drafts first, then the rest
            while extra and any(e < c for e, c in zip(ell, limit)):
                for r in range(R):
                    if extra and ell[r] < limit[r]:
                        ell[r] += 1
                        extra -= 1
        return ell


def _as_policy(p):
    if isinstance(p, (Policy, OracleReference)):
        return p
    return OracleReference() if str(p).strip().lower() == "oracle" else make_policy(p)


# every policy the serving simulation compares (CLI `simulate`, benchmarks/results.py --simulate): those the
# policy table (scheduler.POLICIES) puts in the sweep, then "oracle" (OracleReference, not a policy)
SWEEP_POLICIES = LiveNames(lambda: sweep_names() + ("oracle",))


def sweep(traces, policies, profile: SPSProfile, Rs: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
          n_rounds: int = 200, draft_time: float = 0.0, seed: int = 0):
    """DataFrame (policy, R, throughput, per_user, mean_budget, tau, mean_batch): simulate for each pair."""
    import pandas as pd

    rows = []
    for p in policies:
        pol = _as_policy(p)
        for R in Rs:
            s = simulate(traces, pol, profile, R, n_rounds, draft_time, seed)
            rows.append(dict(policy=s.policy, R=R, throughput=s.throughput, per_user=s.per_user,
                             mean_budget=s.mean_budget, tau=s.tau, mean_batch=s.mean_batch))
    return pd.DataFrame(rows, columns=["policy", "R", "throughput", "per_user", "mean_budget", "tau",
                                       "mean_batch"])


def threshold_sweep(traces, thetas: Sequence[float] = tuple(np.round(np.linspace(0.0, 0.95, 20), 2))):
    """Paper Fig. 5: StaticThreshold on survival a_k ≥ θ, verified tokens split into accepted / rejected.

    One row per (domain, θ), plus domain "all": accepted = Σ min(m, ℓ), rejected = Σ (ℓ − min(m, ℓ))
    (verified but not kept), per-round means, and accept_rate = accepted / verified.
    """
    import pandas as pd


    by_dom: dict[str, list[SimRound]] = {}
    for t in traces:
        rs = [x for x in _replay(t) if x.conf is not None]
        by_dom.setdefault(str(t.meta.get("domain", "unknown")), []).extend(rs)
    by_dom["all"] = [x for v in list(by_dom.values()) for x in v]
    rows = []
    for dom, rs in by_dom.items():
        if not rs:
            continue
        for th in thetas:
            pol = StaticThreshold(float(th), on="survival")
            ells = [pol.choose([x.conf], explain=False).lengths[0] for x in rs]
            acc = sum(min(x.m, e) for x, e in zip(rs, ells))
            ver = sum(ells)
            rows.append(dict(domain=dom, theta=float(th), accepted=acc, rejected=ver - acc, verified=ver,
                             accepted_per_round=acc / len(rs), rejected_per_round=(ver - acc) / len(rs),
                             accept_rate=acc / ver if ver else float("nan"), n_rounds=len(rs)))
    return pd.DataFrame(rows)


# -- headline numbers -----------------------------------------------------------------------------
def _cross(xs: np.ndarray, ys: np.ndarray, x0: float) -> float:
    """y at the first segment (in R order) of the curve (xs, ys) that crosses x0; nan if none."""
    for i in range(len(xs) - 1):
        lo, hi = sorted((xs[i], xs[i + 1]))
        if lo <= x0 <= hi:
            if xs[i + 1] == xs[i]:
                return float(ys[i])
            w = (x0 - xs[i]) / (xs[i + 1] - xs[i])
            return float(ys[i] + w * (ys[i + 1] - ys[i]))
    return float("nan")


def _curve(df, policy: str):
    d = df[df.policy == policy].sort_values("R")
    if d.empty:
        raise ValueError(f"policy {policy!r} is not in the sweep (have: {sorted(df.policy.unique())})")
    return d.R.to_numpy(float), d.throughput.to_numpy(float), d.per_user.to_numpy(float)


def headline(df, policy: str = "hardware-aware", baseline: str = "fixed-1", sla_R: int = 32) -> dict[str, Any]:
    """Three summary ratios of a ``sweep`` frame.

    SLA: the per-user speed the baseline reaches at R = sla_R (interpolated in log R). Each policy's
    throughput at that per-user speed is read off its R-curve (first crossing, linear between sweep
    points); if the policy is faster than the SLA even at its largest R, its throughput there is used
    (a lower bound, flagged in ``policy_at_sla_is_lower_bound``).
    throughput_gain_at_sla = policy / baseline throughput at the SLA.
    per_user_speedup_at_matched_throughput = policy / baseline per-user speed at the baseline's
    throughput at R = sla_R.  min_ratio_vs_best_fixed = min over R of policy throughput / best
    FixedLength (any "fixed-*" policy in the frame) throughput at that R.
    """
    Rp, Tp, Up = _curve(df, policy)
    Rb, Tb, Ub = _curve(df, baseline)
    lr = np.log2(Rb)
    sla = float(np.interp(math.log2(sla_R), lr, Ub))
    thr_b = float(np.interp(math.log2(sla_R), lr, Tb))
    thr_p, lower = _cross(Up, Tp, sla), False
    if math.isnan(thr_p) and Up.min() > sla:
        thr_p, lower = float(Tp[-1]), True
    up_p = _cross(Tp, Up, thr_b)
    fixed = df[df.policy.str.startswith("fixed")].groupby("R").throughput.max()
    mine = df[df.policy == policy].set_index("R").throughput
    common = mine.index.intersection(fixed.index)
    ratio = (mine[common] / fixed[common]) if len(common) else None
    return dict(
        sla_R=sla_R, sla_per_user=sla, baseline_throughput_at_sla=thr_b, policy_throughput_at_sla=thr_p,
        policy_at_sla_is_lower_bound=lower, throughput_gain_at_sla=thr_p / thr_b,
        per_user_speedup_at_matched_throughput=up_p / sla,
        min_ratio_vs_best_fixed=float(ratio.min()) if ratio is not None else float("nan"),
        argmin_R_vs_best_fixed=int(ratio.idxmin()) if ratio is not None else None,
    )
