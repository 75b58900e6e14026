"""One forward over a ragged batch: rows from many sequences, each sequence in its own slot of a shared KV cache.

Legend: N rows in the forward, S slots (sequences the cache holds), C a slot's capacity in tokens, d hidden size,
H / Hk query / key-value heads, D head size, F MLP width, V vocabulary, R rows whose logits are wanted.

A corpus sampler keeps 64–128 sequences going at once: each forward carries every live sequence's one new token
and the whole prompts of sequences just admitted into freed slots. Nothing is padded and there is no mask tensor:
row i says which slot it belongs to and at which position it sits; its key and value go into that slot at that
position, and it attends to the slot's positions 0 … pos_i (``ragged_attention`` in csrc/decoder_layer.h, one
row's code whatever else is in the call). Every weight is read once for all N rows: q, k, v as one product, gate
and up as one, each through torch's GEMM (on CPUs with AMX or AVX512-BF16 a bf16 GEMM of 64+ rows runs near the
machine's peak; the few-row kernel of ``kernels`` covers 1–64 rows).

The layer is the Llama layer of transformers written out (its RMSNorm modules or the fused norm's arithmetic,
rotary embedding with ``rotate_half``, SiLU-gated MLP, residuals in the model's dtype), so logits agree with the
stock forward to within the dtype's rounding; torch chooses its GEMM by N, so the last bits of a row may depend
on how many rows share the forward. Without the native extension, or off the CPU, attention runs as SDPA over
each row's slot under a length mask (the same arithmetic law, more memory traffic); on an accelerator
``attend_grouped`` reads the cache in place instead.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import kernels


class RaggedCache:
    """Keys and values of S slots: per layer K, V (S, Hk, C, D); ``length`` (S,) tokens held per slot."""

    def __init__(self, n_layers: int, slots: int, kv_heads: int, head_dim: int, capacity: int,
                 dtype: torch.dtype, device):
        if slots < 1 or capacity < 1:
            raise ValueError(f"a ragged cache needs ≥ 1 slot and ≥ 1 position (got {slots}, {capacity})")
        shape = (slots, kv_heads, capacity, head_dim)
        self.K = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.V = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(n_layers)]
        self.length = torch.zeros(slots, dtype=torch.long)

    @property
    def slots(self) -> int:
        return self.K[0].shape[0]

    @property
    def capacity(self) -> int:
        return self.K[0].shape[2]

    def reserve(self, capacity: int) -> None:
        """Room for ``capacity`` positions per slot (doubling; what the slots hold is kept)."""
        if capacity <= self.capacity:
            return
        new = max(capacity, 2 * self.capacity)
        for buf in (self.K, self.V):
            for i, t in enumerate(buf):
                grown = t.new_zeros(t.shape[0], t.shape[1], new, t.shape[3])
                grown[:, :, :t.shape[2]] = t
                buf[i] = grown


    def adopt(self, slot: int, layers) -> int:
        """Copy one sequence's keys and values — per layer (1, Hk, n, D), a model/cache.py cache's ``layers`` —
        into ``slot``'s positions 0 … n − 1. → n."""
        n = int(layers[0].keys.shape[2])
        self.reserve(n + 1)
        for K, V, layer in zip(self.K, self.V, layers):
            K[slot, :, :n] = layer.keys[0]
            V[slot, :, :n] = layer.values[0]
        return n


