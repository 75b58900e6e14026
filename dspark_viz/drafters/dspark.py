"""DSpark: parallel backbone + sequential head + confidence head. DFlash-style = no heads.

Legend: γ block size, V full vocabulary, V_d draft vocabulary (its most frequent tokens; p_draft
is exactly 0 outside it, so verification stays exact), d hidden size, n context positions,
N blocks, r head rank, k 1-based slot.

Slot k (0-based k−1) of the block predicts x_k; its base logits are U_k = h_k W_vdᵀ with the
target's frozen LM head rows W_vd; the sequential head adds B_k(x_{<k}) before temperature.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .. import fast
from ..memo import keyed
from .backbone import ParallelBackbone
from .config import DrafterConfig
from .heads import ConfidenceHead, make_head
from .slots import head_slots, native_sampler
from .vocab import full_vocab_rows, one_hot_rows, register_draft_vocab, vocab_logits


class DSparkModel(nn.Module):
    merges_extends = True               # extend is row-wise (NeuralDrafter.commit may merge rounds' positions)

    def __init__(self, cfg: DrafterConfig, embed: torch.Tensor, lm_head: torch.Tensor, vocab_ids: torch.Tensor):
        super().__init__()
        self.cfg = cfg
        d, V = cfg.hidden_size, embed.shape[0]
        self.backbone = ParallelBackbone(d, len(cfg.feature_layers), cfg.n_layers, cfg.n_heads, cfg.n_kv_heads,
                                         cfg.head_dim, cfg.d_ff, cfg.rms_eps, cfg.rope_theta)
        vd = vocab_ids.shape[0]
        self.head = make_head(cfg.head, vd + 1, vd, cfg.rank, d)
        self.conf = ConfidenceHead(d, cfg.rank) if cfg.confidence else None
        if self.conf is not None and self.head is None:
            raise ValueError("a confidence head needs a sequential head's token embedding W1")
        register_draft_vocab(self, vocab_ids, embed, lm_head)

    # -- backbone ------------------------------------------------------------------------
    def base_logits(self, h):
        """h (…, d) → U (…, V_d)."""
        return vocab_logits(self, h)

    # -- inference ------------------------------------------------------------------------
    @torch.inference_mode()
    def begin(self, feats: torch.Tensor, ids: list[int] | None = None) -> dict:
        st = {"kv": [(None, None)] * len(self.backbone.layers), "n": 0}
        self.extend(st, feats)
        return st

    @torch.inference_mode()
    def extend(self, st: dict, feats: torch.Tensor, toks: list[int] | None = None) -> None:
        """Append committed positions' target features (t, m·d) to the context K/V caches."""
        if feats is None or feats.shape[0] == 0:
            return
        dev = self.W_vd.device
        new = self.backbone.context_kv(self.backbone.fuse(feats.to(dev)), st["n"])           # positions n, n+1, …
        st["kv"] = [(kn, vn) if k is None else (torch.cat([k, kn], 1), torch.cat([v, vn], 1))
                    for (k, v), (kn, vn) in zip(st["kv"], new)]
        st["n"] += feats.shape[0]

    @torch.inference_mode()
    def propose(self, st: dict, anchor: int, anchor_pos: int, temperature: float, generator, diag: bool = True):
        g, dev = self.cfg.gamma, self.W_vd.device
        assert st["n"] == anchor_pos, "drafter context must end right before the anchor"
        x = self.backbone.block_input(torch.tensor([anchor], device=dev), g, self.embed)      # (γ, d)
        ext = fast.layer_extension(self.vocab_product)                                        # context < anchor
        h = self.backbone.forward_block(x, anchor_pos, st["kv"], ext)                         # + block: (γ, d)
        U = self.base_logits(h).float()                                                       # (γ, V_d)
        vocab = self._vocab_list()
        prev = self.full2draft[anchor].view(1)
        if temperature == 0 and not diag and self.head is None:      # no sequential head: every slot at once
            toks = [vocab[j] for j in U.argmax(-1).tolist()]
            return toks, one_hot_rows(self, toks, U.dtype), None, None
        native = self._native_loop(temperature, diag)
        if native is not None:                                        # the slot loop below, in one native call
            W1, W2 = self.head.W1.weight, self.head.W2.weight
            if temperature == 0:
                js, P = native.markov_greedy(U, W1, W2, int(prev)), None
            else:
                js, P = native.markov_sample(U, W1, W2, int(prev), float(temperature), generator)   # P (γ, V_d)
            toks = [vocab[j] for j in js]
            e = W1[[int(prev)] + js[:-1]]                                                    # (γ, r)
            conf = torch.sigmoid(self.conf(h, e)).tolist() if self.conf is not None else None
            return toks, (one_hot_rows(self, toks, U.dtype) if P is None else full_vocab_rows(self, P)), conf, None
        state = self.head.init_state(1, dev) if self.head is not None else None
        sl = head_slots(U, h, self.head, prev, temperature, generator, state=state,
                        draw=native_sampler(self.vocab_product, dev), diag=diag, vocab_ids=self.vocab_ids)
        toks = [vocab[j] for j in sl.js]
        conf = None                   # c_k for every slot in one call: each row computed as it would be alone
        if self.conf is not None and sl.es:
            conf = torch.sigmoid(self.conf(h, torch.cat(sl.es))).tolist()                     # γ floats
        p = full_vocab_rows(self, sl.rows) if sl.rows else one_hot_rows(self, toks, U.dtype)           # (γ, V)
        return toks, p, conf, (sl.diags or None)

    def _native_loop(self, temperature: float, diag: bool):
        """The extension when a draft without diagnostics can take its Markov-head slot loop natively (greedy:
        ``markov_greedy``; sampled: ``markov_sample``, which draws from the same generator): the head's W₂ takes the
        kernel (its patched linear), so the native loop computes the same bits; else None."""
        if diag or self.head is None or self.head.kind != "markov":
            return None
        ext = getattr(self.vocab_product, "ext", None)
        loop = "markov_greedy" if temperature == 0 else "markov_sample"
        if ext is None or not hasattr(ext, loop) or not fast.kernels.routed(self.head.W2):
            return None
        W1, W2 = self.head.W1.weight, self.head.W2.weight
        ok = W1.dtype == W2.dtype and W1.dtype in fast.DTYPES and W1.device.type == "cpu" and W1.shape[1] % 8 == 0
        return ext if ok and W1.is_contiguous() and W2.is_contiguous() else None

    def _vocab_list(self) -> list[int]:
        """vocab_ids as a Python list (a list index per slot, not a tensor index and a sync), kept until the
        buffer changes."""
        return keyed(self, "vocab_list", (self.vocab_ids.data_ptr(), self.vocab_ids._version), self.vocab_ids.tolist)
