"""Several seeds of a serving sweep, and the interval a headline number carries.

Legend: R concurrent requests, ℓ verified drafts per request, n seeds, x̄ mean over seeds, s their standard
deviation, t the Student quantile.

One seed is one replay of ``serving.simulate.sweep``: its own draw of which requests fill the R slots and, when
the requests come from a generator (a callable ``seed → traces``, e.g. the synthetic paper-scale requests), its
own requests. A ratio read off one seed of a hundred steps carries the noise of that draw; the mean over n seeds
with the two-sided t-interval x̄ ± t_{n−1}·s/√n says how large that noise is. Every seed replays the same rounds
for every policy, so the per-seed ratios stay paired.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .simulate import headline, sweep

# Two-sided 95 % Student t quantiles t_{0.975, df}, df = 1 … 30 (standard tables); beyond 30 the normal's 1.960.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: int) -> float:
    """t_{0.975, df}: the factor of s/√n in a two-sided 95 % interval of a mean of df + 1 values."""
    if df < 1:
        raise ValueError(f"a t-interval needs at least 2 values (df ≥ 1), got df = {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.960


@dataclass(frozen=True)
class Interval:
    """Mean of n values with its two-sided 95 % t-interval [lo, hi] and the range [min, max]."""
    mean: float
    lo: float
    hi: float
    min: float
    max: float
    n: int

    def fmt(self, digits: int = 2, prefix: str = "", unit: str = "seeds") -> str:
        """"×1.08 (95 % CI 1.06–1.10, 5 seeds)" with prefix "×"; ``unit`` names what the n values are."""
        m = f"{prefix}{self.mean:.{digits}f}"
        if self.n < 2:
            return f"{m} (1 {unit.rstrip('s')})"
        return f"{m} (95 % CI {self.lo:.{digits}f}–{self.hi:.{digits}f}, {self.n} {unit})"

    def short(self, digits: int = 2) -> str:
        """"1.08 (1.06–1.10)": the mean and its 95 % interval, for tables."""
        return f"{self.mean:.{digits}f} ({self.lo:.{digits}f}–{self.hi:.{digits}f})"


def interval(values: Sequence[float]) -> Interval:
    """Mean, 95 % t-interval and range of values (NaNs dropped); n = 1 gives lo = hi = the value."""
    x = np.asarray([v for v in values if not (isinstance(v, float) and math.isnan(v))], dtype=float)   # (n,)
    if x.size == 0:
        raise ValueError("no values to summarise")
    m = float(x.mean())
    half = t975(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else 0.0
    return Interval(m, m - half, m + half, float(x.min()), float(x.max()), int(x.size))


def sweep_seeds(traces: Sequence | Callable[[int], Sequence], policies, profile, seeds: Sequence[int] = range(5),
                Rs: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128), n_rounds: int = 100, draft_time: float = 0.0):
    """``sweep`` once per seed → the sweep frame with a ``seed`` column (rows: seed × policy × R).

    ``traces``: the requests (each seed draws its own replay of them), or a callable seed → requests (each seed
    also gets its own requests)."""
    import pandas as pd

    frames = []
    for s in seeds:
        ts = traces(s) if callable(traces) else traces
        frames.append(sweep(ts, policies, profile, Rs=Rs, n_rounds=n_rounds, draft_time=draft_time, seed=s)
                      .assign(seed=s))
    return pd.concat(frames, ignore_index=True)


METRICS = ("throughput", "per_user", "mean_budget", "tau", "mean_batch")


def summarize(runs, metrics: Sequence[str] = METRICS):
    """Per (policy, R) of a ``sweep_seeds`` frame: each metric's mean over seeds (same column name, so the frame
    draws with the sweep charts) and its 95 % t-interval in ``<metric>_lo`` / ``<metric>_hi``; ``n_seeds``."""
    import pandas as pd

    rows = []
    for (policy, R), g in runs.groupby(["policy", "R"], sort=False):
        row = dict(policy=policy, R=int(R), n_seeds=int(g.seed.nunique()))
        for m in metrics:
            iv = interval(g[m].tolist())
            row.update({m: iv.mean, f"{m}_lo": iv.lo, f"{m}_hi": iv.hi})
        rows.append(row)
    return pd.DataFrame(rows)


def headline_seeds(runs, policy: str = "hardware-aware", baseline: str = "fixed-1", sla_R: int = 32):
    """``serving.simulate.headline`` on each seed of a ``sweep_seeds`` frame → one row per seed."""
    import pandas as pd

    return pd.DataFrame([dict(seed=s, **headline(g, policy=policy, baseline=baseline, sla_R=sla_R))
                         for s, g in runs.groupby("seed")])


BEST_FIXED = "best fixed length"


def ratio_seeds(runs, policy: str, baseline: str, metric: str = "throughput"):
    """metric(policy) / metric(baseline) at each R, paired by seed → frame (R × seed). ``baseline`` may be
    BEST_FIXED: at each (R, seed) the largest metric among the "fixed-*" policies (plain decoding, fixed-0,
    included)."""
    t = runs.pivot_table(index=["R", "seed"], columns="policy", values=metric)
    if baseline == BEST_FIXED:
        base = t[[c for c in t.columns if str(c).startswith("fixed-")]].max(axis=1)
    else:
        base = t[baseline]
    return (t[policy] / base).unstack("seed")


__all__ = ["Interval", "interval", "t975", "sweep_seeds", "summarize", "headline_seeds", "ratio_seeds", "BEST_FIXED",
           "METRICS"]
