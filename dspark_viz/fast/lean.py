"""A lean decoder-layer forward for the few-token forwards (decode steps, verification) of Llama-family targets on CPU.

Legend: b batch, q new tokens, d hidden size, H / Hk query / key-value heads, D head size, S cache + q.

A 135M-parameter target spends a third of a 1–8-token forward outside its matmuls: per layer, eight module
calls through ``nn.Module.__call__``, two deprecation-keyword wrappers and the attention dispatch. This
forward does the same operations in the same order — the layer's own RMSNorm forward, q/k/v through the
few-row kernel (kernels.py), rotary embedding with transformers' ``rotate_half``, the cache's own ``update``, the
packed grouped-query attention (attention.py), o-projection, residual, RMSNorm, SiLU-gated MLP, residual —
as straight-line code, so logits and features are bit-identical to the stock path (tests/test_lean.py
checks ``torch.equal``). It is installed per layer and steps aside (calls the stock forward) for anything
else: prefill, more than 8 rows, autograd, training, another cache class, biases.
``DSPARK_LEAN_LAYERS=0`` turns it off.

One level further (``fused``, on by default): for one sequence under its plain causal mask (or no mask at all
for a one-token step: transformers passes none when every cached key is visible), each layer runs as
two native calls of the kernel extension (``csrc/decoder_layer.h``: norm, q/k/v and rotary; then attention
over the cache, o-projection, norm and MLP), with the cache's own ``update`` in between. That removes the
~50 small tensor ops per layer that cost a third of a 4-token forward, at the price of bit-identity: the
rounding points are transformers' own, the summation orders of the RMS mean and the softmax are not, so
logits agree with the stock layers to within the dtype's rounding (tests/test_lean.py bounds the gap; the
greedy-equality and exact-distribution tests run on this path). The model's final norm joins them
(``rms_norm_rows``, the layers' norm arithmetic) for one sequence of 1–64 rows, so the last hidden state and the
logits share the layers' width invariance. ``DSPARK_FUSED_LAYERS=0`` keeps the bit-identical lean forward and
transformers' final norm.

Width invariance: on the fused path every reduction runs per row in an order fixed by that row alone (the
kernel's products, the norms, the attention over the keys the row sees), so a token's logits and layer
outputs are bit-identical whether it is decoded alone or verified inside a block of up to 8
(tests/test_width_invariance.py). The lean Python forward and the stock layers make no such promise: torch
picks its kernels (and their summation orders) by the number of rows.
"""
from __future__ import annotations

import contextlib

import torch

from ..settings import switch
from . import attention, kernels

LAYER_CLASSES = ("LlamaDecoderLayer", "MistralDecoderLayer")


def enabled() -> bool:
    return switch("DSPARK_LEAN_LAYERS")


def fused_enabled() -> bool:
    return switch("DSPARK_FUSED_LAYERS")


def _plain_causal(mask, q: int) -> bool:
    """Whether ``mask`` (1, 1, q, S) bool is one sequence's causal mask over its cache (row i sees keys
    0 … S − q + i). Every layer of a forward gets the same mask object, so the answer is kept on it."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 4 \
            or mask.shape[:3] != (1, 1, q):
        return False
    kept = getattr(mask, "_dspark_causal", None)
    if kept is None:
        S = mask.shape[-1]
        ref = torch.ones(q, S, dtype=torch.bool).tril(S - q)                   # (q, S)
        kept = bool(torch.equal(mask[0, 0], ref))
        try:
            mask._dspark_causal = kept
        except (AttributeError, RuntimeError):
            pass
    return kept


def _rows(t: torch.Tensor) -> torch.Tensor:
    """Keys or values (1, Hk, S, D) as the native layer reads them: each head's (S, D) rows contiguous. A growing
    cache's views already are (its heads lie a capacity apart): no copy then."""
    return t if t.stride(-1) == 1 and t.stride(-2) == t.shape[-1] else t.contiguous()


def _norm(norm, x: torch.Tensor) -> torch.Tensor:
    """The layer's own RMSNorm forward, without nn.Module.__call__."""
    return norm.forward(x)


