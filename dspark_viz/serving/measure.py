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


def batch_sizes(bmax: int, batches: Sequence[int] | None = None) -> list[int]:
    """The forward sizes a profile times: ``batches`` (default ``default_batches(bmax)``), sorted, each ≥ 1."""
    out = sorted(set(int(b) for b in (batches or default_batches(bmax))))
    if not out or out[0] < 1:
        raise ValueError("batches must be positive integers")
    return out


def round_robin(batches: list[int], warmup: int, repeats: int, device, forward, after=None) -> list[float]:
    """Median seconds of ``forward(B)`` per B, timed round-robin over B (a slow spell of a shared machine lands on
    every B alike instead of bending the curve), ``warmup`` untimed passes first; ``after(B)`` runs untimed after
    each call (a cache crop)."""
    times: dict[int, list[float]] = {b: [] for b in batches}
    for i in range(warmup + repeats):
        for b in batches:
            _sync(device)
            t0 = time.perf_counter()
            forward(b)
            _sync(device)
            if i >= warmup:
                times[b].append(time.perf_counter() - t0)
            if after is not None:
                after(b)
    return [statistics.median(times[b]) for b in batches]


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

    batches = batch_sizes(bmax, batches)
    need = ctx_len + batches[-1]
    max_ctx = getattr(target, "max_context", None)
    if isinstance(max_ctx, int) and need > max_ctx:
        raise ValueError(f"ctx_len + bmax = {need} exceeds the target's context of {max_ctx} tokens")
    ids = _profiling_ids(target, text, need)
    held = [target.new_cache()]                     # the cache (crop may return a new one)

    def forward(b):
        target.forward(torch.tensor([ids[ctx_len: ctx_len + b]], dtype=torch.long), held[0])    # (1, B)

    def crop(b):
        res = target.crop(held[0], ctx_len)
        held[0] = res if res is not None else held[0]

    with torch.inference_mode():
        target.forward(torch.tensor([ids[:ctx_len]], dtype=torch.long), held[0])   # prefill (1, ctx_len)
        med = round_robin(batches, warmup, repeats, getattr(target, "device", "cpu"), forward, after=crop)
    return _measured(target, batches, med, monotone, dict(ctx_len=ctx_len, repeats=repeats, warmup=warmup))


def _measured(target, batches: list[int], med: list[float], monotone: bool, meta: dict, name: str = "measured"
              ) -> SPSProfile:
    """The SPS table of median step times ``med`` (seconds, per B in ``batches``), with where and how it was taken."""
    import torch

    step = monotone_steps(batches, med) if monotone else np.asarray(med)  # (P,) seconds
    cpu, flags = tune.cpu_model_and_flags()
    return SPSProfile(f"{name}-{getattr(target, 'name', 'target')}", batches, (1.0 / step).tolist(),
                      device=str(getattr(target, "device", "cpu")),
                      meta=dict(meta, monotone=monotone, raw_sps=[1.0 / t for t in med], torch=torch.__version__,
                                when=time.strftime("%Y-%m-%d"), cpu=cpu, cpu_flags=flags,
                                threads=torch.get_num_threads(),
                                dtype=str(getattr(target, "dtype", "")).replace("torch.", ""),
                                paths=getattr(getattr(target, "paths", None), "choice", None)))


def engine_blocks(B: int, block: int) -> list[int]:
    """B verification rows as the live engine holds them: blocks of ``block`` rows (a request's anchor and γ
    drafts), the last one shorter. → the block lengths, one sequence each."""
    return [block] * (B // block) + ([B % block] if B % block else [])


def measure_engine_profile(target, bmax: int = 64, repeats: int = 5, ctx_len: int = 256, block: int = 8,
                           batches: Sequence[int] | None = None, warmup: int = 1, monotone: bool = True,
                           text: str = "The quick brown fox jumps over the lazy dog. ") -> SPSProfile:
    """Time the live engine's verification forward (serving/engine.py): B new rows as the blocks of
    ⌈B / block⌉ sequences (``engine_blocks``), each sequence over its own ctx_len-token cache, in one ragged call
    with the target features a drafter reads, exact where the engine is. → SPS(B): the cost curve Algorithm 1
    schedules the engine with on this machine (``measure_profile`` times one sequence's forward instead, which on
    a CPU leaves the fast path past 8 tokens)."""
    import torch

    from ..fast import ragged

    if not ragged.supports(target):
        raise ValueError(f"the live engine does not cover {getattr(target, 'name', 'this target')!r}")
    if block < 1:
        raise ValueError(f"block must be ≥ 1, got {block}")
    batches = batch_sizes(bmax, batches)
    max_ctx = getattr(target, "max_context", None)
    if isinstance(max_ctx, int) and ctx_len + block > max_ctx:
        raise ValueError(f"ctx_len + block = {ctx_len + block} exceeds the target's context of {max_ctx} tokens")
    ids = _profiling_ids(target, text, ctx_len + block)
    fwd = ragged.forward_for(target)
    slots = -(-batches[-1] // block)
    cache = fwd.cache(slots, ctx_len + block + 1)

    def forward(b):                                 # the rows only overwrite positions ctx_len…: no cache to crop
        lens = engine_blocks(b, block)
        tok = torch.tensor([ids[ctx_len + k] for n in lens for k in range(n)])                  # (B,)
        slot = torch.cat([torch.full((n,), s) for s, n in enumerate(lens)])
        pos = torch.cat([torch.arange(ctx_len, ctx_len + n) for n in lens])
        fwd(cache, tok, slot, pos, torch.arange(b), features=target.feature_layers, exact=fwd.can_exact)

    with torch.inference_mode():
        if fwd.can_exact:                           # the engine's own prefill: the target's, adopted per slot
            prompt, _ = target.prefill(ids[:ctx_len], last_only=True)
            for s in range(slots):
                cache.adopt(s, prompt.layers)
        else:
            fwd(cache, torch.tensor(ids[:ctx_len] * slots), torch.arange(slots).repeat_interleave(ctx_len),
                torch.arange(ctx_len).repeat(slots), torch.tensor([ctx_len - 1]))
        med = round_robin(batches, warmup, repeats, target.device, forward)
    return _measured(target, batches, med, monotone,
                     dict(ctx_len=ctx_len, repeats=repeats, warmup=warmup, forward="engine", block=block,
                          exact=bool(fwd.can_exact)), name="engine")


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
