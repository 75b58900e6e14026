"""DSpark + lookup: two proposal sources, one chosen per round by expected tokens per second.

Legend: γ block size, ℓ verified length, a_k prefix survival, c_k conditional acceptance,
n n-gram match length, SPS(B) target steps/s at B tokens per forward, t_d draft time.

Each round, *before any draft token is sampled*, the drafter compares three options
    lookup  a_k = Π_{i≤k} h(min(n + i − 1, n_max))    h(n): the index's hit rate for n-gram matches
    neural  a_k = ρ^k                                 ρ from the drafter's validation τ (card);
                                                      t_d its round's drafting time (proposal + context
                                                      extension), measured with the profile
    none    no draft at all: a plain target step, 1/SPS(1) tokens per second
and keeps the one with the most expected committed tokens per second,
    value = max_ℓ (1 + Σ_{k≤ℓ} a_k) / (t_d + 1/SPS(1 + ℓ)).
"none" matters where verifying is dear (an SPS profile where 2 tokens cost well over one): a weak neural draft then
costs more than it brings, and skipping it is plain decoding for that round.
Both estimates are functions of the committed tokens only (plus constants), so the choice is
non-anticipating: given the choice, the lookup tokens are a deterministic function of the past
(one-hot p_draft) and the neural tokens are sampled from their own p_draft, and verification of either
is exact. The round's verified length is then chosen by the decode loop's policy on the chosen
source's confidences (for lookup: the hit-rate survivals above, already calibrated).

Beyond the paper: its confidence machinery (survival estimates + the SPS profile) is reused to arbitrate
between a free proposal (lookup) and a paid one (the neural draft).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..protocol import Context, Draft, Drafter
from .lookup import LookupIndex


def rho_from_tau(tau: float, gamma: int) -> float:
    """ρ with Σ_{k=1..γ} ρ^k = τ − 1 (bisection; τ clipped to [1, 1 + γ])."""
    target = min(max(float(tau) - 1.0, 0.0), gamma - 1e-9)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid ** k for k in range(1, gamma + 1)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def best_rate(surv, sps, draft_s: float) -> tuple[int, float]:
    """max over ℓ of (1 + Σ_{k≤ℓ} a_k) / (draft_s + 1/SPS(1+ℓ)) → (ℓ, tokens/s)."""
    a = np.concatenate([[0.0], np.cumsum(np.asarray(surv, dtype=float))])          # (γ+1,)
    ells = np.arange(len(a))
    rate = (1.0 + a) / (draft_s + np.asarray(sps.step_time(1 + ells), dtype=float))
    i = int(np.argmax(rate))
    return i, float(rate[i])


@dataclass
class Choice:
    source: str                 # lookup | neural | none (no draft: a plain target step)
    lookup_tokens: list[int]    # (≤ γ_L,) the lookup proposal (may be unused)
    lookup_conf: list[float]    # (≤ γ_L,) conditional acceptance estimates c_k for those tokens
    rate_lookup: float          # expected tokens/s with the lookup proposal (0 when it has none)
    rate_neural: float          # expected tokens/s with the neural proposal
    rate_plain: float           # tokens/s of a plain target step
    ngram: int                  # matched n (0: no match)


class HybridDrafter(Drafter):
    """A neural drafter plus n-gram prompt lookup, arbitrated per round (see the module docstring)."""

    def __init__(self, neural: Drafter, sps, *, lookup_gamma: int | None = None, max_n: int = 3, min_n: int = 1,
                 neural_tau: float | None = None, neural_draft_s: float | None = None, lookup_draft_s: float = 0.0,
                 prior: float = 0.5, prior_weight: float = 2.0, vocab_size: int | None = None):
        self.neural, self.sps = neural, sps
        self.gamma = max(neural.gamma, lookup_gamma or neural.gamma)
        self.lookup_gamma = lookup_gamma or neural.gamma
        self.max_n, self.min_n, self.prior, self.prior_weight = max_n, min_n, prior, prior_weight
        self.name = f"{neural.name}+lookup"
        self.needs_features = neural.needs_features
        self.has_confidence = True
        self.calibration = None                       # each Draft carries its own calibrated confidences
        card_tau = ((getattr(neural, "card", None) or {}).get("val") or {}).get("tau_est")
        self.neural_tau = float(neural_tau if neural_tau is not None else card_tau if card_tau else 1.0)
        self.rho = rho_from_tau(self.neural_tau, neural.gamma)
        # the neural draft's cost in seconds: given, else measured with the profile (`dspark-viz profile` times
        # each shipped drafter's round, proposal and context extension, into meta["draft_s"]), else a quarter of
        # a one-token step
        measured = ((getattr(sps, "meta", None) or {}).get("draft_s") or {}).get(getattr(neural, "name", None))
        self.neural_draft_s = float(neural_draft_s if neural_draft_s is not None
                                    else measured if measured is not None else 0.25 * sps.step_time(1))
        self.lookup_draft_s = float(lookup_draft_s)
        # constants of the choice (the neural estimate and the plain step do not change between rounds)
        self.rate_neural = best_rate([self.rho ** k for k in range(1, neural.gamma + 1)], sps, self.neural_draft_s)[1]
        self.rate_plain = 1.0 / float(sps.step_time(1))
        self.vocab_size = vocab_size or getattr(neural, "vocab_size", None)

    # -- state ------------------------------------------------------------------------------------
    def begin(self, ctx: Context) -> dict:
        idx = LookupIndex(self.max_n, self.min_n)
        idx.extend(list(ctx.prompt_ids))
        return {"neural": self.neural.begin(ctx), "lookup": idx}

    def quiet(self, state) -> None:
        """The neural drafter's chart diagnostics off for this request (NeuralDrafter.quiet)."""
        self.neural.quiet(state["neural"])

    def skip(self, state, anchor, anchor_pos) -> None:
        state["lookup"].extend([anchor])              # as in propose; the neural state learns it in commit

    def commit(self, state, tokens, features) -> None:
        self.neural.commit(state["neural"], tokens, features)
        state["lookup"].extend(list(tokens)[1:])     # tokens[0] is the old anchor, added in propose

    # -- the per-round choice (pure function of the committed tokens) ------------------------------
    def choose(self, idx: LookupIndex) -> Choice:
        toks, n = idx.propose(self.lookup_gamma)
        conf = [idx.hit_rate(n + i, self.prior, self.prior_weight) for i in range(len(toks))] if toks else []
        r_n, r_p = self.rate_neural, self.rate_plain
        r_l = best_rate(np.cumprod(conf), self.sps, self.lookup_draft_s)[1] if toks else 0.0
        best = max(r_l, r_n, r_p)
        source = "lookup" if toks and r_l == best else "neural" if r_n == best else "none"
        return Choice(source, toks, conf, r_l, r_n, r_p, n)

    def propose(self, state, anchor, anchor_pos, temperature, generator) -> Draft:
        idx = state["lookup"]
        idx.extend([anchor])                          # the anchor is committed: the lookup context ends with it
        ch = self.choose(idx)
        info = {"choice": ch.source, "rate_lookup": ch.rate_lookup, "rate_neural": ch.rate_neural,
                "rate_plain": ch.rate_plain, "ngram": ch.ngram}
        if ch.source == "none":
            return Draft(tokens=[], p_draft=torch.zeros(0, self.vocab_size or 1), confidence=[], calibrated=[],
                         source="none")
        if ch.source == "lookup":
            V = self.vocab_size or (max(idx.ids + ch.lookup_tokens) + 1)
            p = torch.zeros(len(ch.lookup_tokens), V)
            p[torch.arange(len(ch.lookup_tokens)), torch.tensor(ch.lookup_tokens)] = 1.0   # (ℓ, V) one-hot
            return Draft(tokens=ch.lookup_tokens, p_draft=p, confidence=list(ch.lookup_conf),
                         calibrated=list(ch.lookup_conf), diag=[dict(info)] * len(ch.lookup_tokens),
                         source="lookup")
        d = self.neural.propose(state["neural"], anchor, anchor_pos, temperature, generator)
        cal = getattr(self.neural, "calibration", None)
        d.calibrated = cal.apply(d.confidence) if (cal is not None and d.confidence is not None) else None
        if d.confidence is None:                      # a neural drafter without a head: its prior survival
            d.confidence = [self.rho] * len(d.tokens)
            d.calibrated = list(d.confidence)
        d.diag = [dict(x or {}, **info) for x in (d.diag or [None] * len(d.tokens))]
        return d

    # -- exact enumeration hook ---------------------------------------------------------------------
    def round_plan(self, prompt_ids: list[int], committed: list[int]):
        """For tests/exact.py: the round after ``prompt_ids + committed`` (committed[-1] = anchor)
        → (source, lookup tokens, lookup confidences). Same code path as ``propose``."""
        idx = LookupIndex(self.max_n, self.min_n)
        idx.extend(list(prompt_ids) + list(committed))
        ch = self.choose(idx)
        return ch.source, ch.lookup_tokens, ch.lookup_conf


__all__ = ["HybridDrafter", "Choice", "best_rate", "rho_from_tau"]
