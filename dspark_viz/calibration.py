"""Calibration of the confidence head: ECE, AUROC, Brier, reliability bins, and STS.

Legend: N rollouts (recorded rounds), γ block size, k 1-based position, c_k raw conditional confidence
(P(x_k survives | x_1..x_{k−1} survived)), c'_k calibrated, a_k = Π_{i≤k} c_i prefix survival,
m accepted drafts of a round, ℓ verified length of a round, T_k STS temperature of position k.

Sequential Temperature Scaling (paper §3.2.1): for k = 1..γ in order, one temperature T_k is grid-searched
so that a'_k = Π_{i≤k} c'_i, with c'_i = σ(logit(c_i) / T_i), minimises the ECE against the observed prefix
acceptance 1[m ≥ k]; T_1..T_{k−1} are frozen when T_k is fitted. Position k only uses rounds with ℓ ≥ k
(1[m ≥ k] is observed only when slot k was shown to the target). T > 0 keeps each c_k's ranking.

Everything here is a pure function of arrays; ``STSCalibration`` is a small immutable-by-convention record.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .records import JSONRecord

EPS = 1e-6  # confidences are clipped to [EPS, 1 − EPS] before the logit
DEFAULT_GRID = tuple(sorted(set(np.round(np.geomspace(0.1, 10.0, 121), 6).tolist()) | {1.0}))


# -- metrics ---------------------------------------------------------------------------------
def _bin_index(pred: np.ndarray, n_bins: int) -> np.ndarray:
    return np.clip(np.floor(pred * n_bins).astype(int), 0, n_bins - 1)   # (N,) bin of each prediction


def _pair(pred, obs) -> tuple[np.ndarray, np.ndarray]:
    pred, obs = np.asarray(pred, dtype=float).ravel(), np.asarray(obs, dtype=float).ravel()
    if pred.shape != obs.shape:
        raise ValueError(f"pred and obs differ in size: {pred.shape} vs {obs.shape}")
    return pred, obs


def ece(pred, obs, n_bins: int = 20) -> float:
    """Expected calibration error: Σ_bins (n_b / N)·|mean pred_b − mean obs_b|, equal-width bins on [0, 1]."""
    pred, obs = _pair(pred, obs)
    if pred.size == 0:
        return float("nan")
    b = _bin_index(pred, n_bins)
    cnt = np.bincount(b, minlength=n_bins)                                # (n_bins,)
    gap = np.abs(np.bincount(b, pred, n_bins) - np.bincount(b, obs, n_bins))  # n_b·|mean pred − mean obs|
    return float(gap.sum() / cnt.sum())


def brier(pred, obs) -> float:
    """Mean squared error of the predicted probability against the 0/1 outcome."""
    pred, obs = _pair(pred, obs)
    return float(np.mean((pred - obs) ** 2)) if pred.size else float("nan")


def _avg_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties replaced by their average rank.  (N,)"""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    start = np.r_[0, np.flatnonzero(np.diff(xs)) + 1]                  # first index of each tie group
    end = np.r_[start[1:], xs.size]
    group_rank = (start + end + 1) / 2.0                                 # mean of ranks start+1..end
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(group_rank, end - start)
    return ranks


