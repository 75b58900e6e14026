"""Sequential heads (Markov, RNN) and the confidence head (paper eqs. 5–7).

Legend: V_d draft vocabulary (+1 row in W1 for tokens outside it), r rank, d hidden size,
N rows (blocks or batch), γ block size.

Markov   B(x_{k−1}, ·) = W1[x_{k−1}] W2                                  (5)
RNN      z = [s_{k−1}; W1[x_{k−1}]; h_k]; g, c, o = split(Linear(z))
         s_k = σ(g)⊙s_{k−1} + (1−σ(g))⊙tanh(c);  B_k = tanh(o) W2          (6)
Conf.    c_k = σ(wᵀ[h_k; W1[x_{k−1}]] + b)                                (7)
The bias is added to the raw backbone logits U_k before any temperature.
"""
from __future__ import annotations

import torch
import torch.nn as nn


class MarkovHead(nn.Module):
    kind = "markov"

    def __init__(self, n_in: int, vd: int, r: int, d: int):
        super().__init__()
        self.W1 = nn.Embedding(n_in, r)                  # (V_d+1, r) previous-token embedding
        self.W2 = nn.Linear(r, vd, bias=False)           # (r → V_d) logit projection
        nn.init.normal_(self.W1.weight, std=0.02)
        nn.init.zeros_(self.W2.weight)                   # starts as the plain parallel drafter

    def init_state(self, N: int, device=None):
        return None

    def step(self, prev, h, state):
        """prev (N,) draft-vocab indices, h (N, d) → bias (N, V_d), new state, e (N, r)."""
        e = self.W1(prev)
        return self.W2(e), state, e


class RNNHead(nn.Module):
    kind = "rnn"

    def __init__(self, n_in: int, vd: int, r: int, d: int):
        super().__init__()
        self.r = r
        self.W1 = nn.Embedding(n_in, r)
        self.gate = nn.Linear(2 * r + d, 3 * r)          # one projection split into g, c, o
        self.W2 = nn.Linear(r, vd, bias=False)
        nn.init.normal_(self.W1.weight, std=0.02)
        nn.init.zeros_(self.W2.weight)

    def init_state(self, N: int, device=None):
        return torch.zeros(N, self.r, device=device)

    def step(self, prev, h, state):
        e = self.W1(prev)                                                   # (N, r)
        g, c, o = self.gate(torch.cat([state.to(e.dtype), e, h.to(e.dtype)], -1)).chunk(3, -1)
        sg = torch.sigmoid(g)
        state = sg * state + (1 - sg) * torch.tanh(c)                       # (N, r)
        return self.W2(torch.tanh(o)), state, e


class ConfidenceHead(nn.Module):
    def __init__(self, d: int, r: int):
        super().__init__()
        self.lin = nn.Linear(d + r, 1)

    def forward(self, h, e):
        """h (N, d), e (N, r) → logit of c_k (N,)."""
        return self.lin(torch.cat([h, e.to(h.dtype)], -1)).squeeze(-1)


def make_head(kind: str | None, n_in: int, vd: int, r: int, d: int):
    if kind in (None, "none"):
        return None
    if kind == "markov":
        return MarkovHead(n_in, vd, r, d)
    if kind == "rnn":
        return RNNHead(n_in, vd, r, d)
    raise ValueError(f"unknown sequential head {kind!r}: markov, rnn or none")
