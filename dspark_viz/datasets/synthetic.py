"""SYNTHETIC traces: made-up rounds with a known acceptance law, for the serving notebooks and tests, and a
synthetic drafter at the paper's scale (``paper_scale_traces``: the paper's Fig. 2 acceptance curves) where a
lesson needs that regime. Nothing here comes from a model.

Legend: γ block size, k 1-based position, c_k true conditional acceptance P(x_k ok | x_<k ok),
m accepted drafts, T_over over-confidence of the reported score (1 = honest).

Each round draws a difficulty q ~ Beta around the domain's mean first-slot acceptance, then
c_k = q · decay^(k−1) (suffix decay of a parallel drafter) clipped to [0.02, 0.99]. The target "accepts"
slot k with probability c_k given slots 1..k−1 survived, so m is the first failure (full-block verification,
ℓ = γ, like ``evaluate.evaluate_drafter``). The confidence head reports σ(logit(c_k) · T_over): honest at
T_over = 1, over-confident (pushed towards 0 / 1) for T_over > 1 — which Sequential Temperature Scaling
(``calibration.fit_sts``) undoes. Tokens are placeholders ("t1", "t2", …): these traces feed the
scheduler / engine / calibration faces, not the text views.
"""
from __future__ import annotations

import numpy as np

from ..paper import FIG2_READ
from ..trace import DraftToken, Round, Trace

# domain → (mean first-slot acceptance, Beta concentration, per-position decay): code drafts best, chat worst
DOMAIN_PROFILES = {"math": (0.86, 12.0, 0.93), "code": (0.9, 14.0, 0.95), "chat": (0.72, 6.0, 0.88)}


def _full_block_round(index: int, pos: int, ok: np.ndarray, reported: np.ndarray) -> Round:
    """One verified block of γ placeholder tokens: ``ok`` (γ,) whether slot k survives given its prefix, so m is
    the first failure; ``reported`` (γ,) the head's confidences, their running product the survival."""
    gamma = len(ok)
    m = int(np.argmin(ok)) if not ok.all() else gamma                          # first failure
    a = np.cumprod(reported)
    drafts = [DraftToken(k=j + 1, token=j + 1, text=f"t{j + 1}", p_draft=1.0,
                         p_target=(1.0 if j < m else 0.0) if j <= m else None,
                         confidence=float(reported[j]), confidence_cal=None, survival=float(a[j]),
                         status="accepted" if j < m else "rejected" if j == m else "not_reached")
              for j in range(gamma)]
    return Round(index=index, anchor=0, anchor_pos=pos, drafts=drafts, ell=gamma, accepted=m, bonus=0,
                 bonus_text="·", bonus_source="target" if m == gamma else "residual", source="synthetic")


def synthetic_trace(n_rounds: int = 40, gamma: int = 7, domain: str = "chat", seed: int = 0,
                    overconfidence: float = 1.0) -> Trace:
    """One synthetic request of ``n_rounds`` full-block rounds (see the module docstring)."""
    if domain not in DOMAIN_PROFILES:
        raise ValueError(f"unknown domain {domain!r}: {', '.join(DOMAIN_PROFILES)}")
    if n_rounds < 1 or gamma < 1 or overconfidence <= 0:
        raise ValueError("n_rounds and gamma must be ≥ 1 and overconfidence > 0")
    mean, conc, decay = DOMAIN_PROFILES[domain]
    rng = np.random.default_rng(seed)
    k = np.arange(gamma)                                                       # (γ,) 0-based
    rounds, pos = [], 10
    for i in range(n_rounds):
        q = rng.beta(mean * conc, (1 - mean) * conc)
        c = np.clip(q * decay ** k, 0.02, 0.99)                                # (γ,) true c_k
        ok = rng.random(gamma) < c                                             # (γ,) survives given prefix
        z = np.log(c) - np.log1p(-c)
        reported = 1.0 / (1.0 + np.exp(-z * overconfidence))                   # (γ,) what the head says
        rounds.append(_full_block_round(i, pos, ok, reported))
        pos += rounds[-1].accepted + 1
    meta = dict(drafter="synthetic", policy=f"fixed-{gamma}", gamma=gamma, domain=domain, seed=seed,
                synthetic=True, overconfidence=overconfidence, temperature=0.0)
    return Trace(meta=meta, prompt_ids=[0] * 10, first_token=0, first_text="", rounds=rounds)


