"""Measuring this machine: a target's SPS table and the shipped drafters' round times.

Legend: B tokens per forward, SPS(B) steps per second. Timing is round-robin over B, so a slow spell
of a shared machine spreads over every size instead of denting one.
"""
from __future__ import annotations

import statistics
import time
from typing import Sequence

import numpy as np

from ..cost import SPSProfile
from ..drafters import load_drafter, speed_only
from ..fast import tune
from ..protocol import Context


# -- measurement -------------------------------------------------------------------------------
def default_batches(bmax: int) -> list[int]:
    """1..8 every size, then 12, 16, 24, 32, 48, 64, 96, … (×1.5 / ×4/3 alternately) up to bmax."""
    out, b = list(range(1, min(8, bmax) + 1)), 8
    while b < bmax:
        b = b * 3 // 2 if (b & (b - 1)) == 0 else b * 4 // 3
        out.append(min(b, bmax))
    return sorted(set(out))


def _sync(device) -> None:
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()


def monotone_steps(batches: Sequence[int], seconds: Sequence[float]) -> np.ndarray:
    """Step times made non-decreasing in B by a running max — from B = 2 on when the curve starts at B = 1,
    which keeps its own time: on CPU one-token forwards take torch's stock path while 2–8-token ones take
    the few-row kernel and lean layers, so in bf16 one token really costs more than two (cpu-bf16.json),
    and a running max from B = 1 would flatten 1–7 tokens to one cost and send the scheduler to ℓ ≈ γ."""
    t = np.asarray(seconds, dtype=float)                                  # (P,)
    if len(t) >= 2 and int(batches[0]) == 1:
        return np.concatenate([t[:1], np.maximum.accumulate(t[1:])])
    return np.maximum.accumulate(t)


def _profiling_ids(target, text: str, n: int) -> list[int]:
    """``text`` encoded and repeated to exactly n token ids (the context the timings run over)."""
    ids = list(target.encode(text))
    if not ids:
        raise ValueError("the profiling text encodes to no tokens")
    return (ids * (n // len(ids) + 1))[:n]


def measure_profile(target, bmax: int = 64, repeats: int = 5, ctx_len: int = 256,
                    batches: Sequence[int] | None = None, warmup: int = 1, monotone: bool = True,
                    text: str = "The quick brown fox jumps over the lazy dog. ") -> SPSProfile:
    """Time the target's verify forward: median seconds for B new tokens over a ctx_len-token cache.

    Uses only target.encode(text), target.new_cache(), target.forward(ids (1, n), cache) and
    target.crop(cache, length) (in place, or returning the cropped cache). monotone=True makes the step
    time non-decreasing in B (running max, from B = 2 on: see monotone_steps; timing noise on a busy machine
    otherwise creates fake cliffs the scheduler would chase); the raw medians are kept in meta["raw_sps"].
    """
    import torch

    batches = sorted(set(int(b) for b in (batches or default_batches(bmax))))
    if not batches or batches[0] < 1:
        raise ValueError("batches must be positive integers")
    need = ctx_len + batches[-1]
    max_ctx = getattr(target, "max_context", None)
    if isinstance(max_ctx, int) and need > max_ctx:
        raise ValueError(f"ctx_len + bmax = {need} exceeds the target's context of {max_ctx} tokens")
    ids = _profiling_ids(target, text, need)
    device = getattr(target, "device", "cpu")
    cache = target.new_cache()
    with torch.inference_mode():
        target.forward(torch.tensor([ids[:ctx_len]], dtype=torch.long), cache)   # prefill (1, ctx_len)
        times: dict[int, list[float]] = {b: [] for b in batches}
        for i in range(warmup + repeats):           # round-robin over B: a slow spell of a shared machine
            for b in batches:                       # lands on every B alike instead of bending the curve
                block = torch.tensor([ids[ctx_len: ctx_len + b]], dtype=torch.long)    # (1, B)
                _sync(device)
                t0 = time.perf_counter()
                target.forward(block, cache)
                _sync(device)
                if i >= warmup:
                    times[b].append(time.perf_counter() - t0)
                res = target.crop(cache, ctx_len)
                cache = res if res is not None else cache
        med = [statistics.median(times[b]) for b in batches]
    step = monotone_steps(batches, med) if monotone else np.asarray(med)  # (P,) seconds
    return SPSProfile(f"measured-{getattr(target, 'name', 'target')}", batches, (1.0 / step).tolist(),
                      device=str(device), meta=dict(ctx_len=ctx_len, repeats=repeats, warmup=warmup,
                                                    monotone=monotone, raw_sps=[1.0 / t for t in med],
                                                    torch=torch.__version__, when=time.strftime("%Y-%m-%d"),
                                                    cpu=tune.cpu_model_and_flags()[0],
                                                    cpu_flags=tune.cpu_model_and_flags()[1],
                                                    threads=torch.get_num_threads(),
                                                    dtype=str(getattr(target, "dtype", "")).replace("torch.", ""),
                                                    paths=getattr(getattr(target, "paths", None), "choice", None)))


def measure_draft_costs(target, names: Sequence[str], repeats: int = 9, ctx_len: int = 256,
                        text: str = "The quick brown fox jumps over the lazy dog. ") -> dict[str, float]:
    """Median seconds of one drafted round's drafter work after a ctx_len-token context, per drafter name: a
    proposal (γ drafts at T = 1, chart diagnostics off), then the commit of its anchor and one accepted draft
    (two positions, about a round's τ here) with the context extension that follows it (``catch_up``). A name
    that does not load for this target is left out. The hybrid drafter prices its neural rounds with these
    (drafters/hybrid.py), so they are part of the hardware profile, like SPS(B)."""
    import torch


    if ctx_len < 2 * (1 + repeats) + 8:
        raise ValueError(f"ctx_len {ctx_len} is too short for {repeats} timed rounds (two positions each)")
    ids = _profiling_ids(target, text, ctx_len)
    device = getattr(target, "device", "cpu")
    _, out = target.prefill(ids, features=True, last_only=True)       # features of every position; one logit row
    feats = out.features[0] if out.features is not None else None                # (n, m·d)
    n0 = len(ids) - 2 * (1 + repeats)                      # the context grows two positions a round
    out_s: dict[str, float] = {}
    for name in names:
        try:
            d = speed_only(load_drafter(name, target))
        except (ValueError, FileNotFoundError, OSError):
            continue
        st = d.begin(Context(ids[:n0], feats[:n0] if feats is not None else None))
        g = torch.Generator().manual_seed(0)
        times = []
        for i in range(1 + repeats):                      # the first round warms up
            pos = n0 + 2 * i
            _sync(device)
            t0 = time.perf_counter()
            draft = d.propose(st, ids[pos], pos, 1.0, g)
            d.commit(st, [ids[pos]] + list(draft.tokens[:1]), feats[pos:pos + 2] if feats is not None else None)
            d.catch_up(st)
            _sync(device)
            if i:
                times.append(time.perf_counter() - t0)
        out_s[name] = statistics.median(times)
    return out_s
