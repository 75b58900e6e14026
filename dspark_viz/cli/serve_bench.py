"""``dspark-viz serve-bench``: the live engine under load — R requests at once for each R, the drafter against plain
decoding in the same engine, beside the simulation's prediction (serving/engine_bench.py).

    dspark-viz serve-bench --Rs 1,2,4,8 --max-new-tokens 64 --json docs/data/engine.json
"""
from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from ..datasets.traces import bundle_name, load_traces
from ..cost import named_profile, profile_for
from ..drafters import load_drafter
from ..fast.tune import cpu_model_and_flags
from ..serving.engine_bench import bench_prompts, engine_bench, simulated, summarize
from ..serving.measure import measure_draft_costs, measure_engine_profile
from ..settings import assets
from .common import add_target_args, load_target_from_args


def add_serve_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("--Rs", default="1,2,4,8", help="request counts, comma-separated (1…64)")
    p.add_argument("--drafter", default="dspark")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--prompts", default=None, metavar="FILE.jsonl",
                   help="a {\"turns\": [...]} JSONL file (default: the shipped evaluation prompts)")
    p.add_argument("--profile", default="shipped", metavar="shipped|engine|NAME|FILE.json",
                   help="the SPS curve Algorithm 1 schedules with (and the simulation prices): shipped (the target's "
                   "shipped profile, as the app), engine (measure this machine's engine forward first), a profile "
                   "name or a .json file")
    p.add_argument("--profile-out", default=None, metavar="FILE.json", help="save the measured engine profile")
    p.add_argument("--json", default=None)
    add_target_args(p)


def bench_profile(target, how: str, drafter_name: str, out: str | None = None):
    """The profile of ``--profile``: the target's shipped one, this machine's engine curve measured now (with the
    drafter's round cost, which the simulation prices), or a named one. → (SPSProfile, how it was chosen)."""
    if how == "shipped":
        return profile_for(target), "shipped"
    if how != "engine":
        return named_profile(how), how
    print("measuring this machine's engine curve (B = 1…64) and the drafter's round …", flush=True)
    prof = measure_engine_profile(target, bmax=64, repeats=5)
    prof.meta["draft_s"] = measure_draft_costs(target, [drafter_name], repeats=9)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        prof.save(out)
    print("  " + "  ".join(f"B={b}: {1000 / v:.1f} ms" for b, v in zip(prof.batch, prof.sps) if b in (1, 4, 8, 16, 32, 64)))
    return prof, "engine"


def run_serve_bench(a: argparse.Namespace) -> None:
    try:
        Rs = [int(x) for x in a.Rs.split(",") if x.strip()]
    except ValueError as e:
        raise ValueError(f"--Rs must be comma-separated request counts, got {a.Rs!r}") from e
    if not Rs or any(not 1 <= R <= 64 for R in Rs) or a.repeats < 1:
        raise ValueError(f"--Rs must lie in 1…64 and --repeats be ≥ 1 (got {a.Rs!r}, {a.repeats})")
    prompts = bench_prompts(Path(a.prompts) if a.prompts else None)
    target = load_target_from_args(a)
    drafter = load_drafter(a.drafter, target)
    prof, how = bench_profile(target, a.profile, a.drafter, a.profile_out)
    rows = engine_bench(target, drafter, prompts, Rs, a.max_new_tokens, a.temperature, a.repeats, sps=prof)
    traces = load_traces(assets("traces", bundle_name(a.drafter, 1.0 if a.temperature > 0 else 0.0)))
    table = summarize(rows, drafter.name, simulated(target, traces, Rs, a.drafter, profile=prof))
    print(f"{'R':>3} {'tok/s':>8} {'per user':>9} {'plain':>8} {'×plain':>7} {'×R=1':>6} {'sim tok/s':>10}")
    for t in table:
        sim = f"{t['sim_throughput']:10.1f}" if t["sim_throughput"] is not None else f"{'–':>10}"
        print(f"{t['R']:>3} {t['throughput']:8.1f} {t['per_user']:9.1f} {t['plain_throughput']:8.1f} "
              f"{t['x_plain']:7.2f} {t['x_R1']:6.2f} {sim}")
    if a.json:
        body = {"command": "dspark-viz serve-bench " + " ".join(getattr(a, "_argv", [])), "cpu": cpu_model_and_flags()[0]
                or platform.machine(), "target": target.name, "dtype": str(target.dtype).replace("torch.", ""),
                "device": str(target.device), "drafter": drafter.name, "temperature": a.temperature,
                "max_new_tokens": a.max_new_tokens, "profile": {"how": how, "name": prof.name,
                "batch": list(prof.batch), "sps": list(prof.sps), "meta": prof.meta}, "summary": table, "runs": rows}
        Path(a.json).write_text(json.dumps(body, indent=1, default=float) + "\n")
