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
from ..model.profile import profile_for
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


def time_decodes(targets: dict, prompts: list[str], max_new_tokens: int = 48, repeats: int = 2) -> dict[str, float]:
    """Median tok/s of DSpark + HardwareAware decodes per target, the dtypes interleaved prompt by prompt."""
    drafters = {k: speed_only(load_drafter("dspark", t)) for k, t in targets.items()}   # no chart diagnostics
    speed: dict[str, list[float]] = {k: [] for k in targets}
    for rep in range(repeats + 1):                                   # the first pass warms up
        for i, p in enumerate(prompts):
            order = list(targets) if (i + rep) % 2 == 0 else list(reversed(targets))
            for k in order:
                t = targets[k]
                t0 = time.perf_counter()
                tr = speculative_generate(t, drafters[k], p, policy=HardwareAware(), sps=profile_for(t),
                                          max_new_tokens=max_new_tokens, temperature=0.0)
                if rep:
                    speed[k].append(tr.n_generated / max(time.perf_counter() - t0, 1e-9))
    return {k: statistics.median(v) for k, v in speed.items()}


def choose_default_dtype(force: bool = False, log=None) -> str:
    """The default CPU dtype of this machine ("float32" / "bfloat16"): kept, or measured now (on the embedded
    target, with the shipped drafter) and kept."""
    kept = tune.kept_default_dtype()
    if kept and not force:
        return kept
    if not tune.enabled():
        return "float32"
    if log:
        log("choosing this machine's CPU dtype: timing fp32 and bf16 speculative decodes (once)")
    targets = {dt: model_target.load_target(None, device="cpu", dtype=dt) for dt in DTYPES}   # embedded target
    speed = time_decodes(targets, _prompts())
    best = max(speed, key=speed.get)
    tune.write_choice({"default_dtype": best, "decode_tok_s": speed,
                       "decode_when": time.strftime("%Y-%m-%d %H:%M")})
    if log:
        log("  " + ", ".join(f"{k}: {v:.1f} tok/s" for k, v in speed.items()) + f" → default {best}")
    return best


def dtype_for(device: str | None = None, dtype=None):
    """The dtype a face loads its target at: ``dtype`` when given; on a CPU without one, this machine's choice
    (measured now if it never was, with a note on stderr); else None (model/dtypes.py decides)."""
    device = device or model_target.default_device()
    if dtype is None and str(device).startswith("cpu"):
        return choose_default_dtype(log=lambda s: print(f"dspark_viz: {s}", file=sys.stderr, flush=True))
    return dtype