def auroc(score, label) -> float:
    """Area under the ROC curve (Mann–Whitney U / (n₊·n₋), ties count ½); nan if only one class."""
    score, label = _pair(score, label)
    pos = label > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = _avg_ranks(score)
    return float((r[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def expected_auroc(score, p) -> float:
    """AUROC of ``score`` against outcomes y_i ~ Bernoulli(p_i), drawn independently: the population value
    Σ_{i≠j} p_i (1 − p_j) (1[s_i > s_j] + ½·1[s_i = s_j]) / Σ_{i≠j} p_i (1 − p_j), which many draws of y
    average to (the ratio of expectations; exact as N grows). With p in {0, 1} it is ``auroc``. Scoring p
    itself gives the ceiling of any score that, like a confidence head, knows the chance but not the draw.
    O(N log N); nan when every p is 0 or every p is 1."""
    s, p = _pair(score, p)
    q = 1.0 - p
    _, g = np.unique(s, return_inverse=True)                             # (N,) tie group of each score
    G = np.bincount(g, q)                                                # Σ (1 − p) per group, ascending score
    below = np.cumsum(G) - G                                             # Σ (1 − p_j) over lower scores
    num = float(np.sum(p * (below[g] + 0.5 * (G[g] - q))))
    den = float(np.sum(p * (q.sum() - q)))
    return num / den if den > 0 else float("nan")


def reliability_bins(pred, obs, n_bins: int = 20):
    """pandas.DataFrame (bin, lo, hi, mean_pred, mean_obs, count); empty bins have NaN means."""
    import pandas as pd

    pred, obs = _pair(pred, obs)
    b = _bin_index(pred, n_bins)
    cnt = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mp = np.bincount(b, pred, n_bins) / cnt
        mo = np.bincount(b, obs, n_bins) / cnt
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return pd.DataFrame(dict(bin=np.arange(n_bins), lo=edges[:-1], hi=edges[1:],
                             mean_pred=mp, mean_obs=mo, count=cnt.astype(int)))


# -- rollouts ----------------------------------------------------------------------------------
def _as_2d(conf) -> np.ndarray:
    c = np.asarray(conf, dtype=float)
    if c.ndim != 2:
        raise ValueError(f"conf must be (N, γ), got shape {c.shape}")
    return c


def _observed(conf: np.ndarray, accepted_len, ell=None) -> tuple[np.ndarray, np.ndarray]:
    """→ (obs (N, γ) = 1[m ≥ k], valid (N, γ) = slot k was verified, i.e. ℓ ≥ k).

    ``accepted_len`` is m (N,) or already a 0/1 matrix (N, γ) of prefix acceptance; ``ell`` is ℓ (N,) or a
    boolean mask (N, γ) of verified slots (None: every slot was verified, full-block rollouts).
    """
    n, g = conf.shape
    k = np.arange(1, g + 1)                                              # (γ,)
    m = np.asarray(accepted_len, dtype=float)
    if m.ndim == 1:
        if m.shape[0] != n:
            raise ValueError(f"accepted_len has {m.shape[0]} rows, conf has {n}")
        obs = (m[:, None] >= k[None, :]).astype(float)                   # (N, γ)
    elif m.shape == (n, g):
        obs = (m > 0.5).astype(float)
    else:
        raise ValueError(f"accepted_len must be (N,) or (N, γ) = {(n, g)}, got {m.shape}")
    if ell is None:
        valid = np.ones((n, g), dtype=bool)
    else:
        e = np.asarray(ell)
        if e.ndim == 1 and e.shape[0] == n:
            valid = e[:, None] >= k[None, :]
        elif e.shape == (n, g):
            valid = e.astype(bool)
        else:
            raise ValueError(f"ell must be (N,) or an (N, γ) mask, got {e.shape}")
    return obs, valid & np.isfinite(conf).cumprod(axis=1).astype(bool)


def rollouts_from_traces(traces) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Traces → (conf (N, γ) raw c_k, accepted (N,) m, ell (N,) ℓ) for fit_sts / calibration_report.

    Rounds whose drafts carry no confidence are skipped. A round that ended on an accepted stop token
    (``stopped`` and no bonus) only tells us about slots 1..m, so its ℓ is reported as m. Blocks shorter
    than the longest γ are padded with NaN (never counted: their ℓ is below the padded slots).
    """
    rows: list[tuple[list[float], int, int]] = []
    for tr in traces:
        for r in tr.rounds:
            if not r.drafts or any(d.confidence is None for d in r.drafts):
                continue
            ell = r.accepted if (r.stopped and r.bonus is None) else r.ell
            rows.append(([float(d.confidence) for d in sorted(r.drafts, key=lambda d: d.k)], r.accepted, ell))
    g = max((len(c) for c, _, _ in rows), default=0)
    conf = np.full((len(rows), g), np.nan)                               # (N, γ)
    for i, (c, _, _) in enumerate(rows):
        conf[i, : len(c)] = c
    acc = np.array([m for _, m, _ in rows], dtype=int)                   # (N,)
    ell = np.array([e for _, _, e in rows], dtype=int)                   # (N,)
    return conf, acc, ell


# -- STS -----------------------------------------------------------------------------------------
def _scale(c: np.ndarray, t, b=0.0) -> np.ndarray:
    """σ(logit(c) / T + b); exactly the identity where T = 1 and b = 0. Increasing in c for every T > 0. t and b
    broadcast against c: one position's (scalars), or every position's at once ((γ,) against c (…, γ))."""
    t, b = np.asarray(t, dtype=float), np.asarray(b, dtype=float)
    keep = (t == 1.0) & (b == 0.0)
    if keep.all():
        return c
    z = np.log(np.clip(c, EPS, 1 - EPS)) - np.log1p(-np.clip(c, EPS, 1 - EPS))
    return np.where(keep, c, 1.0 / (1.0 + np.exp(-(z / t + b))))


@dataclass
class STSCalibration(JSONRecord):
    RECORD = "an STS calibration"

    temperatures: list[float]                                           # (γ,) T_1..T_γ
    meta: dict[str, Any] = field(default_factory=dict)                  # n per position, grid, fit ECE …
    biases: list[float] | None = None                                   # (γ,) level terms b_k (None: the paper's STS)

    def _b(self, i: int) -> float:
        return float(self.biases[i]) if self.biases else 0.0

    def apply(self, conf):
        """Calibrated c'_k, same shape as ``conf``: (γ,), (N, γ), or a list of those (returns lists)."""
        as_list = isinstance(conf, (list, tuple))
        c = np.asarray(conf, dtype=float)
        if c.ndim not in (1, 2):
            raise ValueError(f"conf must be (γ,) or (N, γ), got shape {c.shape}")
        g = c.shape[-1]
        if g > len(self.temperatures):
            raise ValueError(f"conf has {g} positions but the calibration only covers {len(self.temperatures)}")
        out = np.array(_scale(c, self.temperatures[:g], [self._b(i) for i in range(g)])) if g else c.copy()
        return out.tolist() if as_list else out

    def survival(self, conf) -> np.ndarray:
        """Calibrated prefix survival a'_k = Π_{i≤k} c'_i, same shape as ``conf``."""
        return np.cumprod(np.asarray(self.apply(np.asarray(conf, dtype=float))), axis=-1)

    # -- JSON --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = {"kind": "sts", "temperatures": [float(t) for t in self.temperatures], "meta": self.meta}
        if self.biases:
            d["biases"] = [float(b) for b in self.biases]
        return d

    @classmethod
    def from_dict(cls, d: Any) -> "STSCalibration":
        if not isinstance(d, dict) or d.get("kind") != "sts":
            raise ValueError("not an STS calibration (expected a JSON object with \"kind\": \"sts\")")
        ts = d.get("temperatures")
        if not isinstance(ts, list) or not all(isinstance(t, (int, float)) and not isinstance(t, bool)
                                               and math.isfinite(t) and t > 0 for t in ts):
            raise ValueError("STS calibration: \"temperatures\" must be a list of finite positive numbers")
        meta = d.get("meta", {})
        bs = d.get("biases")
        if bs is not None and (not isinstance(bs, list) or len(bs) != len(ts) or not all(
                isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in bs)):
            raise ValueError("STS calibration: \"biases\" must be a list of finite numbers, one per temperature")
        return cls([float(t) for t in ts], dict(meta) if isinstance(meta, dict) else {},
                   [float(b) for b in bs] if bs is not None else None)


def fit_sts(conf, accepted_len, ell=None, grid: Sequence[float] = DEFAULT_GRID,
            n_bins: int = 20, bias_grid: Sequence[float] | None = None) -> STSCalibration:
    """Sequential Temperature Scaling on held-out rollouts.

    ``bias_grid`` (beyond the paper): also search a level term b_k per position, c'_k = σ(logit(c_k)/T_k + b_k),
    jointly with T_k (ties → T closest to 1, then |b| smallest). A temperature only sharpens or flattens c_k
    around ½; it cannot move the mean when the head is over-confident on average, which b_k can.

    conf (N, γ) raw c_k; accepted_len (N,) m or an (N, γ) 0/1 prefix-acceptance matrix; ell (N,) ℓ or an
    (N, γ) mask of verified slots (None: all verified). Ties in ECE go to the temperature closest to 1.
    Guarantee on the fit data: for every k, ECE(a'_k) ≤ ECE(a'_{k−1}·c_k) (T = 1 is in the grid); in
    particular ECE(a'_1) ≤ ECE(c_1). Positions with no verified rows keep T = 1.
    """
    c = _as_2d(conf)
    obs, valid = _observed(c, accepted_len, ell)                        # (N, γ) each
    grid = sorted(set(float(t) for t in grid) | {1.0})
    if min(grid) <= 0:
        raise ValueError("STS temperatures must be positive")
    bgrid = sorted(set(float(b) for b in bias_grid) | {0.0}) if bias_grid is not None else [0.0]
    temps: list[float] = []
    biases: list[float] = []
    prev = np.ones(c.shape[0])                                           # (N,) a'_{k−1}, frozen
    n_k, e_k = [], []
    for k in range(c.shape[1]):
        v = valid[:, k]
        best_t, best_b, best_e = 1.0, 0.0, float("nan")
        if v.any():
            ck, pk, ok = c[v, k], prev[v], obs[v, k]
            scores = [(ece(pk * _scale(ck, t, b), ok, n_bins), abs(math.log(t)), abs(b), t, b)
                      for t in grid for b in bgrid]
            best_e, _, _, best_t, best_b = min(scores)
        temps.append(float(best_t))
        biases.append(float(best_b))
        n_k.append(int(v.sum()))
        e_k.append(best_e)
        prev = prev * _scale(np.nan_to_num(c[:, k], nan=0.0), best_t, best_b)
    meta = {"n": n_k, "ece_fit": e_k, "n_bins": n_bins, "grid": [min(grid), max(grid), len(grid)]}
    if bias_grid is not None:
        meta["bias_grid"] = [min(bgrid), max(bgrid), len(bgrid)]
    return STSCalibration(temps, meta=meta, biases=biases if bias_grid is not None else None)


def calibration_report(conf, accepted_len, ell=None, calib: STSCalibration | None = None,
                       n_bins: int = 20) -> dict[str, Any]:
    """Per-position lists (index k−1) of calibration quality, on rows with ℓ ≥ k.

    ece_before/after, brier_before/after: raw a_k vs calibrated a'_k against 1[m ≥ k].
    auroc: ranking quality of the raw prefix survival a_k for 1[m ≥ k] (the paper's Fig. 6 quantity);
    auroc_after: the same for a'_k (STS keeps each c_k's order, but a product of differently scaled
    factors may reorder rows slightly). auroc_cond: raw c_k for "x_k survived" among rows where
    x_1..x_{k−1} survived (the conditional event c_k is trained on).
    rate: observed P(m ≥ k); mean_before/after: mean predicted a_k. If ``calib`` is None, STS is fitted
    on these same rows (in-sample; ``in_sample`` is then True).
    """
    c = _as_2d(conf)
    obs, valid = _observed(c, accepted_len, ell)
    in_sample = calib is None
    if calib is None:
        calib = fit_sts(c, accepted_len, ell, n_bins=n_bins)
    a_raw = np.cumprod(np.nan_to_num(c, nan=0.0), axis=1)               # (N, γ)
    a_cal = calib.survival(np.nan_to_num(c, nan=0.0)) if c.shape[1] else a_raw
    keys = ("n", "rate", "mean_before", "mean_after", "ece_before", "ece_after", "brier_before",
            "brier_after", "auroc", "auroc_after", "auroc_cond")
    out: dict[str, Any] = {key: [] for key in keys}
    for k in range(c.shape[1]):
        v = valid[:, k]
        o, ab, aa = obs[v, k], a_raw[v, k], a_cal[v, k]
        prior = obs[:, k - 1] > 0.5 if k > 0 else np.ones(c.shape[0], dtype=bool)
        vc = v & prior                                                   # rows where x_1..x_{k−1} survived
        vals = (int(v.sum()), float(o.mean()) if o.size else float("nan"),
                float(ab.mean()) if ab.size else float("nan"), float(aa.mean()) if aa.size else float("nan"),
                ece(ab, o, n_bins), ece(aa, o, n_bins), brier(ab, o), brier(aa, o),
                auroc(ab, o), auroc(aa, o), auroc(c[vc, k], obs[vc, k]))
        for key, val in zip(keys, vals):
            out[key].append(val)
    out["temperatures"] = list(calib.temperatures)
    out["in_sample"] = in_sample
    return out
