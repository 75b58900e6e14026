"""The whole few-token forward of a Llama-family model as straight-line code: embedding, rotary, the lean decoder
layers, final norm and LM head, without transformers' model-level wrappers.

Legend: n new tokens (1–64), P cached positions, S = P + n, d hidden size, L decoder layers, V vocabulary.

With every layer on the fused path (lean.py) a one-token step spends most of what is not a native call in the
model around the layers: keyword merging, output capture, the causal-mask builder, the rotary module and one
``nn.Module.__call__`` per layer. Here the same operations run in the same order on the same tensors — the
embedding's own forward, the rotary module's values (rows of a table its forward made), each layer's lean forward
called directly, the final norm's forward, the LM head on the kept positions — so logits, features and hidden
states are bit-identical to ``model(...)`` (tests/test_stack.py checks ``torch.equal`` at every width and both
dtypes). Where every layer is on lean.py's fused path, the stack makes each layer's two native calls itself, with
the cache's in-place append between — the same calls with the same arguments, without the per-layer checks of the
lean forward — and with a cache that grows in place, all layers in one native call (``StackPlan``,
csrc/decoder_layer.h) that writes the new keys and values into the cache's buffers, and — with the final norm on
its lean forward and the LM head on the kernel — computes the final norm and the logits in the same call: after a
step streams the weights, every Python-level operation finds the CPU's caches cold, so the fewer the better. The
mask is the one the layers would get: none for a one-token step (it sees its whole cache), else one sequence's
causal mask (n, S), already marked plain-causal for the fused layers.

It applies only to one sequence of 1–64 new tokens after a non-empty cache, without a padding mask or explicit
positions, with every decoder layer carrying its lean forward (``DSPARK_LEAN_LAYERS=0`` turns both off); anything
else goes through ``model(...)``. Forward hooks registered on the model or its layers do not run here: a
researcher who hooks a layer sets ``DSPARK_LEAN_LAYERS=0``.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from . import kernels


class _Layer(NamedTuple):
    """What one decoder layer's two native calls read (lean.py's fused path)."""
    n1: torch.Tensor
    eps1: float
    Wq: torch.Tensor
    Wk: torch.Tensor
    Wv: torch.Tensor
    H: int
    Hk: int
    scaling: float
    Wo: torch.Tensor
    n2: torch.Tensor
    eps2: float
    Wg: torch.Tensor
    Wu: torch.Tensor
    Wd: torch.Tensor


def layer_forwards(model) -> list | None:
    """The lean forward of every decoder layer of ``model``, in order, or None where one lacks it."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not layers:
        return None
    fns = [l.__dict__.get("forward") for l in layers]
    return fns if all(f is not None and hasattr(f, "state") for f in fns) else None


def applies(model, ids: torch.Tensor, cache, extra: dict) -> list | None:
    """The layers' lean forwards when ``forward`` can stand in for ``model(...)`` (pass them on to it), else None:
    ids (1, n ≤ 64) after a non-empty cache, no padding mask or explicit positions, no autograd, a Llama-style
    model whose layers all carry their lean forward."""
    if (extra or ids.dim() != 2 or ids.shape[0] != 1 or not 1 <= ids.shape[1] <= kernels.MAX_ROWS
            or cache is None or cache.get_seq_length() == 0 or torch.is_grad_enabled() or model.training
            or not hasattr(model, "lm_head")):
        return None
    return layer_forwards(model)


def _native_plan(model, fns) -> tuple | None:
    """(extension, one _Layer per decoder layer), made once per model and kept while the same lean forwards are
    installed; None where a layer is off the fused path (``lean.unfused``), the linears are not patched
    (``kernels.stock_linears``) or the extension is missing."""
    if not all(f.state.get("fused") for f in fns):
        return None
    layers = model.model.layers
    if not kernels.routed(layers[0].self_attn.q_proj):
        return None
    key = tuple(map(id, fns))
    kept = model.__dict__.get("_dspark_plan")
    if kept is None or kept[0] != key:
        ext = kernels.load()
        if ext is None:
            return None
        rows = []
        for l in layers:
            at, mlp, D = l.self_attn, l.mlp, l.self_attn.head_dim
            rows.append(_Layer(l.input_layernorm.weight, l.input_layernorm.variance_epsilon, at.q_proj.weight,
                               at.k_proj.weight, at.v_proj.weight, at.q_proj.weight.shape[0] // D,
                               at.k_proj.weight.shape[0] // D, at.scaling, at.o_proj.weight,
                               l.post_attention_layernorm.weight, l.post_attention_layernorm.variance_epsilon,
                               mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight))
        whole = None
        if hasattr(ext, "StackPlan"):                  # every layer in one native call (decoder_layer.h)
            whole = ext.StackPlan([w for r in rows for w in (r.n1, r.Wq, r.Wk, r.Wv, r.Wo, r.n2, r.Wg, r.Wu, r.Wd)],
                                  [r.eps1 for r in rows], [r.eps2 for r in rows], [r.scaling for r in rows],
                                  [r.H for r in rows], [r.Hk for r in rows])
        kept = model.__dict__["_dspark_plan"] = (key, (ext, rows, whole))
    return kept[1]


def _tail(model, ext, x: torch.Tensor) -> tuple | None:
    """(final norm weight, eps, LM head weight) where the model's final norm and LM head would compute what
    ``StackPlan.forward`` computes after the layers — the norm's lean forward (lean.py) on its native arithmetic,
    the head a bias-free linear through the kernel's tiles (kernels.patch_linears) — else None."""
    norm, head = model.model.norm, model.lm_head
    f = norm.__dict__.get("forward")
    if (f is None or not getattr(f, "state", {}).get("fused") or not isinstance(head, torch.nn.Linear)
            or head.bias is not None or not kernels.routed(head) or head.weight.dtype != x.dtype
            or not head.weight.is_contiguous() or norm.weight.dtype != x.dtype
            or getattr(ext.skinny_linear, "__name__", "") != "skinny_linear"):   # kernels.row_layout: the rows
        return None
    return norm.weight, norm.variance_epsilon, head.weight


