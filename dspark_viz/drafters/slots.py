"""The sequential head's slot loop, shared by the DSpark and DeepSpec drafters (paper §3.2).

Legend: γ block size, V_U the columns of U (the draft vocabulary V_d, or the target's V), r head rank, d width.

The parallel backbone gives every slot its logits U_k at once; the sequential head then walks the block left to
right, each slot reading the token drawn before it:

    logits_k = U_k + B_k(x_{k−1}, h_k, s_k)      (no head: U_k)       x_k ~ softmax(logits_k / T)  (T = 0: argmax)

The native kernel runs the same loop in one call for a Markov head (fast/csrc/draft_loops.h); this is the one
Python copy of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..sampling import probs_from_logits, sample

DIAG_TOPK = 8


@dataclass
class Slots:
    js: list[int] = field(default_factory=list)                   # (γ,) chosen column of U per slot
    rows: list[torch.Tensor] = field(default_factory=list)        # γ × (V_U,) p per slot; [] when greedy w/o rows
    es: list[torch.Tensor] = field(default_factory=list)          # γ × (1, r) the head's w1[x_{k−1}]; [] w/o head
    diags: list[dict] = field(default_factory=list)               # per slot chart data (diag=True)


def head_slots(U: torch.Tensor, h: torch.Tensor, head, prev: torch.Tensor, temperature: float, generator, *,
               state=None, draw=sample, forced: list[int] | None = None, greedy_rows: bool = False,
               diag: bool = False, vocab_ids: torch.Tensor | None = None) -> Slots:
    """U (γ, V_U) the backbone's logits, h (γ, d) its hidden states, prev (1,) the anchor as a column of U,
    ``head.step(prev, h_k, state) → (B (1, V_U), state, e)`` or head None. ``draw(p, generator)`` picks a column
    at T > 0; ``forced`` takes given columns for the first slots (the rows stay p_draft given that prefix);
    ``greedy_rows``: at T = 0 still build each one-hot row and call ``draw`` (else the argmax alone).
    ``vocab_ids`` (V_U,) maps columns to token ids for the diagnostics."""
    out, dev = Slots(), h.device
    for k in range(U.shape[0]):
        b = None
        if head is not None:
            b, state, e = head.step(prev, h[k:k + 1], state)
            b = b[0]                                                                        # (V_U,)
            out.es.append(e)
        logits = U[k] + b.to(U.dtype) if b is not None else U[k]                            # before temperature
        if temperature == 0 and not greedy_rows:          # the one-hot row's only index (rows made by the caller)
            j = int(logits.argmax())
        else:
            p = probs_from_logits(logits, temperature)                                      # (V_U,) float32
            j = int(forced[k]) if forced is not None and k < len(forced) else int(draw(p, generator))
            out.rows.append(p)
        out.js.append(j)
        if diag:
            out.diags.append(slot_diag(U[k], logits, b, j, vocab_ids))
        prev = torch.tensor([j], device=dev)
    return out


def slot_diag(u: torch.Tensor, logits: torch.Tensor, b: torch.Tensor | None, j: int,
              vocab_ids: torch.Tensor | None) -> dict:
    """One slot's chart data: the top DIAG_TOPK tokens with their backbone logit U and head bias B."""
    top = torch.topk(logits.float(), min(DIAG_TOPK, logits.shape[0])).indices
    ids = vocab_ids[top] if vocab_ids is not None else top
    return {"ids": ids.tolist(), "U": u[top].float().tolist(),
            "B": (b[top].float() if b is not None else torch.zeros(len(top))).tolist(),
            "chosen": int(vocab_ids[j]) if vocab_ids is not None else j}


def native_sampler(product, device):
    """``sampling.sample`` as one native call where the drafter's kernel extension has it (the same index and the
    same generator state after, tests/test_drafters.py), else ``sampling.sample`` itself."""
    ext = getattr(product, "ext", None)
    if ext is None or not hasattr(ext, "sample_index") or torch.device(device).type != "cpu":
        return sample
    return ext.sample_index


__all__ = ["head_slots", "slot_diag", "Slots", "native_sampler", "DIAG_TOPK"]