def synthetic_traces(n: int = 12, n_rounds: int = 40, gamma: int = 7, seed: int = 0,
                     domains=("math", "code", "chat"), overconfidence: float = 1.0) -> list[Trace]:
    """``n`` synthetic requests cycling through ``domains`` (request i uses seed ``seed·1000 + i``)."""
    return [synthetic_trace(n_rounds, gamma, domains[i % len(domains)], seed * 1000 + i, overconfidence)
            for i in range(n)]


# -- a SYNTHETIC drafter at the paper's scale ---------------------------------------------------------------
# Conditional acceptance P(x_k ok | x_<k ok) at k = 1…7, read off the paper's Fig. 2 (Qwen3-4B target,
# averaged over each domain's benchmarks) to about ±0.01 (``paper.FIG2_READ``). Nothing here was measured.
PAPER_FIG2 = FIG2_READ
PAPER_SCALE_LABEL = "paper-scale {drafter} (SYNTHETIC: the paper's Fig. 2 curves, no model)"


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def paper_scale_offsets(curve, spread: float = 1.0, n_nodes: int = 48) -> np.ndarray:
    """Logit offsets b_k such that rounds with difficulty z ~ N(0, spread²) and c_k(z) = σ(b_k + z) have the
    *conditional* acceptance ``curve[k]`` (the survivors of slots < k are easier rounds, so b_k < logit(curve_k)).
    Expectations over z by Gauss–Hermite quadrature; each b_k by bisection. → (γ,)"""
    x, w = np.polynomial.hermite_e.hermegauss(n_nodes)          # nodes / weights for N(0, 1)
    z, w = spread * x, w / w.sum()                               # (n,)
    alive = np.ones_like(z)                                      # (n,) P(slots < k all survive | z)
    out = []
    for target in curve:
        lo, hi = -20.0, 20.0
        for _ in range(80):
            b = 0.5 * (lo + hi)
            got = (w * alive * _sigmoid(b + z)).sum() / (w * alive).sum()
            lo, hi = (b, hi) if got < target else (lo, b)
        out.append(b)
        alive = alive * _sigmoid(b + z)
    return np.array(out)


def paper_scale_traces(drafter: str = "dspark", n: int = 60, n_rounds: int = 40, seed: int = 0,
                       domains=("math", "code", "chat"), spread: float = 1.0) -> list[Trace]:
    """SYNTHETIC full-block requests of a drafter at the paper's scale: per domain, the conditional acceptance
    per position follows ``PAPER_FIG2[drafter][domain]`` in expectation; rounds differ in difficulty
    (z ~ N(0, spread²) on the logit scale) and an honest confidence head reports each round's true c_k."""
    if drafter not in PAPER_FIG2:
        raise ValueError(f"unknown paper drafter {drafter!r}: {', '.join(PAPER_FIG2)}")
    if n < 1 or n_rounds < 1 or spread < 0:
        raise ValueError("n and n_rounds must be ≥ 1 and spread ≥ 0")
    unknown = [d for d in domains if d not in PAPER_FIG2[drafter]]
    if unknown:
        raise ValueError(f"unknown domain {unknown[0]!r}: {', '.join(PAPER_FIG2[drafter])}")
    label = PAPER_SCALE_LABEL.format(drafter=drafter)
    offsets = {d: paper_scale_offsets(PAPER_FIG2[drafter][d], spread) for d in dict.fromkeys(domains)}  # (γ,) each
    traces = []
    for i in range(n):
        domain = domains[i % len(domains)]
        b = offsets[domain]
        gamma = len(b)
        rng = np.random.default_rng(seed * 1000 + i)
        rounds, pos = [], 10
        for r in range(n_rounds):
            c = _sigmoid(b + spread * rng.standard_normal())                  # (γ,) this round's true c_k
            ok = rng.random(gamma) < c                                        # (γ,) survives given prefix
            rounds.append(_full_block_round(r, pos, ok, c))
            pos += rounds[-1].accepted + 1
        meta = dict(drafter=label, policy=f"fixed-{gamma}", gamma=gamma, domain=domain, seed=seed, synthetic=True,
                    paper_curve=drafter, spread=spread, temperature=None)
        traces.append(Trace(meta=meta, prompt_ids=[0] * 10, first_token=0, first_text="", rounds=rounds))
    return traces


__all__ = ["synthetic_trace", "synthetic_traces", "DOMAIN_PROFILES", "PAPER_FIG2", "PAPER_SCALE_LABEL",
           "paper_scale_offsets", "paper_scale_traces"]
