"""This machine's CPU dtype: the one whose speculative decode ran faster here, measured once and kept.

Legend: T temperature, tok/s committed tokens per second of one request.

``choose_default_dtype()`` loads the target at fp32 and at bf16 (each choosing its own per-size paths,
fast/tune.py), decodes the same short prompts with the shipped DSpark drafter and the hardware-aware
scheduler at T = 0 on both, interleaved, and keeps the faster dtype in this machine's choice file, where
``load_target`` reads it (model/dtypes.py). ``dtype_for`` is what the command line and the app ask before they
load a target: on a CPU with no dtype given, the choice (made now if never made, once per machine fingerprint).
``DSPARK_TUNE=0`` skips every measurement.
"""
from __future__ import annotations

import statistics
import sys
import time

from ..datasets.prompts import load_prompts
from ..decode import speculative_generate
from ..drafters import load_drafter, speed_only
from ..fast import tune
from ..model import target as model_target
from ..cost import profile_for
from ..scheduler import HardwareAware
from ..settings import assets

DTYPES = ("float32", "bfloat16")


def _prompts(n_per_domain: int = 1) -> list[str]:
    recs, seen, out = load_prompts(assets("prompts", "eval.jsonl")), {}, []
    for r in recs:
        d = r.get("domain", "mixed")
        if seen.get(d, 0) < n_per_domain:
            out.append(r["turns"][0])
            seen[d] = seen.get(d, 0) + 1
    return out


def time_decodes(targets: dict, prompts: list[str], max_new_tokens: int = 48,
                 repeats: int = 2) -> tuple[dict[str, float], bool]:
    """Median tok/s of DSpark + HardwareAware decodes per target, the dtypes interleaved prompt by prompt, and
    whether every repeat ranked the targets the same way."""
    drafters = {k: speed_only(load_drafter("dspark", t)) for k, t in targets.items()}   # no chart diagnostics
    speed: dict[str, list[float]] = {k: [] for k in targets}
    per_rep: list[dict[str, float]] = []
    for rep in range(repeats + 1):                                   # the first pass warms up
        secs = {k: 0.0 for k in targets}
        toks = {k: 0 for k in targets}
        for i, p in enumerate(prompts):
            order = list(targets) if (i + rep) % 2 == 0 else list(reversed(targets))
            for k in order:
                t = targets[k]
                t0 = time.perf_counter()
                tr = speculative_generate(t, drafters[k], p, policy=HardwareAware(), sps=profile_for(t),
                                          max_new_tokens=max_new_tokens, temperature=0.0)
                dt = max(time.perf_counter() - t0, 1e-9)
                if rep:
                    speed[k].append(tr.n_generated / dt)
                    secs[k] += dt
                    toks[k] += tr.n_generated
        if rep:
            per_rep.append({k: toks[k] / secs[k] for k in targets})
    winners = {max(r, key=r.get) for r in per_rep}
    return {k: statistics.median(v) for k, v in speed.items()}, len(winners) == 1


def choose_default_dtype(force: bool = False, log=None, target: str | None = None) -> str:
    """The default CPU dtype ("float32" / "bfloat16") for ``target`` (a path; None: the embedded model).

    For the embedded target: kept, or measured now (with the shipped drafter) and kept. A measurement made while
    another process held a core, or whose repeats ranked the dtypes differently, is used but kept as provisional
    and made again on the next start. Any other target: fp32 (nothing to time it with; see model/dtypes.py)."""
    if target is not None:
        return "float32"
    model = model_target.DEFAULT_ID
    kept = tune.kept_default_dtype(model)
    if kept and not force and tune.default_dtype_is_final(model):
        return kept
    if not tune.enabled():
        return "float32"
    if log:
        log("choosing this machine's CPU dtype: timing fp32 and bf16 speculative decodes"
            + (" again (the last choice was made on a busy machine)" if kept and not force else " (once)"))
    busy = tune.machine_busy()
    targets = {dt: model_target.load_target(None, device="cpu", dtype=dt) for dt in DTYPES}   # embedded target
    speed, agree = time_decodes(targets, _prompts())
    busy = busy or tune.machine_busy()
    best = max(speed, key=speed.get)
    tune.write_choice({"default_dtype": best, "decode_tok_s": speed, "default_dtype_provisional": busy or not agree,
                       "decode_when": time.strftime("%Y-%m-%d %H:%M")}, model)
    if log:
        note = "" if not (busy or not agree) else (" (provisional: " + ("machine busy" if busy else
                                                                         "repeats disagree") + ")")
        log("  " + ", ".join(f"{k}: {v:.1f} tok/s" for k, v in speed.items()) + f" → default {best}{note}")
    return best


def dtype_for(device: str | None = None, dtype=None, target: str | None = None):
    """The dtype a face loads ``target`` (a path; None: the embedded model) at: ``dtype`` when given; on a CPU
    without one, the choice for that target (measured now for the embedded one if it never was, with a note on
    stderr); else None (model/dtypes.py decides)."""
    device = device or model_target.default_device()
    if dtype is None and str(device).startswith("cpu"):
        return choose_default_dtype(log=lambda s: print(f"dspark_viz: {s}", file=sys.stderr, flush=True),
                                    target=target)
    return dtype
