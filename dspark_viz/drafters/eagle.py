"""EAGLE-style baseline: a one-layer autoregressive drafter on fused target features.

Legend: γ block size, d hidden size, n context entries, N blocks, V_d draft vocabulary.

Entry j reads [f_j ; e(x_{j+1})] → Linear(2d → d) → one causal decoder layer → g_j, which
predicts x_{j+2}. f_j is the fused target feature RMSNorm(W_c[h(l1);…;h(lm)]) at position j for
committed positions, and the drafter's own previous output g inside a draft (training-time test:
training unrolls exactly these γ steps). Drafting costs γ sequential passes.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..sampling import probs_from_logits
from .backbone import DraftLayer, RMSNorm, rope_cos_sin
from .config import DrafterConfig
from .slots import native_sampler
from .vocab import full_vocab_rows, one_hot_rows, register_draft_vocab, vocab_logits


class EagleModel(nn.Module):
    def __init__(self, cfg: DrafterConfig, embed: torch.Tensor, lm_head: torch.Tensor, vocab_ids: torch.Tensor):
        super().__init__()
        self.cfg = cfg
        d, m = cfg.hidden_size, len(cfg.feature_layers)
        self.fc = nn.Linear(m * d, d, bias=False)
        self.ctx_norm = RMSNorm(d, cfg.rms_eps)
        self.inp = nn.Linear(2 * d, d, bias=False)
        self.layer = DraftLayer(d, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff, cfg.rms_eps)
        self.norm = RMSNorm(d, cfg.rms_eps)
        self.head, self.conf = None, None
        register_draft_vocab(self, vocab_ids, embed, lm_head)

    @property
    def layers(self):                      # for initialisation from the target's top layers
        return [self.layer]

    def fuse(self, feats):
        return self.ctx_norm(self.fc(feats.to(self.fc.weight.dtype)))

    def step_input(self, f, tok):
        """f (T, d) features or own hidden, tok (T,) next tokens → (T, d)."""
        return self.inp(torch.cat([f, self.embed[tok].to(f.dtype)], -1))

    def run(self, x, pos, k_prev, v_prev, mask):
        """One layer over inputs x (T, d) at positions pos → (g (T, d), k, v of x)."""
        cos, sin = rope_cos_sin(pos, self.cfg.head_dim, self.cfg.rope_theta)
        out, k, v = self.layer(x, cos, sin, k_prev, v_prev, mask, return_kv=True)
        return self.norm(out), k, v

    def base_logits(self, g):
        return vocab_logits(self, g)                    # g (…, d) → (…, V_d)

    # -- inference ------------------------------------------------------------------------
    @torch.inference_mode()
    def begin(self, feats: torch.Tensor, ids: list[int]) -> dict:
        dev = self.W_vd.device
        Hk, Dh = self.cfg.n_kv_heads, self.cfg.head_dim
        dt = self.W_vd.dtype                                                           # fp32 or bf16, as the target
        st = {"k": torch.zeros(Hk, 0, Dh, device=dev, dtype=dt), "v": torch.zeros(Hk, 0, Dh, device=dev, dtype=dt),
              "pending": None, "n": 0}
        self.extend(st, feats, list(ids))
        return st

    @torch.inference_mode()
    def extend(self, st: dict, feats: torch.Tensor, toks: list[int]) -> None:
        """feats (t, m·d) and toks (t,) of newly committed positions q..q+t−1. Adds the entries
        (pending f_{q−1}, x_q), (f_q, x_{q+1}), …, (f_{q+t−2}, x_{q+t−1}); f_{q+t−1} becomes pending."""
        dev = self.W_vd.device
        f = self.fuse(feats.to(dev))                                                   # (t, d)
        ins = ([st["pending"][None]] if st["pending"] is not None else []) + [f[:-1]]
        xs = torch.cat(ins, 0)                                                         # (T, d)
        nxt = toks if st["pending"] is not None else toks[1:]
        st["pending"] = f[-1]
        if xs.shape[0] == 0:
            return
        x = self.step_input(xs, torch.tensor(nxt, device=dev))
        n0, T = st["k"].shape[1], xs.shape[0]
        pos = torch.arange(n0, n0 + T, device=dev)
        mask = torch.cat([torch.ones(T, n0, dtype=torch.bool, device=dev),
                          torch.ones(T, T, dtype=torch.bool, device=dev).tril()], 1)   # causal
        _, k, v = self.run(x, pos, st["k"], st["v"], mask)
        st["k"], st["v"] = torch.cat([st["k"], k], 1), torch.cat([st["v"], v], 1)

    @torch.inference_mode()
    def propose(self, st: dict, anchor: int, anchor_pos: int, temperature: float, generator, diag: bool = True):
        dev, g = self.W_vd.device, self.cfg.gamma
        n0 = st["k"].shape[1]
        assert n0 == anchor_pos - 1, "EAGLE context must hold entries up to anchor_pos − 2"
        k_all, v_all = st["k"], st["v"]
        f, tok, toks, diags, rows = st["pending"][None], anchor, [], [], []          # rows: γ × (V_d,)
        draw = native_sampler(self.vocab_product, dev)
        for i in range(g):
            x = self.step_input(f, torch.tensor([tok], device=dev))                    # (1, d)
            mask = torch.ones(1, k_all.shape[1] + 1, dtype=torch.bool, device=dev)
            out, k, v = self.run(x, torch.tensor([n0 + i], device=dev), k_all, v_all, mask)
            k_all, v_all = torch.cat([k_all, k], 1), torch.cat([v_all, v], 1)
            logits = self.base_logits(out[0]).float()                                  # (V_d,)
            if temperature == 0:                     # the one-hot row's only index (dspark.one_hot_rows)
                j = int(logits.argmax())
            else:
                p = probs_from_logits(logits, temperature)
                j = draw(p, generator)
                rows.append(p)
            tok = int(self.vocab_ids[j])
            toks.append(tok)
            if diag:
                top = torch.topk(logits, 8).indices
                diags.append({"ids": self.vocab_ids[top].tolist(), "U": logits[top].tolist(),
                              "B": [0.0] * 8, "chosen": tok})
            f = out                                                                    # own hidden feeds the next step
        p = full_vocab_rows(self, rows) if rows else one_hot_rows(self, toks)                          # (γ, V)
        return toks, p, None, (diags or None)
