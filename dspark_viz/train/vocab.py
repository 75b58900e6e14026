"""The draft vocabulary V_d: which target tokens a drafter can propose, and moving a drafter's
vocabulary-indexed rows when V_d changes.

Legend: V_d draft vocabulary size, r sequential-head rank.
"""
from __future__ import annotations

from collections import Counter

import torch


def build_draft_vocab(seqs: list[dict], size: int, must: set[int] | frozenset[int] = frozenset(),
                      vocab_size: int | None = None) -> torch.Tensor:
    """The `size` most frequent response tokens (plus stop ids), sorted → (V_d,). When the data holds
    fewer distinct tokens, the rest is filled with the smallest unused ids below ``vocab_size`` (a BPE
    vocabulary numbers its merges roughly by corpus frequency)."""
    cnt = Counter()
    for s in seqs:
        cnt.update(s["ids"][s["prompt_len"]:].tolist())
    keep = list(must) + [t for t, _ in cnt.most_common(size + len(must)) if t not in must]
    keep = keep[:size]
    if vocab_size and len(keep) < size:
        have = set(keep)
        keep += [i for i in range(vocab_size) if i not in have][: size - len(keep)]
    return torch.tensor(sorted(keep))


def remap_vocab(state: dict, old_ids: torch.Tensor, new_ids: torch.Tensor, fresh: dict) -> dict:
    """Move vocabulary-indexed rows (the sequential head's W1 (V_d+1, r) and W2 (V_d, r)) from an old
    draft vocabulary to a new one; tokens new to the vocabulary keep their fresh initialisation, the
    backbone (vocabulary-free) is copied as is."""
    pos = {int(t): i for i, t in enumerate(old_ids.tolist())}
    src = torch.tensor([pos.get(int(t), -1) for t in new_ids.tolist()])                  # (V_d_new,)
    have = src >= 0
    out = {}
    for k, v in fresh.items():
        if k == "vocab_ids":
            out[k] = new_ids.clone()
        elif k not in state:
            out[k] = v
        elif k.endswith(("W1.weight", "W2.weight")) and state[k].shape[0] in (old_ids.numel(), old_ids.numel() + 1):
            w = v.clone()
            w[: new_ids.numel()][have] = state[k][src[have]].to(w.dtype)
            if k.endswith("W1.weight"):                                                  # last row: outside V_d
                w[-1] = state[k][-1]
            out[k] = w
        else:
            out[k] = state[k]
    return out