def _native_layers(plan, x: torch.Tensor, cache, cos: torch.Tensor, sin: torch.Tensor, tail=None,
                   last_only: bool = False) -> list | None:
    """Every layer as its two native calls with the cache's in-place append between — what each lean forward does
    on its fused path (same calls, same arguments: the same bits), without its per-layer checks; where the
    extension has it, all layers in one call (``StackPlan``) that writes the new keys and values into the cache's
    buffers itself, and with ``tail`` (``_tail``) the final norm and LM head in the same call.
    x (1, n, d) → the outputs of every layer, each (1, n, d); with the tail then the normed rows (1, n, d) and the
    logits (1, n or 1, V) — or None where the tail could not run here."""
    ext, rows, whole = plan
    cos, sin = cos.contiguous(), sin.contiguous()
    layers = cache.layers
    if whole is not None and hasattr(layers[0], "reserve"):
        n, past = x.shape[1], layers[0].get_seq_length()
        if all(layer.get_seq_length() == past for layer in layers):
            ks, vs = zip(*(layer.reserve(n) for layer in layers))                # (1, Hk, capacity, D) each
            if tail is not None:
                outs = whole.forward(x, list(ks), list(vs), past, cos, sin, *tail, last_only)
            else:
                outs = whole.step(x, list(ks), list(vs), past, cos, sin)
            for layer in layers:
                layer.written(n)
            return outs
    if tail is not None:
        return None
    outs = []
    for i, r in enumerate(rows):
        qs, ks, vs = ext.layer_qkv(x, r.n1, r.eps1, r.Wq, r.Wk, r.Wv, cos, sin, r.H, r.Hk)
        ks, vs = layers[i].update(ks, vs)                                      # (1, Hk, S, D) views
        x = ext.layer_rest(x, qs, ks, vs, r.scaling, r.Wo, r.n2, r.eps2, r.Wg, r.Wu, r.Wd)
        outs.append(x)
    return outs


def _rotary(rot, x: torch.Tensor, P: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin (1, n, D) of positions P … P + n − 1: rows of a table the rotary module's own forward computed for
    positions 0 … capacity − 1 (elementwise in the position, so each row has the bits a forward of those positions
    alone gets), kept on the module and doubled when outgrown; a rotary embedding that rescales with the length
    (rope_type other than "default") computes every forward's own."""
    if getattr(rot, "rope_type", None) != "default":
        return rot.forward(x, (torch.arange(n, device=x.device) + P).unsqueeze(0))   # positions (1, n)
    kept = rot.__dict__.get("_dspark_table")
    if kept is None or kept[0] != (x.dtype, x.device) or kept[1].shape[1] < P + n:
        cap = max(2 * (P + n), 256)
        cos, sin = rot.forward(x[:, :1], torch.arange(cap, device=x.device).unsqueeze(0))       # (1, cap, D)
        kept = rot.__dict__["_dspark_table"] = ((x.dtype, x.device), cos, sin)
    return kept[1][:, P:P + n], kept[2][:, P:P + n]


def _causal_mask(n: int, S: int) -> torch.Tensor:
    """(1, 1, n, S) bool: row i sees keys 0 … S − n + i; marked for lean._plain_causal."""
    m = torch.ones(n, S, dtype=torch.bool).tril(S - n)[None, None]
    m._dspark_causal = True
    return m


def forward(model, ids: torch.Tensor, cache, want_hidden: bool, last_only: bool, fns: list | None = None):
    """ids (1, n) after the cache's P positions → (logits (1, n or 1, V) in the model's dtype,
    hidden states: None or L + 1 × (1, n, d) as transformers returns them — entry 0 the embedding output,
    entry l the output of layer l − 1, the last one after the final norm). ``fns``: what ``applies`` returned."""
    inner = model.model
    fns = fns if fns is not None else layer_forwards(model)
    n = ids.shape[1]
    P = cache.get_seq_length()                                                 # > 0 (applies)
    x = inner.embed_tokens.forward(ids)                                        # (1, n, d)
    pe = _rotary(inner.rotary_emb, x, P, n)                                    # cos, sin (1, n, D)
    hs = [x] if want_hidden else None
    # a cache whose layers append in place and hand back (1, Hk, S, D) views with each head's rows contiguous
    # (model/cache.py's GrowingCache says so); others go through each layer's own forward
    plan = _native_plan(model, fns) if getattr(cache, "grows_in_place", False) else None
    if plan is not None and x.dtype == plan[1][0].n1.dtype and len(cache.layers) == len(fns):
        tail = _tail(model, plan[0], x) if hasattr(plan[2], "forward") else None
        outs = _native_layers(plan, x.contiguous(), cache, *pe, tail, last_only) if tail is not None else None
        if outs is not None:                          # every layer, final norm and LM head in one native call
            logits, normed = outs.pop(), outs.pop()
            if hs is not None:
                hs += outs[:-1] + [normed]            # the last entry: the final norm's output, as transformers
            return logits, hs
        outs = _native_layers(plan, x.contiguous(), cache, *pe)
        x = outs[-1]
        if hs is not None:
            hs += outs
    else:
        mask, pos = None if n == 1 else _causal_mask(n, P + n), (torch.arange(n, device=x.device) + P).unsqueeze(0)
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