class RaggedForward:
    """``target``'s forward over ragged batches (a Llama-family Hugging Face model behind the target wrapper)."""

    def __init__(self, target):
        m = target.model
        inner = m.model
        self.device, self.dtype = target.device, target.dtype
        self.paths = getattr(target, "paths", None)        # the kernel variant the machine chose (fast/tune.py)
        self.embed = inner.embed_tokens
        self.rotary = inner.rotary_emb
        self.norm = inner.norm
        cfg = m.config
        self.H, self.Hk = cfg.num_attention_heads, cfg.num_key_value_heads
        self.D = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.H
        self.ext = kernels.load() if str(self.device) == "cpu" else None
        if self.ext is not None and not hasattr(self.ext, "ragged_attention"):
            self.ext = None
        self.grouped = self.device.type != "cpu"           # attention reads the cache in place (attend_grouped)
        self.packed = _can_pack(self.device, self.dtype)
        pack = (lambda w: torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), 64)) if self.packed else (
            lambda w: w)
        self.layers = []
        with torch.no_grad():
            for layer in inner.layers:
                a, mlp = layer.self_attn, layer.mlp
                if any(getattr(p, "bias", None) is not None for p in (a.q_proj, a.k_proj, a.v_proj, a.o_proj)):
                    raise ValueError("the ragged forward covers Llama layers without biases")
                self.layers.append({
                    "ln1": layer.input_layernorm, "ln2": layer.post_attention_layernorm,
                    "qkv": pack(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])),
                    "o": pack(a.o_proj.weight), "scale": float(a.scaling),
                    "gu": pack(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])),
                    "down": pack(mlp.down_proj.weight), "F": mlp.gate_proj.weight.shape[0]})
            self.head = pack(m.lm_head.weight)                                           # (V, d)
        self._head_weight = m.lm_head.weight
        self.exact_layers = self._exact_layers(target)

    def _exact_layers(self, target) -> list[tuple] | None:
        """Each layer's weights for ``ragged_layer`` (the few-token layers' arithmetic) where the target itself
        decodes on the fused native layers (fast/lean.py) in a dtype the kernel takes, else None."""
        from . import lean

        m = target.model
        if (self.ext is None or not hasattr(self.ext, "ragged_layer") or not lean.fused(m)
                or self.dtype not in kernels.DTYPES or self.D % 16 or m.lm_head.weight.shape[1] % 8):
            return None
        out = []
        for layer in m.model.layers:
            a, mlp = layer.self_attn, layer.mlp
            ws = (layer.input_layernorm.weight, a.q_proj.weight, a.k_proj.weight, a.v_proj.weight, a.o_proj.weight,
                  layer.post_attention_layernorm.weight, mlp.gate_proj.weight, mlp.up_proj.weight,
                  mlp.down_proj.weight)
            if any(w.dtype != self.dtype or not w.is_contiguous() for w in ws):
                return None
            out.append((ws, float(layer.input_layernorm.variance_epsilon),
                        float(layer.post_attention_layernorm.variance_epsilon), float(a.scaling)))
        return out

    @property
    def can_exact(self) -> bool:
        """Whether ``exact=True`` runs here: a row's logits and features then have the bits the target's own
        few-token forward gives it (alone or in its own block of ≤ 64), whatever else shares the call."""
        return self.exact_layers is not None

    def cache(self, slots: int, capacity: int) -> RaggedCache:
        return RaggedCache(len(self.layers), slots, self.Hk, self.D, capacity, self.dtype, self.device)

    def _linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """x (N, in) · wᵀ (in, out) → (N, out)."""
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
        return F.linear(x, w)

    def _norm(self, module, x: torch.Tensor) -> torch.Tensor:
        if self.ext is not None and x.shape[-1] % 8 == 0:
            return self.ext.rms_norm_rows(x.contiguous(), module.weight, float(module.variance_epsilon))
        return module(x)

    def _attend(self, q, K, V, slot, n_keys, scale):
        """q (N, H, D) over each row's slot → (N, H·D)."""
        if self.ext is not None:
            return self.ext.ragged_attention(q.contiguous(), K, V, slot, n_keys, scale)
        if self.grouped:
            return attend_grouped(q, K, V, slot, n_keys, scale, self.Hk)
        N, rep = q.shape[0], self.H // self.Hk
        dev = K.device
        s, n = slot.to(dev), n_keys.to(dev)
        mask = torch.arange(K.shape[2], device=dev)[None, :] < n[:, None]                   # (N, C)
        o = F.scaled_dot_product_attention(q.reshape(N, self.Hk, rep, self.D), K[s], V[s],
                                           attn_mask=mask[:, None, None, :], scale=scale)    # (N, Hk, rep, D)
        return o.reshape(N, self.H * self.D)

    @torch.inference_mode()
    def __call__(self, cache: RaggedCache, ids: torch.Tensor, slot: torch.Tensor, pos: torch.Tensor,
                 out_rows: torch.Tensor, features: list[int] | None = None,
                 feature_rows: torch.Tensor | None = None, exact: bool = False):
        """ids, slot, pos (N,) int64 (CPU): each row's token, slot and position → logits (R, V) of ``out_rows``;
        with ``features`` (layer indices as the target's: 0 the embedding output, l the output of layer l − 1),
        (logits, features (R', m·d)) of ``feature_rows`` (default ``out_rows``) — the rows of transformers'
        hidden_states at those layers, concatenated.
        Each row's key and value are written into its slot at its position; the caller keeps ``cache.length``.
        ``exact`` (where ``can_exact``): every layer as one ``ragged_layer`` call and the LM head through the
        few-row kernel — the target's own few-token arithmetic, row by row, in the kernel variant the target's own
        forwards take (each weight read once per 64 rows)."""
        if int(pos.max()) >= cache.capacity:
            raise ValueError(f"position {int(pos.max())} is past the cache's capacity {cache.capacity}")
        if exact and not self.can_exact:
            raise ValueError("the exact ragged forward needs the native kernel and the fused layers (fast/lean.py)")
        dev, H, Hk, D = self.device, self.H, self.Hk, self.D
        x = self.embed(ids.to(dev))                                                         # (N, d)
        cos, sin = self.rotary(x[None], pos.to(dev)[None])                                  # (1, N, D) each
        if exact:
            with kernels.variant(self.paths.at(1) if self.paths is not None else "fast"):
                return self._exact(cache, x, cos[0].contiguous(), sin[0].contiguous(), slot.contiguous(),
                                   pos.contiguous(), out_rows, features, feature_rows)
        cos, sin = cos[0, :, None, :], sin[0, :, None, :]                                   # (N, 1, D)
        slot_d, pos_d, n_keys = slot.to(dev), pos.to(dev), pos + 1
        rows_d, want, feats = out_rows.to(dev), set(features or ()), {}
        f_rows = rows_d if feature_rows is None else feature_rows.to(dev)
        for li, (lw, K, V) in enumerate(zip(self.layers, cache.K, cache.V)):
            if li in want:
                feats[li] = x[f_rows]                                                       # (R', d)
            h = self._norm(lw["ln1"], x)
            q, k, v = self._linear(h, lw["qkv"]).split([H * D, Hk * D, Hk * D], -1)
            q, k, v = q.view(-1, H, D), k.view(-1, Hk, D), v.view(-1, Hk, D)
            q = q * cos + _rotate_half(q) * sin                                             # (N, H, D)
            k = k * cos + _rotate_half(k) * sin                                             # (N, Hk, D)
            K[slot_d, :, pos_d] = k
            V[slot_d, :, pos_d] = v
            o = self._attend(q, K, V, slot, n_keys, lw["scale"])                            # (N, H·D)
            x = x + self._linear(o, lw["o"])
            h = self._norm(lw["ln2"], x)
            g, u = self._linear(h, lw["gu"]).split([lw["F"], lw["F"]], -1)                     # (N, F) each
            x = x + self._linear(F.silu(g) * u, lw["down"])
        last = self._norm(self.norm, x[rows_d])                                             # (R, d)
        logits = self._linear(last, self.head)                                              # (R, V)
        if features is None:
            return logits
        return logits, torch.cat([feats[li] for li in features], -1)                       # (R', m·d)


    def _exact(self, cache, x, cos, sin, slot, pos, out_rows, features, feature_rows):
        """``__call__``'s exact arm: x (N, d), cos / sin (N, D) → as ``__call__``."""
        want, feats = set(features or ()), {}
        f_rows = out_rows if feature_rows is None else feature_rows
        for li, ((ln1, wq, wk, wv, wo, ln2, wg, wu, wd), e1, e2, scale) in enumerate(self.exact_layers):
            if li in want:
                feats[li] = x[f_rows]                                                       # (R', d)
            x = self.ext.ragged_layer(x.contiguous(), ln1, e1, wq, wk, wv, cos, sin, self.H, self.Hk,
                                      cache.K[li], cache.V[li], slot, pos, scale, wo, ln2, e2, wg, wu, wd)
        last = self.ext.rms_norm_rows(x[out_rows].contiguous(), self.norm.weight, float(self.norm.variance_epsilon))
        logits = kernels.linear(self.ext, last, self._head_weight)                         # (R, V)
        if features is None:
            return logits
        return logits, torch.cat([feats[li] for li in features], -1)                       # (R', m·d)


