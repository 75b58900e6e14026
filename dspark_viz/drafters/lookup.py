"""Prompt lookup: propose the continuation of the latest earlier match of the context's suffix.

Legend: γ block size, n n-gram length, V vocabulary.
The proposal is deterministic, so p_draft is one-hot at each drafted token and the lossless rule
holds unchanged (the target accepts x_k with probability p_target(x_k)).
"""
from __future__ import annotations

import torch

from ..protocol import Context, Draft, Drafter


class LookupIndex:
    """Incremental map from each n-gram (n ≤ max_n) to the position right after its latest use.

    Match statistics: before each token t is appended, the index predicts it from the longest
    matching n-gram (exactly what ``propose`` would draft first); ``hits[n] / trials[n]`` counts how
    often that prediction was t. On text sampled from the target this estimates the probability that
    the target accepts a lookup token drafted with an n-gram match, at the sampling temperature
    (a one-hot draft x is accepted with probability p_target(x) = P(sample = x)). The statistics are
    a function of the committed tokens only.
    """

    def __init__(self, max_n: int = 3, min_n: int = 1):
        self.max_n, self.min_n = max_n, min_n
        self.ids: list[int] = []
        self.last: dict[tuple[int, ...], int] = {}
        self.hits = [0] * (max_n + 1)                       # (max_n+1,) indexed by match length n
        self.trials = [0] * (max_n + 1)

    def extend(self, tokens: list[int]) -> None:
        ids, last = self.ids, self.last
        for t in tokens:
            j = len(ids)          # t sits at position j: every n-gram ending at j-1 is followed by it
            for n in range(min(self.max_n, j), self.min_n - 1, -1):           # longest match predicts t
                k = last.get(tuple(ids[j - n:j]))
                if k is not None:
                    self.trials[n] += 1
                    self.hits[n] += ids[k] == t
                    break
            for n in range(self.min_n, self.max_n + 1):
                if j >= n:
                    last[tuple(ids[j - n:j])] = j
            ids.append(t)

    def hit_rate(self, n: int, prior: float = 0.5, weight: float = 2.0) -> float:
        """(hits + weight·prior) / (trials + weight) for matches of length n (capped at max_n)."""
        n = min(max(n, self.min_n), self.max_n)
        return (self.hits[n] + weight * prior) / (self.trials[n] + weight)

    def propose(self, gamma: int) -> tuple[list[int], int]:
        """(up to γ tokens continuing the longest suffix match, the matched n; 0 if none)."""
        ids = self.ids
        for n in range(self.max_n, self.min_n - 1, -1):
            if len(ids) < n:
                continue
            j = self.last.get(tuple(ids[-n:]))
            if j is not None and j < len(ids):
                return ids[j:j + gamma], n
        return [], 0


class LookupDrafter(Drafter):
    name = "lookup"

    def __init__(self, gamma: int = 7, max_n: int = 3, min_n: int = 1, vocab_size: int | None = None):
        self.gamma, self.max_n, self.min_n, self.vocab_size = gamma, max_n, min_n, vocab_size

    def begin(self, ctx: Context) -> LookupIndex:
        idx = LookupIndex(self.max_n, self.min_n)
        idx.extend(list(ctx.prompt_ids))
        return idx

    def propose(self, state: LookupIndex, anchor, anchor_pos, temperature, generator) -> Draft:
        state.extend([anchor])                    # the anchor is committed: the context ends with it
        toks, n = state.propose(self.gamma)
        V = self.vocab_size or (max(state.ids + [anchor] + toks) + 1)
        p = torch.zeros(len(toks), V)
        if toks:
            p[torch.arange(len(toks)), torch.tensor(toks)] = 1.0           # (ℓ, V) one-hot
        return Draft(tokens=toks, p_draft=p, confidence=None,
                     diag=[{"ngram": n}] * len(toks) if toks else None, source="lookup")

    def skip(self, state: LookupIndex, anchor, anchor_pos) -> None:
        state.extend([anchor])                    # as in propose: the context ends with the anchor

    def commit(self, state: LookupIndex, tokens, features) -> None:
        state.extend(list(tokens)[1:])            # tokens[0] is the old anchor, added in propose
