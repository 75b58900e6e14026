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
from ..sampling import probs_from_logits, sample
from .backbone import ParallelBackbone
from .config import DrafterConfig
from .heads import ConfidenceHead, make_head

DIAG_TOPK = 8


def register_draft_vocab(module: nn.Module, vocab_ids: torch.Tensor, embed: torch.Tensor, lm_head: torch.Tensor):
    """vocab_ids (V_d,) saved; full2draft (V,) → draft index or V_d (outside); W_vd (V_d, d) = LM head rows.
    The target's embedding and LM head are shared frozen references, never saved with the drafter. The
    vocabulary projection is torch's product until a loader hands over the kernel (fast.install_drafter)."""
    V, vd = embed.shape[0], vocab_ids.shape[0]
    module.register_buffer("vocab_ids", vocab_ids.long(), persistent=True)
    f2d = torch.full((V,), vd, dtype=torch.long)
    f2d[vocab_ids.long()] = torch.arange(vd)
    module.register_buffer("full2draft", f2d, persistent=False)
    module.register_buffer("W_vd", lm_head.detach()[vocab_ids.long()].clone(), persistent=False)
    module.embed, module.lm_head = embed, lm_head
    module.vocab_product = fast.RowProduct()


def full_vocab_rows(module: nn.Module, rows: list[torch.Tensor] | torch.Tensor) -> torch.Tensor:
    """γ × (V_d,) draft-vocabulary distributions, or one (γ, V_d) tensor → (γ, V) over the target's vocabulary,
    0 outside V_d (one scatter along the vocabulary rather than an indexed assignment)."""
    R = rows if isinstance(rows, torch.Tensor) else torch.stack(rows)                   # (γ, V_d)
    idx = module.vocab_ids.expand(R.shape[0], -1)                                        # (γ, V_d)
    return torch.zeros(R.shape[0], module.full2draft.shape[0], dtype=R.dtype, device=R.device).scatter_(1, idx, R)


def one_hot_rows(module: nn.Module, toks: list[int], dtype=torch.float32) -> torch.Tensor:
    """γ greedy drafts → (γ, V) rows, 1 at each draft token: what probs_from_logits(…, 0) gives each slot, spread
    over the target's vocabulary as full_vocab_rows spreads it."""
    out = torch.zeros(len(toks), module.full2draft.shape[0], dtype=dtype, device=module.full2draft.device)
    return out.scatter_(1, torch.tensor(toks, device=out.device).view(-1, 1), 1.0)


def native_sampler(product, device):
    """``sampling.sample`` as one native call where the drafter's kernel extension has it (the same index and the
    same generator state after, tests/test_drafters.py), else ``sampling.sample`` itself."""
    ext = getattr(product, "ext", None)
    if ext is None or not hasattr(ext, "sample_index") or torch.device(device).type != "cpu":
        return sample
    return ext.sample_index


def vocab_logits(module: nn.Module, h: torch.Tensor) -> torch.Tensor:
    """h (…, d) → h W_vdᵀ (…, V_d); a block of ≤ 8 rows takes the few-row kernel when the loader set one."""
    return module.vocab_product(h, module.W_vd)


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
        rows, toks, es, diags = [], [], [], []                                                # rows: γ × (V_d,)
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
        draw = native_sampler(self.vocab_product, dev)
        for k in range(g):
            if self.head is not None:
                b, state, e = self.head.step(prev, h[k:k + 1], state)
                b = b[0].float()                                                              # (V_d,)
                es.append(e)
            else:
                b = None
            logits = U[k] + b if b is not None else U[k]
            if temperature == 0:                     # the one-hot row's only index; the rows are made at the end
                j = int(logits.argmax())
            else:
                p = probs_from_logits(logits, temperature)                                    # (V_d,)
                j = draw(p, generator)
                rows.append(p)
            tok = vocab[j]
            toks.append(tok)
            if diag:
                top = torch.topk(logits, DIAG_TOPK).indices
                diags.append({"ids": self.vocab_ids[top].tolist(), "U": U[k, top].tolist(),
                              "B": (b[top] if b is not None else torch.zeros(DIAG_TOPK)).tolist(),
                              "chosen": tok})
            prev = torch.tensor([j], device=dev)
        conf = None                   # c_k for every slot in one call: each row computed as it would be alone
        if self.conf is not None and es:
            conf = torch.sigmoid(self.conf(h, torch.cat(es))).tolist()                        # γ floats
        p = full_vocab_rows(self, rows) if rows else one_hot_rows(self, toks, U.dtype)                 # (γ, V)
        return toks, p, conf, (diags or None)

    def _native_loop(self, temperature: float, diag: bool):
        """The extension when a draft without diagnostics can take its Markov-head slot loop natively (greedy:
        ``markov_greedy``; sampled: ``markov_sample``, which draws from the same generator): the head's W₂ takes the
        kernel (its patched linear), so the native loop computes the same bits; else None."""
        if diag or self.head is None or self.head.kind != "markov":
            return None
        ext = getattr(self.vocab_product, "ext", None)
        loop = "markov_greedy" if temperature == 0 else "markov_sample"
        if ext is None or not hasattr(ext, loop) or "forward" not in self.head.W2.__dict__:
            return None
        W1, W2 = self.head.W1.weight, self.head.W2.weight
        ok = W1.dtype == W2.dtype and W1.dtype in fast.DTYPES and W1.device.type == "cpu" and W1.shape[1] % 8 == 0
        return ext if ok and W1.is_contiguous() and W2.is_contiguous() else None

    def _vocab_list(self) -> list[int]:
        """vocab_ids as a Python list (a list index per slot, not a tensor index and a sync), kept until the
        buffer changes."""
        key = (self.vocab_ids.data_ptr(), self.vocab_ids._version)
        kept = self.__dict__.get("_vocab_kept")
        if kept is None or kept[0] != key:
            kept = self.__dict__["_vocab_kept"] = (key, self.vocab_ids.tolist())
        return kept[1]