def attend_grouped(q: torch.Tensor, K: torch.Tensor, V: torch.Tensor, slot: torch.Tensor, n_keys: torch.Tensor,
                   scale: float, Hk: int) -> torch.Tensor:
    """The accelerator's ragged attention: q (N, H, D) over each row's slot of K, V (S, Hk, C, D), keys 0 …
    n_keys − 1 → (N, H·D). No row's slot is copied out: rows alone in their slot (a decode step's) attend in one
    SDPA over the whole cache (or over only their slots when they are few), rows sharing a slot (a prompt's)
    in one SDPA over their slots, queries padded to the longest group; keys past the longest row's are never
    read. Per row the same softmax over the same keys as the CPU's code."""
    N, H, D = q.shape
    S, rep, dev = K.shape[0], H // Hk, K.device
    s, nk = slot.to(dev), n_keys.to(dev)
    L = int(nk.max())
    Kl, Vl = K[:, :, :L], V[:, :, :L]
    keys = torch.arange(L, device=dev)
    out = q.new_empty(N, H, D)
    alone = torch.bincount(s, minlength=S)[s] == 1                                       # (N,)
    one = alone.nonzero()[:, 0]
    if len(one) * 4 >= S:                                    # most slots step: read the cache once, in place
        qf = q.new_zeros(S, H, D)
        qf[s[one]] = q[one]
        nf = torch.ones(S, dtype=nk.dtype, device=dev)       # idle slots attend to one key (their output unused)
        nf[s[one]] = nk[one]
        o = F.scaled_dot_product_attention(qf.view(S, Hk, rep, D), Kl, Vl, scale=scale,
                                           attn_mask=(keys[None, :] < nf[:, None])[:, None, None, :])
        out[one] = o.reshape(S, H, D)[s[one]]
        rest = (~alone).nonzero()[:, 0]
    else:
        rest = torch.arange(N, device=dev)
    if len(rest):
        order = rest[torch.argsort(s[rest], stable=True)]                                # rows by slot
        u, counts = torch.unique_consecutive(s[order], return_counts=True)               # (U,), (U,)
        U, Q = len(u), int(counts.max())
        grp = torch.repeat_interleave(torch.arange(U, device=dev), counts)               # (M,) row → group
        rank = torch.arange(len(order), device=dev) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts,
                                                                              counts)    # (M,) row within group
        qg = q.new_zeros(U, Q, Hk, rep, D)
        qg[grp, rank] = q[order].view(-1, Hk, rep, D)
        ng = torch.ones(U, Q, dtype=nk.dtype, device=dev)
        ng[grp, rank] = nk[order]
        mask = (keys[None, None, :] < ng[:, :, None])                                    # (U, Q, L)
        o = F.scaled_dot_product_attention(qg.permute(0, 2, 1, 3, 4).reshape(U, Hk, Q * rep, D), Kl[u], Vl[u],
                                           attn_mask=mask.repeat_interleave(rep, 1)[:, None], scale=scale)
        out[order] = o.view(U, Hk, Q, rep, D).permute(0, 2, 1, 3, 4).reshape(U, Q, H, D)[grp, rank]
    return out.reshape(N, H * D)


