"""The whole few-token forward of a Llama-family model as straight-line code: embedding, rotary, the lean decoder
layers, final norm and LM head, without transformers' model-level wrappers.

Legend: n new tokens (1–8), P cached positions, S = P + n, d hidden size, L decoder layers, V vocabulary.

With every layer on the fused path (lean.py) a one-token step spends most of what is not a native call in the
model around the layers: keyword merging, output capture, the causal-mask builder, the rotary module and one
``nn.Module.__call__`` per layer. Here the same operations run in the same order on the same tensors — the
embedding's own forward, the rotary module's forward, each layer's lean forward called directly, the final
norm's forward, the LM head on the kept positions — so logits, features and hidden states are bit-identical to
``model(...)`` (tests/test_stack.py checks ``torch.equal`` at every width and both dtypes). Where every layer is on
lean.py's fused path, the stack makes each layer's two native calls itself, with the cache's in-place append
between — the same calls with the same arguments, without the per-layer checks of the lean forward. The mask is the one
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


def _native_plan(model, fns) -> list | None:
    """Per decoder layer the arguments of its two native calls (lean.py's fused path), made once per model and
    kept while the same lean forwards are installed; None where a layer is not on the fused path, its linears
    are not patched (``kernels.stock_linears``) or the extension is missing."""
    kept = model.__dict__.get("_dspark_plan")
    if kept is not None and kept[0] == tuple(map(id, fns)):
        plan = kept[1]
    else:
        ext = kernels.load()
        layers = model.model.layers
        if ext is None or not all(f.state.get("fused") for f in fns):
            return None
        plan = []
        for i, l in enumerate(layers):
            at, mlp = l.self_attn, l.mlp
            D = at.head_dim
            plan.append((l.input_layernorm.weight, l.input_layernorm.variance_epsilon, at.q_proj.weight,
                         at.k_proj.weight, at.v_proj.weight, at.q_proj.weight.shape[0] // D,
                         at.k_proj.weight.shape[0] // D, at.scaling, at.o_proj.weight,
                         l.post_attention_layernorm.weight, l.post_attention_layernorm.variance_epsilon,
                         mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight, at.q_proj, i))
        plan = (ext, plan)
        model.__dict__["_dspark_plan"] = (tuple(map(id, fns)), plan)
    ext, rows = plan
    if not all(f.state.get("fused") for f in fns) or "forward" not in rows[0][14].__dict__:
        return None                                    # lean.unfused / kernels.stock_linears in force
    return plan


def _native_layers(plan, x: torch.Tensor, cache, cos: torch.Tensor, sin: torch.Tensor) -> list:
    """Every layer as its two native calls with the cache's in-place append between — what each lean forward does
    on its fused path (same calls, same arguments: the same bits), without its per-layer checks.
    x (1, n, d) → the outputs of every layer, each (1, n, d)."""
    ext, rows = plan
    outs, cos, sin = [], cos.contiguous(), sin.contiguous()
    for (n1, eps1, Wq, Wk, Wv, H, Hk, scaling, Wo, n2, eps2, Wg, Wu, Wd, _, i) in rows:
        qs, ks, vs = ext.layer_qkv(x, n1, eps1, Wq, Wk, Wv, cos, sin, H, Hk)
        ks, vs = cache.layers[i].update(ks, vs)                                 # (1, Hk, S, D) views
        x = ext.layer_rest(x, qs, ks, vs, scaling, Wo, n2, eps2, Wg, Wu, Wd)
        outs.append(x)
    return outs


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
    # a cache whose layers append in place and hand back (1, Hk, S, D) views with each head's rows contiguous
    # (model/cache.py's GrowingCache says so); others go through each layer's own forward
    plan = _native_plan(model, fns) if getattr(cache, "grows_in_place", False) else None
    if plan is not None and x.dtype == plan[1][0][0].dtype and len(cache.layers) == len(fns):
        outs = _native_layers(plan, x.contiguous(), cache, *pe)
        x = outs[-1]
        if hs is not None:
            hs += outs
    else:
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
