"""Parallel draft backbone with target feature injection (the DFlash-style stage of DSpark).

Legend: γ block size, n context positions, d hidden size, m fused target layers, H query heads,
Hk key/value heads, Dh head size, N blocks in a training batch, V_d draft vocabulary.

Context: H_ctx = RMSNorm(W_c [h(l1); …; h(lm)]) over committed positions (n, d). Every draft
layer projects H_ctx with its own k/v projections and uses the result as extra keys/values.
Block: [x0, MASK×(γ−1)] at positions anchor_pos + k, k = 0..γ−1; block queries attend
bidirectionally to their own block and to context positions strictly before the anchor.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import fast
from ..memo import keyed, peek


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rope_cos_sin(pos: torch.Tensor, head_dim: int, theta: float):
    """pos (…,) → cos, sin (…, Dh) in the Llama (half-rotation) layout."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=pos.device) / head_dim)
    f = pos.float()[..., None] * inv                                   # (…, Dh/2)
    emb = torch.cat([f, f], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    """x (…, T, Dh) with cos/sin (T, Dh) broadcast over heads."""
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return x * cos.to(x.dtype) + rot * sin.to(x.dtype)


def block_attention(q, k_ctx, v_ctx, k_blk, v_blk, ctx_len, gamma: int):
    """Training's attention of N blocks at once, scoring only the keys a row may see.
    q (…, H, T, Dh) with T = N·γ rows, block after block; k_ctx/v_ctx (…, Hk, n, Dh) context; k_blk/v_blk
    (…, Hk, T, Dh) the blocks' own keys/values; ctx_len (…, T) context positions each row sees → (…, H, T, Dh).
    A leading batch dimension … holds several sequences, each with its own context and blocks.

    The same function as scaled-dot-product attention under the mask [context < ctx_len | own block] over the keys
    [context; every block] (query head h reads key head h // (H / Hk)), without the T × T scores of the other
    blocks' keys, which that mask discards: a training batch of 64 blocks of 8 scores n + 8 keys a row, not n + 512."""
    *L, H, T, Dh = q.shape
    Hk, n = k_ctx.shape[-3], k_ctx.shape[-2]
    rep, N = H // Hk, T // gamma
    scale = Dh ** -0.5
    qg = q.reshape(*L, Hk, rep * T, Dh)                                                 # head h = kv·rep + r
    s_ctx = (qg @ k_ctx.transpose(-1, -2)).view(*L, Hk, rep, N, gamma, n) * scale        # (…, Hk, rep, N, γ, n)
    seen = (torch.arange(n, device=q.device) < ctx_len[..., None]).view(*L, 1, 1, N, gamma, n)
    s_ctx = s_ctx.masked_fill(~seen, float("-inf"))
    qb = q.reshape(*L, Hk, rep, N, gamma, Dh)
    kb, vb = k_blk.reshape(*L, Hk, 1, N, gamma, Dh), v_blk.reshape(*L, Hk, 1, N, gamma, Dh)
    s_blk = (qb @ kb.transpose(-1, -2)) * scale                                          # (…, Hk, rep, N, γ, γ)
    p = torch.softmax(torch.cat([s_ctx, s_blk], -1).float(), -1).to(q.dtype)            # (…, Hk, rep, N, γ, n + γ)
    p_ctx, p_blk = p.split([n, gamma], -1)
    o = (p_ctx.reshape(*L, Hk, rep * T, n) @ v_ctx).view(*L, Hk, rep, N, gamma, Dh) + p_blk @ vb
    return o.reshape(*L, H, T, Dh)


class DraftLayer(nn.Module):
    """A Llama decoder layer whose attention also reads injected context keys/values.
    Parameter names match HF Llama layers so the target's top layers can initialise it."""

    def __init__(self, d: int, n_heads: int, n_kv: int, head_dim: int, d_ff: int, eps: float):
        super().__init__()
        self.H, self.Hk, self.Dh = n_heads, n_kv, head_dim
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(d, n_heads * head_dim, bias=False)
        self.self_attn.k_proj = nn.Linear(d, n_kv * head_dim, bias=False)
        self.self_attn.v_proj = nn.Linear(d, n_kv * head_dim, bias=False)
        self.self_attn.o_proj = nn.Linear(n_heads * head_dim, d, bias=False)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(d, d_ff, bias=False)
        self.mlp.up_proj = nn.Linear(d, d_ff, bias=False)
        self.mlp.down_proj = nn.Linear(d_ff, d, bias=False)
        self.input_layernorm = RMSNorm(d, eps)
        self.post_attention_layernorm = RMSNorm(d, eps)

    def kv(self, x, cos, sin):
        """x (…, T, d) → k, v (…, Hk, T, Dh) with RoPE on k."""
        a = self.self_attn
        lead = x.shape[:-1]
        k = a.k_proj(x).view(*lead, self.Hk, self.Dh).transpose(-3, -2)
        v = a.v_proj(x).view(*lead, self.Hk, self.Dh).transpose(-3, -2)
        return apply_rope(k, cos, sin), v

    def forward(self, x, cos, sin, k_ctx, v_ctx, mask, return_kv: bool = False, blocks=None):
        """x (T, d) block tokens (all blocks of a batch flattened); k_ctx/v_ctx (Hk, n, Dh) context;
        mask (T, n + T) bool, True = may attend; or, for training's N blocks of γ, ``blocks`` = (ctx_len (T,), γ)
        and mask None (block_attention), where x (B, T, d), k_ctx/v_ctx (B, Hk, n, Dh) and ctx_len (B, T) hold B
        sequences at once. Returns (…, T, d) (and the block's own k, v)."""
        a = self.self_attn
        *L, T, _ = x.shape
        h = self.input_layernorm(x)
        q = apply_rope(a.q_proj(h).view(*L, T, self.H, self.Dh).transpose(-3, -2), cos, sin)   # (…, H, T, Dh)
        kb, vb = self.kv(h, cos, sin)                                                       # (…, Hk, T, Dh)
        if blocks is not None:
            o = block_attention(q, k_ctx, v_ctx, kb, vb, *blocks)                          # (H, T, Dh)
        else:
            k = torch.cat([k_ctx, kb], dim=1)                                               # (Hk, n+T, Dh)
            v = torch.cat([v_ctx, vb], dim=1)
            rep = self.H // self.Hk
            k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)                 # (H, n+T, Dh)
            o = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask[None, None])[0]
        x = x + a.o_proj(o.transpose(-3, -2).reshape(*L, T, self.H * self.Dh))
        h = self.post_attention_layernorm(x)
        m = self.mlp
        x = x + m.down_proj(F.silu(m.gate_proj(h)) * m.up_proj(h))
        return (x, kb, vb) if return_kv else x

    def native_forward(self, ext, x, cos, sin, k_ctx, v_ctx):
        """``forward`` of one inference block whose rows see every key (the context and the whole block) as the
        fused decoder layer's two native calls (fast/csrc/decoder_layer.h): x (γ ≤ 8, d), cos/sin (1, γ, Dh) in x's
        dtype → (γ, d). The same function; its rounding follows transformers' layer, so it agrees with ``forward``
        to within the dtype's rounding, not bit for bit."""
        a, m = self.self_attn, self.mlp
        q, kb, vb = ext.layer_qkv(x[None], self.input_layernorm.weight, self.input_layernorm.eps, a.q_proj.weight,
                                  a.k_proj.weight, a.v_proj.weight, cos, sin,
                                  self.H, self.Hk)                                  # (1, H, γ, Dh), (1, Hk, γ, Dh)
        K = torch.cat([k_ctx[None], kb], 2)                                          # (1, Hk, n + γ, Dh)
        V = torch.cat([v_ctx[None], vb], 2)
        return ext.layer_rest_full(x[None], q, K, V, self.Dh ** -0.5, a.o_proj.weight,
                                   self.post_attention_layernorm.weight, self.post_attention_layernorm.eps,
                                   m.gate_proj.weight, m.up_proj.weight, m.down_proj.weight)[0]


