"""SYNTHETIC traces: made-up rounds with a known acceptance law, for the serving notebooks and tests when no
recorded traces (assets/traces/*.json) are at hand. Nothing here comes from a model.

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

from .trace import DraftToken, Round, Trace

# domain → (mean first-slot acceptance, Beta concentration, per-position decay): code drafts best, chat worst
DOMAIN_PROFILES = {"math": (0.86, 12.0, 0.93), "code": (0.9, 14.0, 0.95), "chat": (0.72, 6.0, 0.88)}


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
        m = int(np.argmin(ok)) if not ok.all() else gamma                      # first failure
        z = np.log(c) - np.log1p(-c)
        reported = 1.0 / (1.0 + np.exp(-z * overconfidence))                   # (γ,) what the head says
        a = np.cumprod(reported)
        drafts = [DraftToken(k=j + 1, token=j + 1, text=f"t{j + 1}", p_draft=1.0,
                             p_target=(1.0 if j < m else 0.0) if j <= m else None,
                             confidence=float(reported[j]), confidence_cal=None, survival=float(a[j]),
                             status="accepted" if j < m else "rejected" if j == m else "not_reached")
                  for j in range(gamma)]
        rounds.append(Round(index=i, anchor=0, anchor_pos=pos, drafts=drafts, ell=gamma, accepted=m, bonus=0,
                            bonus_text="·", bonus_source="target" if m == gamma else "residual",
                            source="synthetic"))
        pos += m + 1
    meta = dict(drafter="synthetic", policy=f"fixed-{gamma}", gamma=gamma, domain=domain, seed=seed,
                synthetic=True, overconfidence=overconfidence, temperature=0.0)
    return Trace(meta=meta, prompt_ids=[0] * 10, first_token=0, first_text="", rounds=rounds)


def synthetic_traces(n: int = 12, n_rounds: int = 40, gamma: int = 7, seed: int = 0,
                     domains=("math", "code", "chat"), overconfidence: float = 1.0) -> list[Trace]:
    """``n`` synthetic requests cycling through ``domains`` (request i uses seed ``seed·1000 + i``)."""
    return [synthetic_trace(n_rounds, gamma, domains[i % len(domains)], seed * 1000 + i, overconfidence)
            for i in range(n)]


__all__ = ["synthetic_trace", "synthetic_traces", "DOMAIN_PROFILES"]
