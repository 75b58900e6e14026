"""What a calibration statistic rests on: the events behind each position, the AUROC's standard error, and how
flat STS's objective is at a position (why a fitted temperature can run to an end of its grid).

Legend: N rollouts, γ block size, k 1-based position, c_k raw confidence, a_k prefix survival, m accepted drafts,
ℓ verified drafts, T_k STS temperature, n₊ / n₋ rounds with / without the event, A an AUROC.

Two events per position (both on rounds with ℓ ≥ k, as in ``calibration.calibration_report``):
  prefix      "x_1..x_k all survived" (m ≥ k) among all rounds: what a_k predicts (``auroc``, ECE, paper Fig. 6);
  conditional "x_k survived" among rounds where x_1..x_{k−1} survived (m ≥ k − 1): what c_k predicts
              (``auroc_cond``). Its n₊ is the prefix event's n₊; its n₋ counts rounds that reached k and failed there.
A statistic of a 0/1 outcome says little when n₊ or n₋ is small: ``MIN_EVENTS`` is the smallest count this
toolkit reads a ranking or a reliability curve from.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .. import calibration as cal

MIN_EVENTS = 20     # fewer rounds with (or without) the event than this: the statistic is shown, not read


def position_events(conf, accepted, ell=None):
    """pandas.DataFrame indexed by k: ``rounds`` (ℓ ≥ k), ``survived`` (n₊: m ≥ k), ``failed`` (n₋ of the prefix
    event), ``reached`` (m ≥ k − 1: the rows c_k is judged on), ``failed_cond`` (reached − survived), and
    ``enough`` / ``enough_cond``: both counts of the event ≥ ``MIN_EVENTS``."""
    import pandas as pd

    c = np.asarray(conf, dtype=float)                                    # (N, γ)
    obs, valid = cal._observed(c, accepted, ell)                         # (N, γ) each
    rows = []
    for k in range(c.shape[1]):
        v = valid[:, k]
        prior = obs[:, k - 1] > 0.5 if k else np.ones(len(c), dtype=bool)   # x_1..x_{k−1} survived
        rounds, survived, reached = int(v.sum()), int((obs[v, k] > 0.5).sum()), int((v & prior).sum())
        rows.append(dict(k=k + 1, rounds=rounds, survived=survived, failed=rounds - survived, reached=reached,
                         failed_cond=reached - survived))
    df = pd.DataFrame(rows, columns=["k", "rounds", "survived", "failed", "reached", "failed_cond"]).set_index("k")
    df["enough"] = np.minimum(df.survived, df.failed) >= MIN_EVENTS
    df["enough_cond"] = np.minimum(df.survived, df.failed_cond) >= MIN_EVENTS
    return df


def auroc_se(auc: float, n_pos: int, n_neg: int) -> float:
    """Standard error of an AUROC from n₊ positives and n₋ negatives (Hanley and McNeil, 1982):
    √[(A(1−A) + (n₊−1)(Q1−A²) + (n₋−1)(Q2−A²)) / (n₊·n₋)], Q1 = A/(2−A), Q2 = 2A²/(1+A). nan without both."""
    if n_pos < 1 or n_neg < 1 or not math.isfinite(auc):
        return float("nan")
    a = float(auc)
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


def sts_objective(conf, accepted, ell, calib: cal.STSCalibration, k: int,
                  grid: Sequence[float] = cal.DEFAULT_GRID, n_bins: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """ECE of a'_k against 1[m ≥ k] for every T_k of ``grid``, positions before k at ``calib``'s temperatures:
    the curve STS minimises at position k.  → (T (G,), ECE (G,))."""
    c = np.nan_to_num(np.asarray(conf, dtype=float), nan=0.0)            # (N, γ)
    obs, valid = cal._observed(np.asarray(conf, dtype=float), accepted, ell)
    v = valid[:, k - 1]
    ts = np.array(sorted(set(float(t) for t in grid)))
    eces = np.empty(len(ts))
    for i, t in enumerate(ts):
        temps = list(calib.temperatures[: k - 1]) + [float(t)]
        biases = list(calib.biases[: k - 1]) + [0.0] if calib.biases else None
        a = cal.STSCalibration(temps, biases=biases).survival(c[:, :k])[:, k - 1]   # (N,) a'_k
        eces[i] = cal.ece(a[v], obs[v, k - 1], n_bins)
    return ts, eces


def grid_ends(temperatures: Sequence[float], grid: Sequence[float] = cal.DEFAULT_GRID,
              steps: int = 1) -> dict[int, str]:
    """{k: "low" | "high"} for every T_k at an end of ``grid`` or within ``steps`` grid points of it."""
    g = np.array(sorted(set(float(t) for t in grid)))
    out = {}
    for k, t in enumerate(temperatures, start=1):
        i = int(np.argmin(np.abs(np.log(g) - math.log(float(t)))))       # nearest grid point (log scale)
        if i <= steps:
            out[k] = "low"
        elif i >= len(g) - 1 - steps:
            out[k] = "high"
    return out


__all__ = ["MIN_EVENTS", "position_events", "auroc_se", "sts_objective", "grid_ends"]
