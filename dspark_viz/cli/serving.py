"""``dspark-viz profile`` (measure an SPS profile) and ``dspark-viz simulate`` (serving under load)."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..cost import SPSProfile, named_profile
from ..datasets.prompts import load_prompts
from ..datasets.traces import bundle_name, load_traces
from ..drafters import NEURAL, load_drafter
from ..evaluation import dtype_choice
from ..evaluation.machine_info import floor_ms, read_bandwidth, weight_bytes
from ..model import target as model_target
from ..cost import cpu_profile_file
from ..scheduler import HardwareAware
from ..serving.batched import MAX_BATCH, batched_generate, sim_vs_real
from ..serving.measure import measure_draft_costs, measure_engine_profile, measure_profile
from ..serving.simulate import SWEEP_POLICIES, headline, sweep
from ..settings import assets
from .common import add_target_args, load_target_from_args, set_threads


# -- profile / simulate ----------------------------------------------------------------------------
def add_profile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bmax", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ctx-len", type=int, default=256)
    p.add_argument("--no-drafters", action="store_true", help="skip timing the shipped drafters' rounds")
    p.add_argument("--drafters-only", action="store_true", help="keep the profile file's SPS table and only (re)time "
                   "the shipped drafters' rounds (proposal + context extension) into its meta.draft_s")
    p.add_argument("--out", default=None, help="default on CPU: assets/profiles/cpu.json (fp32 with the few-row "
                   "kernel), cpu-stock.json (fp32, DSPARK_SKINNY=0), cpu-bf16[-stock].json (--dtype bf16)")
    p.add_argument("--tune-only", action="store_true", help="only re-measure this machine's choice: the path each "
                   "few-token size takes (at --dtype, default both) and the default CPU dtype")
    p.add_argument("--no-tune", action="store_true", help="keep this machine's kept path and dtype choice")
    p.add_argument("--engine", action="store_true", help="time the live engine's verification forward (B rows as "
                   "blocks of 8 from ⌈B/8⌉ sequences, one ragged call) instead of one sequence's forward; needs --out")
    add_target_args(p)


def run_tune(a) -> None:
    """Re-measure the per-size path choice and the default CPU dtype (fast/tune.py, evaluation/dtype_choice.py)."""
    log = lambda s: print(s, flush=True)                                        # noqa: E731
    for dt in ([a.dtype] if a.dtype else ["fp32", "bf16"]):
        t = model_target.load_target(a.target, device="cpu", dtype=dt, tune_paths=False)
        t.choose_paths(force=True)
        log(f"{dt}: {t.paths.choice}")
    log(f"default CPU dtype: {dtype_choice.choose_default_dtype(force=True, log=log)}")


def run_profile(a) -> None:
    if a.drafters_only and a.no_drafters:
        raise ValueError("--drafters-only and --no-drafters contradict each other")
    if a.tune_only and a.no_tune:
        raise ValueError("--tune-only and --no-tune contradict each other")
    set_threads(a.threads)
    if not a.no_tune and model_target.default_device() == "cpu":     # the choice is a CPU one
        run_tune(a)
        if a.tune_only:
            return
    target = load_target_from_args(a)
    if a.engine and (a.out is None or a.drafters_only):
        raise ValueError("--engine measures a new table: pass --out FILE.json (and not --drafters-only)")
    if a.out is None:
        if not str(target.device).startswith("cpu"):
            raise ValueError("on a GPU pass --out FILE.json (the shipped profiles are CPU ones)")
        a.out = str(cpu_profile_file(str(target.dtype), target.paths.matmul))
    if a.drafters_only:
        if not Path(a.out).exists():
            raise FileNotFoundError(f"--drafters-only needs an existing profile at {a.out}: run `dspark-viz profile` first")
        prof = SPSProfile.load(a.out)
    else:
        measure = measure_engine_profile if a.engine else measure_profile
        prof = measure(target, bmax=a.bmax, repeats=a.repeats, ctx_len=a.ctx_len)
        if str(target.device).startswith("cpu"):          # the memory floor the table was taken against
            bw = read_bandwidth()
            prof.meta["read_GBps"] = round(bw / 1e9, 2)
            prof.meta["floor_ms"] = round(floor_ms(weight_bytes(target), bw), 3)   # a one-token step's reads
    if not a.no_drafters:                     # the neural drafters' round cost, read by the hybrid's arbiter

        prof.meta["draft_s"] = measure_draft_costs(target, NEURAL, repeats=a.repeats, ctx_len=a.ctx_len)
        prof.meta["draft_s_when"] = time.strftime("%Y-%m-%d")      # may differ from the table's "when"
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    prof.save(a.out)
    for b, s in zip(prof.batch, prof.sps):
        print(f"B={b:4d}  {s:8.2f} steps/s  {1000 / s:8.1f} ms")
    if "floor_ms" in prof.meta:
        print(f"memory floor of a one-token step {prof.meta['floor_ms']:.1f} ms (weights ÷ "
              f"{prof.meta['read_GBps']} GB/s read now): B=1 at "
              f"{1000 / prof.sps[0] / prof.meta['floor_ms']:.2f}× the floor")
    for name, sec in prof.meta.get("draft_s", {}).items():
        print(f"draft {name:10s} {1000 * sec:8.1f} ms per drafted round")
    print(f"saved {a.out}")


def add_simulate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="gpu-like")
    p.add_argument("--traces", default=None, metavar="PATH",
                   help="a trace bundle (.json.gz), Trace JSON or folder of them "
                   "(default: the shipped recording of dspark at T = 1)")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--json", default=None)
    p.add_argument("--real", default=None, metavar="R1,R2,…",
                   help="also decode R ≤ 8 requests for real (batched verification on the target, HardwareAware "
                        "on this profile) and report the gap between the profile's round times and the measured ones")
    p.add_argument("--real-drafter", default="dspark")
    p.add_argument("--real-tokens", type=int, default=48, help="new tokens per request in the real runs")
    p.add_argument("--temperature", type=float, default=1.0, help="temperature of the real runs")
    add_target_args(p)


def run_simulate(a) -> None:
    tdir = Path(a.traces) if a.traces else assets("traces", bundle_name("dspark", 1.0))
    traces = load_traces(tdir)
    traces = [t for t in traces if any(r.drafts and r.drafts[0].confidence is not None for r in t.rounds)]
    if not traces:
        raise FileNotFoundError(f"no recorded traces with confidences in {tdir}")
    prof = named_profile(a.profile)
    df = sweep(traces, SWEEP_POLICIES, prof, n_rounds=a.rounds)
    head = headline(df)
    head["oracle"] = headline(df, policy="oracle")      # the yardstick: verifies only drafts that will be accepted
    print(df.to_string(index=False))
    print(json.dumps(head, indent=1, default=float))
    real = run_real_batched(a, prof, df) if a.real else None
    if a.json:
        body = {"profile": prof.name, "curves": df.to_dict(orient="records"), **head}
        if real is not None:
            body["real"] = real
        Path(a.json).write_text(json.dumps(body, indent=1, default=float))


def run_real_batched(a, prof, df) -> list[dict]:
    """`simulate --real`: batched decoding on the target for each R, against the profile's predictions."""

    try:
        Rs = [int(x) for x in a.real.split(",") if x.strip()]
    except ValueError as e:
        raise ValueError(f"--real must be comma-separated request counts, got {a.real!r}") from e
    if not Rs or any(not 1 <= R <= MAX_BATCH for R in Rs):
        raise ValueError(f"--real request counts must lie in 1…{MAX_BATCH}, got {a.real!r}")
    target = load_target_from_args(a)
    drafter = load_drafter(a.real_drafter, target)
    recs = load_prompts(assets("prompts", "eval.jsonl"))
    out = []
    print(f"\nreal batched decoding ({drafter.name}, HardwareAware on {prof.name}, T = {a.temperature:g}, "
          f"{a.real_tokens} new tokens per request)")
    print(f"{'R':>3} {'rounds':>7} {'tokens':>7} {'real tok/s':>11} {'profile tok/s':>14} {'sim tok/s':>10} "
          f"{'verify real/profile':>20} {'mean B':>7}")
    for R in Rs:
        prompts = [recs[(i * 37) % len(recs)]["turns"][0] for i in range(R)]
        res = batched_generate(target, drafter, prompts, policy=HardwareAware(), sps=prof,
                               temperature=a.temperature, max_new_tokens=a.real_tokens, seed=R)
        gap = sim_vs_real(res, prof)
        sim = df[(df.policy == "hardware-aware") & (df.R == R)]
        gap["sim_throughput_trace_driven"] = float(sim.throughput.iloc[0]) if len(sim) else float("nan")
        gap["R"] = R
        out.append(gap)
        print(f"{R:>3} {gap['rounds']:>7} {gap['tokens']:>7} {gap['real_throughput']:>11.2f} "
              f"{gap['predicted_throughput']:>14.2f} {gap['sim_throughput_trace_driven']:>10.2f} "
              f"{gap['verify_time_ratio']:>20.2f} {gap['mean_B']:>7.1f}")
    return out
