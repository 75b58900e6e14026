"""Grouped-query attention for few-token verification forwards, without copying the KV cache.

Legend: b batch, H query heads, Hk key/value heads, rep = H / Hk, q new tokens, S cache + new length,
D head size.

transformers' SDPA path repeats every key/value head ``rep`` times (``repeat_kv``: a copy of the
whole cache in every layer) whenever more than one token is queried with a mask, which is exactly a
verification forward (2–8 tokens over a cache of hundreds). Here the ``rep`` query heads that share a
key/value head are folded into the query axis instead: q (b, H, q, D) → (b, Hk, rep·q, D), one SDPA
over the un-copied cache, and the mask rows repeated to match. The same products and softmaxes as
before, per query row. A one-token step (q = 1) takes the same packing; it usually arrives without a
mask (transformers passes none when every cached key is visible), and then none is needed. Prefill
(> 8 tokens), a maskless forward of several tokens, training and anything unusual go to transformers' own
SDPA function unchanged. (The width-invariant attention of the project's path is the fused layer's,
csrc/decoder_layer.h; this one serves the lean Python forward and the stock layers.)
``DSPARK_PACKED_GQA=0`` turns it off.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from ..settings import switch

NAME = "dspark_packed_sdpa"
MAX_Q = 8                                          # verification blocks; prefill keeps the stock path


def enabled() -> bool:
    return switch("DSPARK_PACKED_GQA")


def packed_gqa_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                    is_causal=None, **kwargs):
    """query (b, H, q, D), key/value (b, Hk, S, D), mask (b|1, 1, q, S) or None for q = 1 → ((b, q, H, D), None)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    rep = int(getattr(module, "num_key_value_groups", 1))
    b, H, q, D = query.shape
    if attention_mask is None:                  # no mask: every key visible, which one query needs no mask for
        bad_mask = q != 1
    else:
        bad_mask = attention_mask.dim() != 4 or attention_mask.shape[1] != 1 or attention_mask.shape[2] != q
    plain = (rep == 1 or not 1 <= q <= MAX_Q or bad_mask or module.training
             or kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None)
    if plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    Hk = H // rep
    qp = query.reshape(b, Hk, rep * q, D)                      # head h = kv·rep + r → row r·q + i
    mask = None if attention_mask is None else _packed_mask(attention_mask, rep, query.dtype)   # (b|1, 1, rep·q, S)
    o = F.scaled_dot_product_attention(qp, key, value, attn_mask=mask, scale=scaling)   # (b, Hk, rep·q, D)
    return o.reshape(b, H, q, D).transpose(1, 2).contiguous(), None


def _packed_mask(mask, rep: int, dtype):
    """mask (b|1, 1, q, S) → its rows repeated ``rep`` times, (b|1, 1, rep·q, S), as an additive mask of
    ``dtype`` for boolean masks. Every layer of one forward gets the same mask object, so the result is
    kept on it and built once per forward, not once per layer."""
    key = (rep, dtype)
    kept = getattr(mask, "_dspark_packed", None)
    if kept is not None and kept[0] == key:
        return kept[1]
    packed = mask.repeat(1, 1, rep, 1)
    if packed.dtype == torch.bool:
        packed = torch.zeros(packed.shape, dtype=dtype).masked_fill_(~packed, torch.finfo(dtype).min)
    try:
        mask._dspark_packed = (key, packed)
    except (AttributeError, RuntimeError):                   # a tensor that takes no attributes: no reuse
        pass
    return packed


def install(model) -> bool:
    """Route ``model``'s attention through :func:`packed_gqa_sdpa` (masks built as for SDPA).
    Returns False (and changes nothing) when it does not apply: off by env, not SDPA, no GQA."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    cfg = model.config
    groups = int(getattr(cfg, "num_attention_heads", 1)) // int(getattr(cfg, "num_key_value_heads", None)
                                                                 or getattr(cfg, "num_attention_heads", 1))
    if not enabled() or getattr(cfg, "_attn_implementation", None) != "sdpa" or groups <= 1:
        return False
    AttentionInterface.register(NAME, packed_gqa_sdpa)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    model.set_attn_implementation(NAME)
    return True


def uninstall(model) -> None:
    """Back to transformers' SDPA (for A/B measurements)."""
    if getattr(model.config, "_attn_implementation", None) == NAME:
        model.set_attn_implementation("sdpa")


@contextlib.contextmanager
def stock_attention(model):
    """Inside the block, ``model`` attends through transformers' SDPA (A/B against the packed path)."""
    was = getattr(model.config, "_attn_implementation", None) == NAME
    uninstall(model)
    try:
        yield model
    finally:
        if was:
            model.set_attn_implementation(NAME)


__all__ = ["NAME", "MAX_Q", "enabled", "install", "uninstall", "stock_attention", "packed_gqa_sdpa"]
