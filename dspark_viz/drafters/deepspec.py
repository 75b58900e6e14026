"""DeepSpec DSpark / DFlash checkpoints as drafters: the model as plain torch modules, drafting as DeepSpec does.

Legend: γ block size, V vocabulary, d hidden size, n context positions, m target layers read,
H / Hk query / key-value heads, Dh head size, r Markov rank, k 0-based slot.

One round (DeepSpec's inference, deepspec/eval/dspark):
  context  C = hidden_norm(fc([h_l for l in target_layer_ids])) of the committed positions; every draft
           layer projects C with its own k/v projections (k_norm on keys, RoPE at their own positions) and
           keeps them as a cache that only ever grows by committed positions.
  block    embed_tokens([x0, MASK × (γ − 1)]) at positions anchor_pos + k; each layer is a Qwen3 layer
           (q_norm / k_norm per head) attending bidirectionally to the whole context cache and the block.
  logits   U_k = lm_head(norm(h_k)); the Markov / RNN bias B_k(x_{k−1}) is added to U_k before temperature;
           x_k ~ softmax((U_k + B_k) / T) (argmax at T = 0), x_0 = the anchor.
  conf.    c_k = σ(proj([h_k; markov_w1[x_{k−1}]])) (only h_k without confidence_head_with_markov).
The drafter is a NeuralDrafter, so STS, the scheduler, Trace and every chart apply unchanged.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import fast
from ..calibration import STSCalibration
from .backbone import RMSNorm, apply_rope, rope_cos_sin
from .deepspec_config import DeepSpecConfig, calibration_file, check_target, read_config, read_weights
from .slots import head_slots
from .neural_drafter import NeuralDrafter

SHARED = ("embed_tokens.weight", "lm_head.weight")      # kept as tensors (shared with the target when equal)


class QwenDraftLayer(nn.Module):
    """A Qwen3 decoder layer whose attention also reads the context keys/values (DeepSpec parameter names)."""

    def __init__(self, c: DeepSpecConfig):
        super().__init__()
        d, H, Hk, Dh, b = c.hidden_size, c.n_heads, c.n_kv_heads, c.head_dim, c.attention_bias
        self.H, self.Hk, self.Dh = H, Hk, Dh
        self.self_attn = nn.Module()
        a = self.self_attn
        a.q_proj, a.k_proj, a.v_proj = nn.Linear(d, H * Dh, b), nn.Linear(d, Hk * Dh, b), nn.Linear(d, Hk * Dh, b)
        a.o_proj = nn.Linear(H * Dh, d, b)
        if c.qk_norm:
            a.q_norm, a.k_norm = RMSNorm(Dh, c.rms_eps), RMSNorm(Dh, c.rms_eps)
        self.mlp = nn.Module()
        self.mlp.gate_proj, self.mlp.up_proj = nn.Linear(d, c.d_ff, False), nn.Linear(d, c.d_ff, False)
        self.mlp.down_proj = nn.Linear(c.d_ff, d, False)
        self.input_layernorm = RMSNorm(d, c.rms_eps)
        self.post_attention_layernorm = RMSNorm(d, c.rms_eps)

    def _norm(self, name: str, x):
        f = getattr(self.self_attn, name, None)
        return f(x) if f is not None else x

    def kv(self, x, cos, sin):
        """x (T, d) → k, v (Hk, T, Dh): k_norm per head, then RoPE on k."""
        a, T = self.self_attn, x.shape[0]
        k = self._norm("k_norm", a.k_proj(x).view(T, self.Hk, self.Dh)).transpose(0, 1)
        v = a.v_proj(x).view(T, self.Hk, self.Dh).transpose(0, 1)
        return apply_rope(k, cos, sin), v

    def forward(self, x, cos, sin, k_ctx, v_ctx):
        """x (γ, d) block; k_ctx / v_ctx (Hk, n, Dh) → (γ, d). No mask: the block sees all context and itself."""
        a, T = self.self_attn, x.shape[0]
        h = self.input_layernorm(x)
        q = self._norm("q_norm", a.q_proj(h).view(T, self.H, self.Dh)).transpose(0, 1)       # (H, γ, Dh)
        q = apply_rope(q, cos, sin)
        kb, vb = self.kv(h, cos, sin)                                                       # (Hk, γ, Dh)
        k, v = torch.cat([k_ctx, kb], 1), torch.cat([v_ctx, vb], 1)                         # (Hk, n+γ, Dh)
        rep = self.H // self.Hk
        k, v = k.repeat_interleave(rep, 0), v.repeat_interleave(rep, 0)                     # (H, n+γ, Dh)
        o = F.scaled_dot_product_attention(q[None], k[None], v[None])[0]                    # (H, γ, Dh)
        x = x + a.o_proj(o.transpose(0, 1).reshape(T, self.H * self.Dh))
        h = self.post_attention_layernorm(x)
        return x + self.mlp.down_proj(F.silu(self.mlp.gate_proj(h)) * self.mlp.up_proj(h))


class MarkovHead(nn.Module):
    """DeepSpec's sequential heads: vanilla B = w2(w1[x]); gated B = w2(σ(gate([h; w1[x]])) ⊙ w1[x]);
    rnn z = [s; w1[x]; h] → g, c, o; s ← σ(g)⊙s + (1−σ(g))⊙tanh(c); B = w2(tanh(o)), s_0 = 0."""

    def __init__(self, c: DeepSpecConfig):
        super().__init__()
        V, r, d = c.vocab_size, c.markov_rank, c.hidden_size
        self.kind, self.r = c.head_type, r
        self.markov_w1 = nn.Embedding(V, r)                     # (V, r)
        self.markov_w2 = nn.Linear(r, V, bias=False)            # (r → V)
        if self.kind == "gated":
            self.gate_proj = nn.Linear(d + r, r)
        elif self.kind == "rnn":
            self.joint_proj = nn.Linear(2 * r + d, 3 * r)

    def step(self, prev, h, state):
        """prev (1,) token id, h (1, d), state (1, r) or None → bias (1, V), new state, w1[prev] (1, r)."""
        e = self.markov_w1(prev)
        if self.kind == "vanilla":
            return self.markov_w2(e), state, e
        if self.kind == "gated":
            g = torch.sigmoid(self.gate_proj(torch.cat([h, e], -1)))
            return self.markov_w2(g * e), state, e
        s = torch.zeros_like(e) if state is None else state
        g, cand, o = self.joint_proj(torch.cat([s, e, h], -1)).chunk(3, -1)
        g = torch.sigmoid(g)
        s = g * s + (1 - g) * torch.tanh(cand)
        return self.markov_w2(torch.tanh(o)), s, e


class DeepSpecModel(nn.Module):
    """The drafter of one DeepSpec folder, with the begin / extend / propose protocol of DSparkModel."""

    def __init__(self, c: DeepSpecConfig, columns: torch.Tensor | None = None):
        super().__init__()
        self.cfg, d, m = c, c.hidden_size, len(c.target_layer_ids)
        self.layers = nn.ModuleList(QwenDraftLayer(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(d, c.rms_eps)
        self.fc = nn.Linear(m * d, d, bias=False)
        self.hidden_norm = RMSNorm(d, c.rms_eps)
        self.markov_head = MarkovHead(c) if c.head_type else None
        if c.confidence:
            self.confidence_head = nn.Module()
            self.confidence_head.proj = nn.Linear(d + (c.markov_rank if c.confidence_with_markov else 0), 1)
        else:
            self.confidence_head = None
        self.columns = columns            # (m·d,) which target feature columns are this drafter's, or None: all
        self.embed_w = self.lm_w = None   # (V, d) each, set by the loader
        self.vocab_product = fast.RowProduct()   # torch's product until the loader hands over the kernel

    @property
    def conf(self):                       # NeuralDrafter: has_confidence
        return self.confidence_head

    def logits(self, h):
        """h (γ, d) → U (γ, V) = lm_head(h), through the few-row kernel when the loader set one."""
        return self.vocab_product(h, self.lm_w)

    # -- context -----------------------------------------------------------------------------
    @torch.inference_mode()
    def begin(self, feats: torch.Tensor, ids: list[int] | None = None) -> dict:
        st = {"kv": [None] * len(self.layers), "n": 0}
        self.extend(st, feats)
        return st

    @torch.inference_mode()
    def extend(self, st: dict, feats: torch.Tensor, toks: list[int] | None = None) -> None:
        """Append committed positions' target features (t, M·d) to every layer's context K/V cache."""
        if feats is None or feats.shape[0] == 0:
            return
        dev, dt = self.fc.weight.device, self.fc.weight.dtype
        feats = feats.to(dev)
        if self.columns is not None:
            feats = feats.index_select(1, self.columns.to(dev))                             # (t, m·d)
        ctx = self.hidden_norm(self.fc(feats.to(dt)))                                       # (t, d)
        cos, sin = rope_cos_sin(torch.arange(st["n"], st["n"] + feats.shape[0], device=dev),
                                self.cfg.head_dim, self.cfg.rope_theta)
        new = [layer.kv(ctx, cos, sin) for layer in self.layers]
        st["kv"] = [kv_new if kv is None else (torch.cat([kv[0], kv_new[0]], 1), torch.cat([kv[1], kv_new[1]], 1))
                    for kv, kv_new in zip(st["kv"], new)]
        st["n"] += feats.shape[0]

    # -- one round ---------------------------------------------------------------------------
    @torch.inference_mode()
    def hidden(self, st: dict, anchor: int, anchor_pos: int) -> torch.Tensor:
        """The backbone over [x0, MASK × (γ − 1)] → h (γ, d) after the final norm."""
        g, dev = self.cfg.gamma, self.fc.weight.device
        assert st["n"] == anchor_pos, "drafter context must end right before the anchor"
        ids = torch.full((g,), self.cfg.mask_token_id, dtype=torch.long, device=dev)
        ids[0] = anchor
        x = self.embed_w[ids].to(self.fc.weight.dtype)                                      # (γ, d)
        cos, sin = rope_cos_sin(torch.arange(anchor_pos, anchor_pos + g, device=dev),
                                self.cfg.head_dim, self.cfg.rope_theta)
        for layer, (k, v) in zip(self.layers, st["kv"]):
            x = layer(x, cos, sin, k, v)
        return self.norm(x)

    @torch.inference_mode()
    def propose(self, st: dict, anchor: int, anchor_pos: int, temperature: float, generator,
                diag: bool = True, forced: list[int] | None = None):
        """Draft γ tokens left to right. ``forced``: take these tokens for the first slots instead of sampling
        (rows are then p_draft given that prefix: scoring a block). → tokens, p_draft (γ, V), c or None, diags."""
        h = self.hidden(st, anchor, anchor_pos)                                             # (γ, d)
        U = self.logits(h)                                                                  # (γ, V)
        sl = head_slots(U, h, self.markov_head, torch.tensor([anchor], device=h.device), temperature, generator,
                        forced=forced, greedy_rows=True, diag=diag)
        conf = None
        if self.confidence_head is not None:            # c_k per slot from h_k (and w1[x_{k−1}]), each row alone
            conf = [float(torch.sigmoid(self.confidence_head.proj(
                torch.cat([h[k:k + 1], sl.es[k].to(h.dtype)], -1) if self.cfg.confidence_with_markov else h[k:k + 1]
            ).float())) for k in range(len(sl.js))]
        return sl.js, torch.stack(sl.rows), conf, (sl.diags or None)


def _columns(cfg: DeepSpecConfig, target) -> torch.Tensor | None:
    """Indices of this drafter's layers in the target's feature vector (None: the same layers, in order)."""
    have, need, d = list(target.feature_layers), cfg.feature_layers, cfg.hidden_size
    if have == need:
        return None
    gone = [l for l in need if l not in have]
    if gone:
        raise ValueError(f"drafter {cfg.path.name} reads target_layer_ids {list(cfg.target_layer_ids)}, i.e. "
                         f"hidden_states {need}; target {target.name} computes features of {have}: load it with "
                         f"load_target(PATH, feature_layers={need}) (the CLI does this for --drafter DIR)")
    return torch.cat([torch.arange(have.index(l) * d, (have.index(l) + 1) * d) for l in need])


def _shared(w: torch.Tensor, target_w: torch.Tensor) -> torch.Tensor:
    """The target's own tensor when the checkpoint's copy is identical (one copy in memory), else ``w``."""
    if w.shape == target_w.shape and w.dtype == target_w.dtype and torch.equal(w, target_w):
        return target_w.detach()
    return w


def load_deepspec(path, target, calibrated: bool = True, name: str | None = None) -> NeuralDrafter:
    """A DeepSpec DSpark / DFlash ``save_pretrained`` folder as a drafter for ``target``; an STS calibration
    saved beside the folder (``DIR.sts.json``, `dspark-viz calibrate --drafter DIR`) is attached."""
    cfg = read_config(path)
    check_target(cfg, target)
    columns = _columns(cfg, target)
    with torch.device("meta"):
        model = DeepSpecModel(cfg, columns)
    V, d = cfg.vocab_size, cfg.hidden_size
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()} | {k: (V, d) for k in SHARED}
    st = read_weights(cfg.path, expected)
    dtype = target.dtype if target.dtype != torch.float16 else torch.float32
    own = {k: v for k, v in st.items() if k not in SHARED}
    model.load_state_dict(own, strict=True, assign=True)
    model.to(device=target.device, dtype=dtype)
    model.embed_w = _shared(st["embed_tokens.weight"].to(target.device, dtype), target.embed_weight)
    model.lm_w = _shared(st["lm_head.weight"].to(target.device, dtype), target.lm_head_weight)
    model.vocab_product = fast.install_drafter(model, getattr(target, "paths", None))   # the target's kernel too
    card = {"format": "deepspec", "algo": cfg.algo, "path": str(cfg.path),
            "target_layer_ids": list(cfg.target_layer_ids), "feature_layers": cfg.feature_layers,
            "gamma": cfg.gamma, "markov_rank": cfg.markov_rank, "markov_head_type": cfg.head_type,
            "confidence": cfg.confidence, "qk_norm": cfg.qk_norm}
    drafter = NeuralDrafter(model.eval(), name or cfg.path.name, target, card)
    cal = calibration_file(cfg.path)
    if calibrated and drafter.has_confidence and cal.is_file():
        drafter.calibration = STSCalibration.load(cal)
    return drafter
