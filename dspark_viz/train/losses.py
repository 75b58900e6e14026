"""Pure training losses (paper eqs. 8–12) on a restricted draft vocabulary.

Legend: N blocks, γ block size, V_d draft vocabulary, d hidden size, k 1-based slot.

p_target is the target's full-vocabulary distribution (T = 1) restricted to V_d, recovered exactly
from the cached final-norm hidden state and log-sum-exp: log p_t(v) = h·W_v − lse. Draft mass is
0 outside V_d, so  ‖p_d − p_t‖₁ = Σ_{v∈V_d} |p_d(v) − p_t(v)| + (1 − Σ_{v∈V_d} p_t(v)).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def position_weights(gamma: int, decay: float | None = None, device=None) -> torch.Tensor:
    """w_k = exp(−(k−1)/decay), k = 1..γ → (γ,); decay defaults to γ (paper §3.3)."""
    return torch.exp(-torch.arange(gamma, dtype=torch.float32, device=device) / (decay or gamma))


def valid_prefix(valid: torch.Tensor) -> torch.Tensor:
    """(N, γ) bool → (N, γ) float mask of the contiguous valid prefix."""
    return valid.float().cumprod(-1)


def target_probs(hidden: torch.Tensor, lse: torch.Tensor, W_vd: torch.Tensor) -> torch.Tensor:
    """hidden (N, γ, d), lse (N, γ), W_vd (V_d, d) → p_t restricted to V_d (N, γ, V_d)."""
    return torch.exp(hidden.float() @ W_vd.float().T - lse.float()[..., None])


def l1_distance(p_draft: torch.Tensor, p_target: torch.Tensor) -> torch.Tensor:
    """(N, γ, V_d) each → ‖p_d − p_t‖₁ over the full vocabulary (N, γ)."""
    inside = (p_draft - p_target).abs().sum(-1)
    outside = (1 - p_target.sum(-1)).clamp_min(0)
    return inside + outside


def confidence_label(l1: torch.Tensor) -> torch.Tensor:
    """c*_k = 1 − ½‖p_d − p_t‖₁ (eq. 8), detached."""
    return (1 - 0.5 * l1).clamp(0, 1).detach()


def analytic_tau(tv: torch.Tensor, mask: torch.Tensor) -> float:
    """1 + Σ_k Π_{i≤k}(1 − TV_i), averaged over blocks (TV = ½‖p_d − p_t‖₁). (N, γ) → float."""
    surv = ((1 - tv).clamp(0, 1) * mask).cumprod(-1)                 # invalid slots end the prefix
    return float((1 + surv.sum(-1)).mean())


def loss_terms(logits: torch.Tensor, labels: torch.Tensor, p_target: torch.Tensor, mask: torch.Tensor,
               weights: torch.Tensor, conf_logit: torch.Tensor | None = None, row_of: torch.Tensor | None = None,
               w_ce: float = 0.1, w_l1: float = 0.9, w_conf: float = 1.0) -> dict[str, torch.Tensor]:
    """The loss and its parts as tensors (no host sync: ``torch.compile`` can fuse it whole).
    logits (N, γ, V_d) = U + B; labels (N, γ) draft-vocab index or −1 (outside V_d); p_target (N, γ, V_d), or
    distinct rows (U, V_d) with ``row_of`` (N, γ) naming each slot's row; mask (N, γ) valid prefix; weights (γ,);
    conf_logit (N, γ) or None. Every term is Σ_k w_k · term_k averaged over valid (block, slot)."""
    if row_of is not None:
        p_target = p_target[row_of]                                             # (N, γ, V_d)
    logp = torch.log_softmax(logits.float(), -1)
    p_d = logp.exp()
    wm = mask * weights                                                        # (N, γ)
    denom = wm.sum().clamp_min(1e-9)
    in_vocab = (labels >= 0).float()
    ce = -(logp.gather(-1, labels.clamp_min(0)[..., None])[..., 0]) * in_vocab  # (N, γ)
    l1 = l1_distance(p_d, p_target)                                             # (N, γ)
    loss = torch.zeros((), device=logits.device)
    if w_ce:
        loss = loss + w_ce * (ce * wm).sum() / denom
    if w_l1:
        loss = loss + w_l1 * (l1 * wm).sum() / denom
    bce = torch.zeros((), device=logits.device)
    if conf_logit is not None and w_conf:
        bce = F.binary_cross_entropy_with_logits(conf_logit.float(), confidence_label(l1), reduction="none")
        bce = (bce * wm).sum() / denom
        loss = loss + w_conf * bce
    return {"loss": loss, "ce": (ce.detach() * wm).sum() / denom, "l1": (l1.detach() * wm).sum() / denom,
            "bce": bce.detach(), "tv": 0.5 * l1.detach()}


def drafter_loss(logits: torch.Tensor, labels: torch.Tensor, p_target: torch.Tensor, mask: torch.Tensor,
                 weights: torch.Tensor, conf_logit: torch.Tensor | None = None, w_ce: float = 0.1,
                 w_l1: float = 0.9, w_conf: float = 1.0, row_of: torch.Tensor | None = None,
                 terms=loss_terms) -> tuple[torch.Tensor, dict]:
    """``loss_terms`` (or ``terms``: the same function compiled) → (loss, stats): the parts, τ_est and slot-1
    acceptance estimated from TV, and the trained (block, slot) pairs."""
    t = terms(logits, labels, p_target, mask, weights, conf_logit, row_of, w_ce=w_ce, w_l1=w_l1, w_conf=w_conf)
    loss, tv = t["loss"], t["tv"]
    stats = {"loss": float(loss.detach()), "ce": float(t["ce"]), "l1": float(t["l1"]), "bce": float(t["bce"]),
             "tau_est": analytic_tau(tv, mask),
             "acc1": float(((1 - tv[:, 0]) * mask[:, 0]).sum() / mask[:, 0].sum().clamp_min(1)),
             "positions": int(mask.sum())}                          # trained (block, slot) pairs
    if not math.isfinite(stats["loss"]):
        raise FloatingPointError(f"non-finite loss: {stats}")
    return loss, stats
