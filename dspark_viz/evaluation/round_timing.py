"""The wall-clock of one speculative round's parts on this machine: a draft, a verify at each ℓ, a plain step.

Legend: γ block size, ℓ verified drafts (0 … γ), t_draft one proposal of γ drafts, t_verify(ℓ) one target
forward over the anchor and ℓ drafts (ℓ + 1 tokens), t_plain one plain decoding step (a one-token forward), ctx
the tokens already in the cache.

``measure_round_times(target, drafter)`` times each part as the decode loop runs it (decode.py): the drafter's
``propose`` after a ctx-token context; the verify forward with the layer features the drafter reads and, at
ℓ = 0, the last position's logits only; the plain step without features. One repeat times every part once, in
an order reversed every other repeat, so a slow spell of a shared machine lands on every part alike; the
first ``warmup`` repeats are dropped and each part reports its median.

``profile_round_times(sps, draft_share)``: the same record read off an SPS profile (cost.py), for a machine
this one is not (the synthetic GPU-like curve): t_verify(ℓ) = 1/SPS(ℓ + 1), t_plain = 1/SPS(1) and a draft
assumed to cost ``draft_share`` of a one-token step.

The arithmetic that turns these times into the speculation gain (paper Eq. 1) is ``speculation_gain``.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from ..cost import SPSProfile
from ..fast import tune
from ..protocol import Context

PROFILING_TEXT = "The quick brown fox jumps over the lazy dog. "      # the text serving.measure times over too


@dataclass
class RoundTimes:
    """Seconds per part of a round (medians), where they come from, and the raw samples behind them."""
    source: str                         # "measured" or "synthetic: <profile>"
    t_draft: float                      # one proposal of γ drafts
    t_verify: list[float]               # (γ + 1,) index ℓ: a forward over ℓ + 1 tokens
    t_plain: float                      # one plain decoding step (one token)
    samples: dict[str, list[float]] = field(default_factory=dict)   # part → seconds of each kept repeat
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        vals = [self.t_draft, self.t_plain, *self.t_verify]
        if not self.t_verify or any(not (v >= 0 and v < float("inf")) for v in vals) or self.t_plain <= 0:
            raise ValueError("round times must be finite, ≥ 0, with a verify time per ℓ and t_plain > 0")

    @property
    def gamma(self) -> int:
        return len(self.t_verify) - 1

    def t_round(self, ell: int) -> float:
        """Seconds of a round that drafts and verifies ℓ drafts: t_draft + t_verify(ℓ)."""
        return self.t_draft + self.t_verify[ell]

    def to_dict(self) -> dict[str, Any]:
        return dict(source=self.source, t_draft=self.t_draft, t_verify=list(self.t_verify), t_plain=self.t_plain,
                    samples={k: list(v) for k, v in self.samples.items()}, meta=dict(self.meta))


def _context_ids(target, text: str, n: int) -> list[int]:
    """``text`` encoded and repeated to exactly n token ids."""
    ids = list(target.encode(text))
    if not ids:
        raise ValueError("the timing text encodes to no tokens")
    return (ids * (n // len(ids) + 1))[:n]


def measure_round_times(target, drafter, *, ctx_len: int = 128, repeats: int = 9, warmup: int = 2,
                        temperature: float = 0.0, seed: int = 0, text: str = PROFILING_TEXT) -> RoundTimes:
    """Time a draft, the verify forward at every ℓ = 0 … γ and a plain step on ``target`` with ``drafter``
    (module docstring); medians over ``repeats`` after ``warmup`` untimed repeats."""
    if repeats < 1 or warmup < 0 or ctx_len < 2:
        raise ValueError(f"need repeats ≥ 1, warmup ≥ 0 and ctx_len ≥ 2, got {repeats}, {warmup}, {ctx_len}")
    gamma = int(drafter.gamma)
    need = ctx_len + gamma + 1
    if need >= target.max_context:
        raise ValueError(f"ctx_len + γ + 1 = {need} exceeds the target's context of {target.max_context} tokens")
    ids = _context_ids(target, text, need)                                      # the context, then γ + 1 new tokens
    feats = bool(drafter.needs_features)
    cache, out = target.prefill(ids[:ctx_len], features=feats, last_only=True)
    state = drafter.begin(Context(ids[:ctx_len], out.features[0] if feats else None))
    g = torch.Generator(device=str(target.device)).manual_seed(seed)
    anchor = ids[ctx_len]                                                 # x0: the token after the context

    def draft():
        drafter.propose(state, anchor, ctx_len, temperature, g)

    def forward(n: int, with_features: bool):
        def run():
            target.forward(torch.tensor([ids[ctx_len: ctx_len + n]]), cache, features=with_features,
                           last_only=n == 1)                              # (1, n) after ctx_len cached tokens
            target.crop(cache, ctx_len)
        return run

    parts = {"draft": draft, "plain": forward(1, False)}
    parts |= {f"verify{ell}": forward(ell + 1, feats) for ell in range(gamma + 1)}
    names = list(parts)
    samples: dict[str, list[float]] = {n: [] for n in names}
    sync = torch.cuda.synchronize if str(target.device).startswith("cuda") else (lambda: None)
    with torch.inference_mode():
        for rep in range(warmup + repeats):
            for name in (names if rep % 2 == 0 else names[::-1]):
                sync()
                t0 = time.perf_counter()
                parts[name]()
                sync()
                if rep >= warmup:
                    samples[name].append(time.perf_counter() - t0)
    med = {n: statistics.median(v) for n, v in samples.items()}
    cpu, flags = tune.cpu_model_and_flags()
    paths = getattr(target, "paths", None)
    return RoundTimes(
        "measured", med["draft"], [med[f"verify{ell}"] for ell in range(gamma + 1)], med["plain"], samples,
        meta=dict(ctx_len=ctx_len, repeats=repeats, warmup=warmup, temperature=temperature, gamma=gamma,
                  drafter=getattr(drafter, "name", "drafter"), target=getattr(target, "name", "target"),
                  dtype=str(target.dtype).replace("torch.", ""), device=str(target.device),
                  threads=torch.get_num_threads(), cpu=cpu, cpu_flags=flags,
                  paths=getattr(paths, "choice", None), matmul=getattr(paths, "matmul", None),
                  when=time.strftime("%Y-%m-%d %H:%M")))


def profile_round_times(sps: SPSProfile, gamma: int, draft_share: float) -> RoundTimes:
    """Round times read off an SPS profile: t_verify(ℓ) = 1/SPS(ℓ + 1), t_plain = 1/SPS(1), and a draft that costs
    ``draft_share`` × t_plain (an assumption the caller states; the profile has no drafter in it)."""
    if gamma < 1 or not draft_share >= 0:
        raise ValueError(f"need γ ≥ 1 and draft_share ≥ 0, got {gamma}, {draft_share}")
    t_plain = float(sps.step_time(1))
    return RoundTimes(f"synthetic: {sps.name}" if sps.device == "synthetic" else sps.name, draft_share * t_plain,
                      [float(sps.step_time(ell + 1)) for ell in range(gamma + 1)], t_plain,
                      meta=dict(profile=sps.name, device=sps.device, draft_share=draft_share, gamma=gamma))


__all__ = ["RoundTimes", "measure_round_times", "profile_round_times"]
