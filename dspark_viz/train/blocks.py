"""What a training block is made of: its labels and their targets, and the drafter's hidden states over it.

Legend: n sequence length, N anchors (blocks) per sequence, γ block size, d hidden size, V_d draft vocabulary,
U distinct label positions, T = n − 1 context positions.

Block slot k after anchor p predicts x_{p+k} with the teacher-forced previous token x_{p+k−1}; its target
distribution p_target comes from the cached final-norm hidden state at position p+k−1 (exp(h·W_vdᵀ − lse) on the
draft vocabulary). DSpark and DFlash run the parallel backbone over every block at once; EAGLE unrolls its γ
draft steps exactly as at inference (training-time test). ``trainer.forward_blocks`` puts these together.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .losses import valid_prefix


def label_parts(model, s, anchors, gamma):
    """Labels of one sequence's blocks: draft-vocab labels (N, γ) (−1 outside V_d), teacher-forced previous
    tokens (N, γ), the position whose cached hidden state and lse give the target's distribution for each
    label (N, γ), mask (N, γ)."""
    n = s["n"]
    lab_pos = anchors[:, None] + torch.arange(1, gamma + 1, device=anchors.device)      # (N, γ)
    valid = lab_pos <= n - 1
    lp = lab_pos.clamp(max=n - 1)
    ids = s["ids"]
    vd = model.vocab_ids.numel()
    lab = model.full2draft[ids[lp]]
    lab = torch.where(lab == vd, torch.full_like(lab, -1), lab)                          # −1: outside V_d
    prev = model.full2draft[ids[lp - 1]]                                                  # teacher-forced x_{k−1}
    return lab, prev, lp - 1, valid_prefix(valid)


def target_row_parts(seqs: list[dict], src: list[torch.Tensor], W: torch.Tensor):
    """p_target restricted to V_d for the labels of each sequence's blocks, as distinct rows: src[i] (N_i, γ)
    positions of sequence i → (p rows (U, V_d), row_of (ΣN_i, γ)). Blocks overlap, so each distinct position's
    row exp(h·W_vdᵀ − lse) is computed once (exact: the same row whichever block asks)."""
    hs, ls, inv, off = [], [], [], 0
    for s, pos in zip(seqs, src):
        u, iv = torch.unique(pos, return_inverse=True)                                   # (U_i,), (N_i, γ)
        hs.append(s["hidden"][u].float())          # fp16 in the cache; autocast's cat refuses fp16 on CPU
        ls.append(s["lse"][u].float())
        inv.append(iv + off)
        off += u.numel()
    h_u, lse_u = torch.cat(hs).to(W.device), torch.cat(ls).to(W.device)                # (U, d), (U,)
    with torch.no_grad():
        p_u = torch.exp(F.linear(h_u.to(W.dtype), W).float() - lse_u[:, None])           # (U, V_d)
    return p_u, torch.cat(inv).to(W.device)


def dspark_hidden(model, s: dict, anchors: torch.Tensor) -> torch.Tensor:
    """The parallel backbone over one sequence's blocks → h (N, γ, d)."""
    bb, g = model.backbone, model.cfg.gamma
    N, ctx_n = anchors.shape[0], int(anchors.max())
    ctx_kv = bb.context_kv(bb.fuse(s["feats"][:ctx_n].float()))                       # positions 0 …
    x = bb.block_input(s["ids"][anchors], g, model.embed)                               # (N·γ, d)
    pos = (anchors[:, None] + torch.arange(g, device=anchors.device)).reshape(-1)
    a_rep = anchors.repeat_interleave(g)                                                 # context < anchor,
    return bb(x, pos, ctx_kv, None, blocks=(a_rep, g)).view(N, g, -1)                    # own block: (N, γ, d)


