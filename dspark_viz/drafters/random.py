"""A random drafter with a non-trivial p_draft, for tests and teaching.

Legend: γ block size, V vocabulary, r rank of the random transition table.
p_draft(x_k | x_{k-1}) = softmax((E F)[x_{k-1}] / T) with fixed random E (V, r), F (r, V); the
confidence c_k = σ(b[x_{k-1}]) depends only on the previous token, as a real head's does.
"""
from __future__ import annotations

import torch

from ..protocol import Draft, Drafter
from ..sampling import probs_from_logits, sample


class RandomDrafter(Drafter):
    name = "random"
    has_confidence = True

    def __init__(self, vocab_size: int, gamma: int = 4, seed: int = 0, rank: int = 8, scale: float = 2.0,
                 table: torch.Tensor | None = None):
        g = torch.Generator().manual_seed(seed)
        self.gamma, self.vocab_size = gamma, vocab_size
        self.E = torch.randn(vocab_size, rank, generator=g) * scale / rank ** 0.5     # (V, r)
        self.F = torch.randn(rank, vocab_size, generator=g)                           # (r, V)
        self.b = torch.randn(vocab_size, generator=g)                                 # (V,)
        self.table = table                                   # optional explicit (V, V) p_draft table

    def dist(self, prev: int, temperature: float) -> torch.Tensor:
        """(V,) exact draft distribution after token `prev`."""
        if self.table is not None:
            p = self.table[prev].float()
            if temperature == 0:
                return probs_from_logits(p.log(), 0)
            return p
        return probs_from_logits(self.E[prev] @ self.F, temperature)

    def confidence_after(self, prev: int) -> float:
        return float(torch.sigmoid(self.b[prev]))

    def propose(self, state, anchor, anchor_pos, temperature, generator) -> Draft:
        toks, rows, conf, prev = [], [], [], anchor
        for _ in range(self.gamma):
            p = self.dist(prev, temperature)
            conf.append(self.confidence_after(prev))
            prev = sample(p, generator)
            toks.append(prev)
            rows.append(p)
        return Draft(tokens=toks, p_draft=torch.stack(rows), confidence=conf, source="random")
