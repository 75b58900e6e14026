"""The draft vocabulary: the V_d target tokens a drafter predicts, and the maps between it and the target's V.

Legend: V target vocabulary, V_d draft vocabulary (a subset, frequent tokens first), d width, γ block size.

A drafter predicts over V_d rows of the target's frozen LM head (W_vd); its p_draft rows are spread back over the
target's vocabulary (0 outside V_d) so that verification compares like with like. Shared by the DSpark and EAGLE
drafters (the DeepSpec one predicts over the full V).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .. import fast


def register_draft_vocab(module: nn.Module, vocab_ids: torch.Tensor, embed: torch.Tensor, lm_head: torch.Tensor):
    """vocab_ids (V_d,) saved; full2draft (V,) → draft index or V_d (outside); W_vd (V_d, d) = LM head rows.
    The target's embedding and LM head are shared frozen references, never saved with the drafter. The
    vocabulary projection is torch's product until a loader hands over the kernel (fast.install_drafter)."""
    V, vd = embed.shape[0], vocab_ids.shape[0]
    module.register_buffer("vocab_ids", vocab_ids.long(), persistent=True)
    f2d = torch.full((V,), vd, dtype=torch.long)
    f2d[vocab_ids.long()] = torch.arange(vd)
    module.register_buffer("full2draft", f2d, persistent=False)
    module.register_buffer("W_vd", lm_head.detach()[vocab_ids.long()].clone(), persistent=False)
    module.embed, module.lm_head = embed, lm_head
    module.vocab_product = fast.RowProduct()


def full_vocab_rows(module: nn.Module, rows: list[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    """γ × (V_d,) draft-vocabulary distributions, or one (γ, V_d) tensor → (γ, V) over the target's vocabulary,
    0 outside V_d (one scatter along the vocabulary rather than an indexed assignment)."""
    R = rows if isinstance(rows, torch.Tensor) else torch.stack(rows)                   # (γ, V_d)
    idx = module.vocab_ids.expand(R.shape[0], -1)                                        # (γ, V_d)
    return torch.zeros(R.shape[0], module.full2draft.shape[0], dtype=R.dtype, device=R.device).scatter_(1, idx, R)


def one_hot_rows(module: nn.Module, toks: list[int], dtype=torch.float32) -> torch.Tensor:
    """γ greedy drafts → (γ, V) rows, 1 at each draft token: what probs_from_logits(…, 0) gives each slot, spread
    over the target's vocabulary as full_vocab_rows spreads it."""
    out = torch.zeros(len(toks), module.full2draft.shape[0], dtype=dtype, device=module.full2draft.device)
    return out.scatter_(1, torch.tensor(toks, device=out.device).view(-1, 1), 1.0)


def vocab_logits(module: nn.Module, h: torch.Tensor) -> torch.Tensor:
    """h (…, d) → h W_vdᵀ (…, V_d); a block of ≤ 8 rows takes the few-row kernel when the loader set one."""
    return module.vocab_product(h, module.W_vd)


__all__ = ["register_draft_vocab", "full_vocab_rows", "one_hot_rows", "vocab_logits"]