def dspark_hidden_batched(model, seqs: list[dict], anchors: list[torch.Tensor]) -> list[torch.Tensor]:
    """``dspark_hidden`` of B sequences in one pass of the backbone (the accelerator's training step: one call for
    every sequence's context and blocks, not one per sequence) → h (N_i, γ, d) per sequence. Contexts are padded
    to the longest and blocks to the most per sequence (a copy of the last anchor); no row sees a padded context
    position (each sees positions before its anchor) and padded blocks are dropped."""
    bb, g = model.backbone, model.cfg.gamma
    dev = anchors[0].device
    counts = [int(a.shape[0]) for a in anchors]
    N, B = max(counts), len(seqs)
    ctx = [int(a.max()) for a in anchors]
    n = max(ctx)
    m_d = seqs[0]["feats"].shape[-1]
    feats = torch.zeros(B, n, m_d, device=dev, dtype=seqs[0]["feats"].dtype)
    anc = torch.empty(B, N, dtype=torch.long, device=dev)
    tok = torch.empty(B, N, dtype=torch.long, device=dev)
    for i, (s, a) in enumerate(zip(seqs, anchors)):
        feats[i, :ctx[i]] = s["feats"][:ctx[i]]
        a_pad = torch.cat([a, a[-1:].expand(N - counts[i])])
        anc[i], tok[i] = a_pad, s["ids"][a_pad]
    ctx_kv = bb.context_kv(bb.fuse(feats.float()))                                     # per layer (B, Hk, n, Dh)
    x = bb.block_input(tok.reshape(-1), g, model.embed).view(B, N * g, -1)             # (B, N·γ, d)
    pos = (anc[:, :, None] + torch.arange(g, device=dev)).reshape(B, N * g)            # (B, N·γ)
    a_rep = anc.repeat_interleave(g, dim=1)                                             # (B, N·γ)
    h = bb(x, pos, ctx_kv, None, blocks=(a_rep, g)).view(B, N, g, -1)                  # (B, N, γ, d)
    return [h[i, :c] for i, c in enumerate(counts)]


def eagle_hidden(model, s: dict, anchors: torch.Tensor) -> torch.Tensor:
    """Training-time test: unroll the γ draft steps exactly as at inference → h (N, γ, d)."""
    g, n = model.cfg.gamma, s["n"]
    ids = s["ids"]
    F_ = model.fuse(s["feats"][: n - 1].float())                                         # (n−1, d)
    x = model.step_input(F_, ids[1:n])                                                   # entry j: (f_j, x_{j+1})
    T = n - 1
    Hk, Dh = model.cfg.n_kv_heads, model.cfg.head_dim
    dev = anchors.device
    empty = torch.zeros(Hk, 0, Dh, device=dev)
    causal = torch.ones(T, T, dtype=torch.bool, device=dev).tril()
    g_ctx, Kc, Vc = model.run(x, torch.arange(T, device=dev), empty, empty, causal)
    N = anchors.shape[0]
    outs = [g_ctx[anchors - 1]]                                                          # step 1 (N, d)
    Kb, Vb = [], []
    for t in range(2, g + 1):
        tok = ids[(anchors + t - 1).clamp(max=n - 1)]
        xin = model.step_input(outs[-1], tok)                                            # (N, d)
        pos = anchors + t - 2
        k_prev = torch.cat([Kc] + Kb, 1)
        v_prev = torch.cat([Vc] + Vb, 1)
        ctx_ok = torch.arange(T, device=dev)[None, :] <= (anchors - 1)[:, None]           # (N, T)
        blk = torch.arange(N, device=dev)
        prev_ok = [blk[:, None] == blk[None, :]] * len(Kb)                               # earlier steps, same block
        own = torch.eye(N, dtype=torch.bool, device=dev)
        mask = torch.cat([ctx_ok] + prev_ok + [own], 1)
        o, k, v = model.run(xin, pos, k_prev, v_prev, mask)
        outs.append(o)
        Kb.append(k)
        Vb.append(v)
    return torch.stack(outs, 1)                                                          # (N, γ, d)


__all__ = ["dspark_hidden", "dspark_hidden_batched", "eagle_hidden", "label_parts", "target_row_parts"]