def _fits(layer) -> bool:
    """A Llama-style layer with bias-free projections (install also requires the packed attention)."""
    if type(layer).__name__ not in LAYER_CLASSES:
        return False
    at, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    lins = [getattr(at, n, None) for n in ("q_proj", "k_proj", "v_proj", "o_proj")] + \
           [getattr(mlp, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    return (all(isinstance(m, torch.nn.Linear) and m.bias is None for m in lins)
            and hasattr(layer, "input_layernorm") and hasattr(layer, "post_attention_layernorm"))


def _lean_forward(layer, ext):
    """The replacement forward of one decoder layer (hidden (b, q, d) → (b, q, d))."""
    stock = layer.forward
    at, mlp = layer.self_attn, layer.mlp
    n1, n2 = layer.input_layernorm, layer.post_attention_layernorm
    D, idx, scaling, act = at.head_dim, at.layer_idx, at.scaling, mlp.act_fn
    H, Hk = at.q_proj.weight.shape[0] // D, at.k_proj.weight.shape[0] // D
    eps1, eps2 = getattr(n1, "variance_epsilon", None), getattr(n2, "variance_epsilon", None)
    state = {"fused": (fused_enabled() and hasattr(ext, "layer_qkv") and D % 16 == 0 and eps1 is not None
                       and at.q_proj.weight.shape[1] % 8 == 0 and mlp.gate_proj.weight.shape[0] % 8 == 0
                       and eps2 is not None and type(act).__name__ == "SiLUActivation")}
    from transformers import DynamicCache
    from transformers.models.llama.modeling_llama import rotate_half  # Mistral's is the same function

    def lin(x: torch.Tensor, m: torch.nn.Linear) -> torch.Tensor:
        return kernels.linear(ext, x, m.weight)

    def forward(hidden_states, attention_mask=None, position_ids=None, cache=None, use_cache=False,
                position_embeddings=None, **kwargs):
        b, q, _ = hidden_states.shape
        Wq = at.q_proj.weight
        if (not kernels.applies(hidden_states, Wq) or position_embeddings is None              # 1–64 rows
                or not isinstance(cache, DynamicCache) or layer.training
                or not kernels.routed(at.q_proj)):          # patch_linears undone (stock_linears)
            return stock(hidden_states, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                         use_cache=use_cache, position_embeddings=position_embeddings, **kwargs)
        x = hidden_states                                                          # (b, q, d)
        no_mask = attention_mask is None          # transformers: no padding, every cached key visible (causal)
        if state["fused"] and b == 1 and n1.weight.dtype == x.dtype and (no_mask or _plain_causal(attention_mask, q)):
            cos, sin = position_embeddings                                         # (1, q, D) each
            qs, ks, vs = ext.layer_qkv(x.contiguous(), n1.weight, eps1, at.q_proj.weight, at.k_proj.weight,
                                       at.v_proj.weight, cos.contiguous(), sin.contiguous(), H, Hk)
            ks, vs = cache.update(ks, vs, idx)                                     # (1, Hk, S, D)
            S = ks.shape[-2]
            # the native call attends causally with the q new positions last; without a mask that is what is
            # meant when one token sees the whole cache (q = 1) or a block starts an empty one (S = q)
            if (no_mask and q != 1 and S != q) or (not no_mask and S != attention_mask.shape[-1]):
                return after_update(x, qs, ks, vs, attention_mask)   # e.g. a cache that trims (sliding window)
            return ext.layer_rest(x.contiguous(), qs, _rows(ks), _rows(vs), scaling,
                                  at.o_proj.weight, n2.weight, eps2, mlp.gate_proj.weight, mlp.up_proj.weight,
                                  mlp.down_proj.weight)
        h = _norm(n1, x)
        qs = lin(h, at.q_proj).view(b, q, -1, D).transpose(1, 2)                   # (b, H, q, D)
        ks = lin(h, at.k_proj).view(b, q, -1, D).transpose(1, 2)                   # (b, Hk, q, D)
        vs = lin(h, at.v_proj).view(b, q, -1, D).transpose(1, 2)
        cos, sin = (t.unsqueeze(1) for t in position_embeddings)                  # (b, 1, q, D)
        qs = (qs * cos) + (rotate_half(qs) * sin)
        ks = (ks * cos) + (rotate_half(ks) * sin)
        ks, vs = cache.update(ks, vs, idx)                                         # (b, Hk, S, D)
        return after_update(x, qs, ks, vs, attention_mask)

    def after_update(x, qs, ks, vs, attention_mask):
        """Attention over the updated cache, o-projection, residual, norm, MLP, residual (Python path)."""
        b, q = x.shape[:2]
        o, _ = attention.packed_gqa_sdpa(at, qs, ks, vs, attention_mask, scaling=scaling)   # (b, q, H, D)
        x = x + lin(o.reshape(b, q, -1).contiguous(), at.o_proj)
        h = _norm(n2, x)
        return x + lin(act(lin(h, mlp.gate_proj)) * lin(h, mlp.up_proj), mlp.down_proj)

    forward.state = state                      # {"fused": bool}: see unfused()
    return forward


def _final_norm_forward(norm, ext):
    """The replacement forward of the model's final RMSNorm: its native arithmetic for one sequence of 1–64 rows in
    the weight's dtype (fp32 or bf16, CPU, no autograd), transformers' own forward otherwise."""
    stock, w, eps = norm.forward, norm.weight, norm.variance_epsilon
    state = {"fused": fused_enabled()}

    def forward(x: torch.Tensor) -> torch.Tensor:                               # (1, q, d) → (1, q, d)
        if (state["fused"] and x.dim() == 3 and x.shape[0] == 1 and kernels.applies(x, w.view(1, -1))
                and x.shape[-1] % 8 == 0):
            return ext.rms_norm_rows(x.contiguous(), w, eps)
        return stock(x)

    forward.state = state
    return forward


def _final_norm(model):
    """The model's final RMSNorm where the lean forward can take it over, else None."""
    norm = getattr(getattr(model, "model", None), "norm", None)
    w = getattr(norm, "weight", None)
    ok = (type(norm).__name__.endswith("RMSNorm") and isinstance(getattr(norm, "variance_epsilon", None), float)
          and isinstance(w, torch.Tensor) and w.dim() == 1)
    return norm if ok else None


def install(model, ext) -> bool:
    """Give every fitting decoder layer of ``model`` the lean forward; False (nothing changed) when it does
    not apply: off by env, no kernel, not the packed attention, or a layer of another shape."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if (not enabled() or ext is None or layers is None or len(layers) == 0
            or getattr(model.config, "_attn_implementation", None) != attention.NAME
            or not all(_fits(l) for l in layers)):
        return False
    for layer in layers:
        if "forward" not in layer.__dict__:
            layer.forward = _lean_forward(layer, ext)
    norm = _final_norm(model)
    if norm is not None and hasattr(ext, "rms_norm_rows") and "forward" not in norm.__dict__:
        norm.forward = _final_norm_forward(norm, ext)
    return True


@contextlib.contextmanager
def stock_layers(model):
    """Inside the block, ``model``'s layers and final norm run transformers' own forward (A/B and the equality
    test)."""
    layers = list(getattr(getattr(model, "model", None), "layers", None) or []) + [_final_norm(model)]
    saved = [(l, l.__dict__.pop("forward")) for l in layers if l is not None and "forward" in l.__dict__]
    try:
        yield model
    finally:
        for l, f in saved:
            l.forward = f


@contextlib.contextmanager
def unfused(model):
    """Inside the block, ``model``'s lean layers run their bit-identical Python forward, not the two native
    calls, and the final norm transformers' own (A/B measurements and the tolerance test)."""
    norm = _final_norm(model)
    states = [st for st in _layer_states(model) + [getattr(norm.__dict__.get("forward"), "state", None)
                                                     if norm is not None else None] if st is not None]
    saved = [st["fused"] for st in states]
    for st in states:
        st["fused"] = False
    try:
        yield model
    finally:
        for st, f in zip(states, saved):
            st["fused"] = f


def fused(model) -> bool:
    """Whether ``model``'s lean layers take the native two-call forward where it applies."""
    states = _layer_states(model)
    return bool(states) and all(st is not None and st["fused"] for st in states)


def _layer_states(model) -> list[dict | None]:
    """Per decoder layer of ``model``: its lean forward's {"fused"} state, None where no lean forward is installed."""
    layers = getattr(getattr(model, "model", None), "layers", None) or []
    return [getattr(l.__dict__.get("forward"), "state", None) for l in layers]


__all__ = ["enabled", "fused_enabled", "install", "stock_layers", "unfused", "fused"]
