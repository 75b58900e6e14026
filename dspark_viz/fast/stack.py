"""The whole few-token forward of a Llama-family model as straight-line code: embedding, rotary, the lean decoder
layers, final norm and LM head, without transformers' model-level wrappers.

Legend: n new tokens (1–8), P cached positions, S = P + n, d hidden size, L decoder layers, V vocabulary.

With every layer on the fused path (lean.py) a one-token step spends most of what is not a native call in the
model around the layers: keyword merging, output capture, the causal-mask builder, the rotary module and one
``nn.Module.__call__`` per layer. Here the same operations run in the same order on the same tensors — the
embedding's own forward, the rotary module's forward, each layer's lean forward called directly, the final
norm's forward, the LM head on the kept positions — so logits, features and hidden states are bit-identical to
``model(...)`` (tests/test_stack.py checks ``torch.equal`` at every width and both dtypes). The mask is the one
the layers would get: none for a one-token step (it sees its whole cache), else one sequence's causal mask (n, S),
already marked plain-causal for the fused layers.

It applies only to one sequence of 1–8 new tokens after a non-empty cache, without a padding mask or explicit
positions, with every decoder layer carrying its lean forward (``DSPARK_LEAN_LAYERS=0`` turns both off); anything
else goes through ``model(...)``. Forward hooks registered on the model or its layers do not run here: a
researcher who hooks a layer sets ``DSPARK_LEAN_LAYERS=0``.
"""
from __future__ import annotations

import torch

from . import kernels

def layer_forwards(model) -> list | None:
    """The lean forward of every decoder layer of ``model``, in order, or None where one lacks it."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not layers:
        return None
    fns = [l.__dict__.get("forward") for l in layers]
    return fns if all(f is not None and hasattr(f, "state") for f in fns) else None


def applies(model, ids: torch.Tensor, cache, extra: dict) -> bool:
    """Whether ``forward`` can stand in for ``model(...)``: ids (1, n ≤ 8) after a non-empty cache, no padding
    mask or explicit positions, no autograd, a Llama-style model whose layers all carry their lean forward."""
    return (not extra and ids.dim() == 2 and ids.shape[0] == 1 and 1 <= ids.shape[1] <= kernels.MAX_ROWS
            and cache is not None and cache.get_seq_length() > 0 and not torch.is_grad_enabled()
            and not model.training and hasattr(model, "lm_head") and layer_forwards(model) is not None)


def _causal_mask(n: int, S: int) -> torch.Tensor:
    """(1, 1, n, S) bool: row i sees keys 0 … S − n + i; marked for lean._plain_causal."""
    m = torch.ones(n, S, dtype=torch.bool).tril(S - n)[None, None]
    m._dspark_causal = True
    return m


def forward(model, ids: torch.Tensor, cache, want_hidden: bool, last_only: bool):
    """ids (1, n) after the cache's P positions → (logits (1, n or 1, V) in the model's dtype,
    hidden states: None or L + 1 × (1, n, d) as transformers returns them — entry 0 the embedding output,
    entry l the output of layer l − 1, the last one after the final norm)."""
    inner = model.model
    fns = layer_forwards(model)
    n = ids.shape[1]
    P = cache.get_seq_length()                                                 # > 0 (applies)
    x = inner.embed_tokens.forward(ids)                                        # (1, n, d)
    pos = (torch.arange(n, device=x.device) + P).unsqueeze(0)                 # (1, n)
    mask = None if n == 1 else _causal_mask(n, P + n)
    pe = inner.rotary_emb.forward(x, pos)                                      # cos, sin (1, n, D)
    hs = [x] if want_hidden else None
    for f in fns:
        x = f(x, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True, position_embeddings=pe)
        if hs is not None:
            hs.append(x)
    x = inner.norm.forward(x)
    if hs is not None:
        hs[-1] = x
    logits = model.lm_head.forward(x[:, -1:, :] if last_only else x)          # (1, n or 1, V)
    return logits, hs


__all__ = ["applies", "forward", "layer_forwards"]