class ParallelBackbone(nn.Module):
    """Fuses target features, embeds [x0, MASK…], runs L draft layers, returns h (…, d)."""

    def __init__(self, d: int, m: int, n_layers: int, n_heads: int, n_kv: int, head_dim: int, d_ff: int,
                 eps: float, rope_theta: float):
        super().__init__()
        self.fc = nn.Linear(m * d, d, bias=False)
        self.ctx_norm = RMSNorm(d, eps)
        self.mask_emb = nn.Parameter(torch.zeros(d))
        self.layers = nn.ModuleList(DraftLayer(d, n_heads, n_kv, head_dim, d_ff, eps) for _ in range(n_layers))
        self.norm = RMSNorm(d, eps)
        self.head_dim, self.rope_theta = head_dim, rope_theta

    def fuse(self, feats):
        """feats (n, m·d) raw target layer outputs → H_ctx (n, d)."""
        return self.ctx_norm(self.fc(feats.to(self.fc.weight.dtype)))

    def context_kv(self, h_ctx, start: int = 0):
        """H_ctx (…, n, d) at positions start … start + n − 1 → per layer (k, v) each (…, Hk, n, Dh); the rotary rows
        come from the table (``rope_rows``)."""
        cos, sin = self.rope_rows(start, h_ctx.shape[-2], h_ctx.device)
        return [layer.kv(h_ctx, cos, sin) for layer in self.layers]

    def rope_rows(self, start: int, n: int, device, dtype=None) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin (n, Dh) fp32 of positions start … start + n − 1 — rows of a table rope_cos_sin computed once for
        positions 0 … capacity − 1 (elementwise in the position: the rows rope_cos_sin gives those positions
        alone), doubled when outgrown; with ``dtype``, (1, n, Dh) in that dtype (what the native layers take).
        Under autograd (training) the rows are computed afresh: a table made in inference mode cannot enter a
        backward pass."""
        if torch.is_grad_enabled():
            cos, sin = rope_cos_sin(torch.arange(start, start + n, device=device), self.head_dim, self.rope_theta)
            return (cos, sin) if dtype is None else (cos.to(dtype)[None], sin.to(dtype)[None])
        kept = peek(self, "rope_table")                                 # (device, cos, sin, {dtype: rows})
        if kept is None or kept[0] != device or kept[1].shape[0] < start + n:
            cap = max(2 * (start + n), 256)
            kept = keyed(self, "rope_table", (device, cap), lambda: (device, *rope_cos_sin(
                torch.arange(cap, device=device), self.head_dim, self.rope_theta), {}))
        if dtype is None:
            return kept[1][start:start + n], kept[2][start:start + n]
        if dtype not in kept[3]:
            kept[3][dtype] = (kept[1].to(dtype)[None], kept[2].to(dtype)[None])
        cos, sin = kept[3][dtype]
        return cos[:, start:start + n], sin[:, start:start + n]

    def block_input(self, anchors, gamma: int, embed):
        """anchors (N,) → (N·γ, d): [e(x0), MASK, …, MASK] per block."""
        N = anchors.shape[0]
        x = self.mask_emb.expand(N, gamma, -1).clone()
        x[:, 0] = embed[anchors].to(x.dtype)
        return x.reshape(N * gamma, -1)

    def native_applies(self, ext, x: torch.Tensor) -> bool:
        """Whether ``forward_block`` can take the native layers: the extension (``fast.layer_extension``), a CPU
        block of 1–64 rows in fp32 or bf16 without autograd, and sizes the native code handles."""
        if ext is None:
            return False
        l0 = self.layers[0]
        return (x.device.type == "cpu" and x.dtype in fast.DTYPES and 1 <= x.shape[0] <= fast.MAX_ROWS
                and not torch.is_grad_enabled() and x.shape[1] % 8 == 0 and self.head_dim % 16 == 0
                and l0.mlp.gate_proj.weight.shape[0] % 8 == 0 and self._params_native(x.dtype))

    def _params_native(self, dtype: torch.dtype) -> bool:
        """Whether every layer parameter is a contiguous ``dtype`` tensor, kept per dtype until the parameters move
        (``.to()`` gives the first and last a new storage; a loop over every parameter each round cost more than
        a small draft's arithmetic)."""
        first, last = self.layers[0].self_attn.q_proj.weight, self.layers[-1].mlp.down_proj.weight
        key = (dtype, first.data_ptr(), first.dtype, last.data_ptr(), last.dtype)
        return keyed(self, "native_params", key,
                     lambda: all(p.dtype == dtype and p.is_contiguous() for p in self.layers.parameters()))

    def forward_block(self, x, start: int, ctx_kv, ext=None):
        """One inference block whose rows see the whole context and the whole block: x (γ, d) at positions
        start … start + γ − 1 → h (γ, d); through the native layers where they apply (``native_applies``, rotary
        rows from the table ``rope_rows``), else ``forward``."""
        if not self.native_applies(ext, x):
            n = ctx_kv[0][0].shape[1] if ctx_kv else 0
            pos = torch.arange(start, start + x.shape[0], device=x.device)
            return self(x, pos, ctx_kv, torch.ones(x.shape[0], n + x.shape[0], dtype=torch.bool, device=x.device))
        cos, sin = self.rope_rows(start, x.shape[0], x.device, x.dtype)                    # (1, γ, Dh)
        for layer, (kc, vc) in zip(self.layers, ctx_kv):
            x = layer.native_forward(ext, x, cos, sin, kc, vc)
        return self.norm(x)

    def forward(self, x, pos, ctx_kv, mask, blocks=None):
        """x (T, d) block inputs, pos (T,) positions, ctx_kv per layer, mask (T, n+T) → h (T, d); training's
        blocks pass ``blocks`` = (ctx_len (T,), γ) instead of a mask (DraftLayer.forward), for B sequences at once
        with x (B, T, d), pos and ctx_len (B, T)."""
        cos, sin = rope_cos_sin(pos, self.head_dim, self.rope_theta)                   # (…, T, Dh)
        if pos.dim() > 1:
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)                              # (B, 1, T, Dh): over heads
        for layer, (kc, vc) in zip(self.layers, ctx_kv):
            x = layer(x, cos, sin, kc, vc, mask, blocks=blocks)
        return self.norm(x)