def _can_pack(device, dtype) -> bool:
    """bf16 on a CPU with oneDNN: weights packed once into the GEMM's own layout (on AMX CPUs its tile layout),
    so no forward repacks them; the products equal ``F.linear``'s."""
    if str(device) != "cpu" or dtype != torch.bfloat16 or not torch.backends.mkldnn.is_available():
        return False
    try:
        w = torch.ones(8, 8, dtype=dtype)
        x = torch.ones(2, 8, dtype=dtype)
        out = torch.ops.mkldnn._linear_pointwise(x, torch.ops.mkldnn._reorder_linear_weight(w, 2), None, "none",
                                                 [], "")
        return bool(torch.equal(out, F.linear(x, w)))
    except (RuntimeError, AttributeError):
        return False


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


def sample_icdf(logits: torch.Tensor, temperature: float, u: torch.Tensor) -> torch.Tensor | None:
    """One token per row of softmax(logits / T), drawn by inverting its CDF at the row's uniform, in one native
    call (csrc/sample_rows.h; rows in parallel, zero-mass tokens never drawn). logits (R, V), u (R,) in [0, 1)
    → (R,) token ids; None where the native extension does not cover these logits (off the CPU, no compiler)."""
    if logits.device.type != "cpu" or logits.dtype not in kernels.DTYPES:
        return None
    ext = kernels.load()
    if ext is None or not hasattr(ext, "sample_icdf"):
        return None
    return ext.sample_icdf(logits.contiguous(), float(temperature), u.float().contiguous())


def forward_for(target) -> RaggedForward:
    """The ragged forward of ``target``, built once per target (its fused weights are copies)."""
    fwd = getattr(target, "_ragged_forward", None)
    if fwd is None:
        fwd = RaggedForward(target)
        target._ragged_forward = fwd
    return fwd


def supports(target) -> bool:
    """Whether ``target`` is a model the ragged forward covers (Llama-family layers without biases)."""
    m = getattr(target, "model", None)
    inner = getattr(m, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or not hasattr(inner, "rotary_emb") or not hasattr(m, "lm_head"):
        return False
    return all(type(layer).__name__ in ("LlamaDecoderLayer", "MistralDecoderLayer") for layer in layers)


__all__ = ["RaggedCache", "RaggedForward", "attend_grouped", "forward_for", "sample_icdf", "supports"]
