"""Subcommands `data`, `train`, `eval`, `calibrate`, `profile`, `simulate` (argparse in, library calls out).

Each ``add_*`` takes a subparser and sets ``func``; cli.py registers them. No algorithm lives here.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from ..settings import assets


def _target(a):
    import torch

    from ..model.target import load_target

    if getattr(a, "threads", None):
        torch.set_num_threads(a.threads)
    return load_target(getattr(a, "target", None), dtype=getattr(a, "dtype", None))


def _common(p, threads=True):
    p.add_argument("--target", default=None, help="a local HF causal-LM folder or .gguf (default: embedded SmolLM2)")
    p.add_argument("--dtype", default=None, choices=["fp32", "bf16"])
    if threads:
        p.add_argument("--threads", type=int, default=None)


# -- data / train ------------------------------------------------------------------------------
def add_data(sub) -> None:
    p = sub.add_parser("data", help="generate target responses and cache target features (resumable)")
    p.add_argument("--prompts", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--max-new-tokens", type=int, default=160)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--write-prompts", default=None, metavar="DIR", help="only write the prompt suites to DIR")
    p.set_defaults(func=run_data)


def run_data(a) -> None:
    from ..train import data, prompts

    if a.write_prompts:
        for k, v in prompts.write_suites(a.write_prompts).items():
            print(f"{k}: {v}")
        return
    argv = [x for k, v in (("--prompts", a.prompts), ("--out", a.out)) if v for x in (k, v)]
    argv += ["--max-new-tokens", str(a.max_new_tokens), "--batch-size", str(a.batch_size),
             "--temperature", str(a.temperature)]
    argv += (["--limit", str(a.limit)] if a.limit else []) + (["--threads", str(a.threads)] if a.threads else [])
    data.main(argv)


def add_train(sub) -> None:
    from .train import add_train_args, run_train

    p = sub.add_parser("train", help="train one drafter (dspark | dspark-rnn | dflash | eagle), resumable")
    add_train_args(p)
    p.set_defaults(func=run_train)


# -- eval ----------------------------------------------------------------------------------------
def add_eval(sub) -> None:
    p = sub.add_parser("eval", help="full-block evaluation (ℓ = γ): τ per domain, survival, acceptance")
    p.add_argument("--drafter", required=True, help="a shipped name (dspark, dspark-rnn, dflash, eagle, lookup) "
                   "or a drafter card FILE.json")
    p.add_argument("--prompts", nargs="+", required=True, help="{\"turns\": [...]} JSONL file(s)")
    p.add_argument("--domain", default=None)
    p.add_argument("--per-domain", type=int, default=None, help="at most this many prompts per domain")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    p.add_argument("--traces", default=None, metavar="DIR")
    p.add_argument("--batch", type=int, default=1, help="requests decoded together, 1…8 (same traces, faster)")
    _common(p)
    p.set_defaults(func=run_eval)


def run_eval(a) -> None:
    from ..drafters import load_drafter
    from ..evaluate import evaluate_drafter, format_report, load_eval_prompts, to_json

    recs = load_eval_prompts(a.prompts, domain=a.domain, per_domain=a.per_domain)
    if not recs:
        raise ValueError("no prompts selected (check --prompts / --domain)")
    target = _target(a)
    res = evaluate_drafter(target, load_drafter(a.drafter, target), recs, a.temperature, a.max_new_tokens,
                           a.seed, a.traces, batch=a.batch)
    print(format_report(res))
    if a.json:
        to_json(res, a.json)


# -- calibrate -------------------------------------------------------------------------------------
def add_calibrate(sub) -> None:
    p = sub.add_parser("calibrate", help="fit Sequential Temperature Scaling and report ECE / AUROC")
    p.add_argument("--drafter", required=True, help="a shipped name or a drafter card FILE.json "
                   "(its calibration is saved beside it as FILE.sts.json)")
    p.add_argument("--prompts", nargs="+", default=None, help="fit prompts (JSONL)")
    p.add_argument("--eval-prompts", nargs="+", default=None, help="out-of-sample prompts (JSONL)")
    p.add_argument("--per-domain", type=int, default=None)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--fit-traces", default=None, metavar="DIR", help="fit on recorded Trace JSONs instead of decoding")
    p.add_argument("--eval-traces", default=None, metavar="DIR", help="evaluate on recorded Trace JSONs")
    p.add_argument("--json", default=None)
    p.add_argument("--out", default=None, help="calibration file (default: beside the shipped drafter)")
    p.add_argument("--level", action="store_true",
                   help="also fit a level term b_k per position: σ(logit(c_k)/T_k + b_k) (beyond the paper)")
    _common(p)
    p.set_defaults(func=run_calibrate)


def run_calibrate(a) -> None:
    import numpy as np

    from ..calibration import STSCalibration, calibration_report, fit_sts, rollouts_from_traces
    from ..drafters import load_drafter
    from ..drafters.neural import calibration_path
    from ..evaluate import evaluate_drafter, load_eval_prompts

    from ..trace import Trace

    fit_src, eval_src = a.fit_traces or a.prompts, a.eval_traces or a.eval_prompts
    if not fit_src and not eval_src:
        raise ValueError("give --prompts / --fit-traces (fit) and/or --eval-prompts / --eval-traces (evaluate)")
    out = Path(a.out) if a.out else calibration_path(a.drafter)
    state = {}

    def drafter():
        if "d" not in state:
            target = _target(a)
            state["t"], state["d"] = target, load_drafter(a.drafter, target, calibrated=False)
            if not state["d"].has_confidence:
                raise ValueError(f"drafter {a.drafter!r} has no confidence head to calibrate")
        return state["t"], state["d"]

    def rollouts(files, trace_dir):
        if trace_dir:
            traces = [Trace.from_json(str(p)) for p in sorted(Path(trace_dir).glob("*.json"))]
            if not traces:
                raise FileNotFoundError(f"no Trace JSON files in {trace_dir}")
        else:
            target, d = drafter()
            recs = load_eval_prompts(files, per_domain=a.per_domain)
            traces = evaluate_drafter(target, d, recs, a.temperature, a.max_new_tokens)["traces"]
        return rollouts_from_traces(traces)

    if fit_src:
        conf, acc, ell = rollouts(a.prompts, a.fit_traces)
        cal = fit_sts(conf, acc, ell, bias_grid=np.round(np.linspace(-2, 2, 41), 2) if a.level else None)
        cal.meta.update(drafter=a.drafter, fit_rounds=int(len(acc)), temperature=a.temperature)
        cal.save(out)
        print(f"saved {out}: temperatures {[round(t, 3) for t in cal.temperatures]}")
    else:
        cal = STSCalibration.load(out)
    if eval_src:
        conf, acc, ell = rollouts(a.eval_prompts, a.eval_traces)
    rep = calibration_report(conf, acc, ell, calib=cal)
    body = {k: rep[k] for k in ("ece_before", "ece_after", "auroc", "n")}
    body["out_of_sample"] = bool(eval_src)
    print(json.dumps(body, indent=1, default=float))
    if a.json:
        Path(a.json).write_text(json.dumps(dict(rep, out_of_sample=bool(eval_src)), indent=1, default=float))


# -- profile / simulate ----------------------------------------------------------------------------
def add_profile(sub) -> None:
    p = sub.add_parser("profile", help="measure the target's steps/s for B = 1…Bmax tokens per forward")
    p.add_argument("--bmax", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ctx-len", type=int, default=256)
    p.add_argument("--no-drafters", action="store_true", help="skip timing the shipped drafters' proposals")
    p.add_argument("--drafters-only", action="store_true", help="keep the profile file's SPS table and only (re)time "
                   "the shipped drafters' proposals into its meta.draft_s")
    p.add_argument("--out", default=None, help="default on CPU: assets/profiles/cpu.json (fp32 with the few-row "
                   "kernel), cpu-stock.json (fp32, DSPARK_SKINNY=0), cpu-bf16[-stock].json (--dtype bf16)")
    _common(p)
    p.set_defaults(func=run_profile)


def run_profile(a) -> None:
    from ..serving.profile import cpu_profile_file
    from ..serving.measure import measure_profile

    if a.drafters_only and a.no_drafters:
        raise ValueError("--drafters-only and --no-drafters contradict each other")
    target = _target(a)
    if a.out is None:
        if not str(target.device).startswith("cpu"):
            raise SystemExit("on a GPU pass --out FILE.json (the shipped profiles are CPU ones)")
        a.out = str(cpu_profile_file(str(target.dtype), target.matmul_path))
    if a.drafters_only:
        from ..serving.profile import SPSProfile

        if not Path(a.out).exists():
            raise FileNotFoundError(f"--drafters-only needs an existing profile at {a.out}: run `dspark-viz profile` first")
        prof = SPSProfile.load(a.out)
    else:
        prof = measure_profile(target, bmax=a.bmax, repeats=a.repeats, ctx_len=a.ctx_len)
    if not a.no_drafters:                     # the neural drafters' proposal cost, read by the hybrid's arbiter
        from ..drafters import NEURAL
        from ..serving.measure import measure_draft_costs

        prof.meta["draft_s"] = measure_draft_costs(target, NEURAL, repeats=a.repeats, ctx_len=a.ctx_len)
        prof.meta["draft_s_when"] = time.strftime("%Y-%m-%d")      # may differ from the table's "when"
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    prof.save(a.out)
    for b, s in zip(prof.batch, prof.sps):
        print(f"B={b:4d}  {s:8.2f} steps/s  {1000 / s:8.1f} ms")
    for name, sec in prof.meta.get("draft_s", {}).items():
        print(f"draft {name:10s} {1000 * sec:8.1f} ms per proposal")
    print(f"saved {a.out}")


def add_simulate(sub) -> None:
    p = sub.add_parser("simulate", help="trace-driven serving simulation of every policy")
    p.add_argument("--profile", default="gpu-like")
    p.add_argument("--traces", default=None, metavar="DIR", help="recorded Trace JSONs (default: assets/traces)")
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--json", default=None)
    p.add_argument("--real", default=None, metavar="R1,R2,…",
                   help="also decode R ≤ 8 requests for real (batched verification on the target, HardwareAware "
                        "on this profile) and report the gap between the profile's round times and the measured ones")
    p.add_argument("--real-drafter", default="dspark")
    p.add_argument("--real-tokens", type=int, default=48, help="new tokens per request in the real runs")
    p.add_argument("--temperature", type=float, default=1.0, help="temperature of the real runs")
    _common(p)
    p.set_defaults(func=run_simulate)


def run_simulate(a) -> None:
    from ..serving.simulate import SWEEP_POLICIES, headline, sweep
    from ..serving.profile import named_profile
    from ..trace import Trace

    tdir = Path(a.traces) if a.traces else assets("traces")
    traces = [Trace.from_json(str(p)) for p in sorted(tdir.glob("*.json"))]
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
    from ..serving.batched import MAX_BATCH, batched_generate, sim_vs_real
    from ..drafters import load_drafter
    from ..scheduler import HardwareAware
    from ..train.prompts import load_prompts

    try:
        Rs = [int(x) for x in a.real.split(",") if x.strip()]
    except ValueError as e:
        raise ValueError(f"--real must be comma-separated request counts, got {a.real!r}") from e
    if not Rs or any(not 1 <= R <= MAX_BATCH for R in Rs):
        raise ValueError(f"--real request counts must lie in 1…{MAX_BATCH}, got {a.real!r}")
    target = _target(a)
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


REGISTRY = (add_data, add_train, add_eval, add_calibrate, add_profile, add_simulate)


def register(sub: argparse._SubParsersAction) -> None:
    for add in REGISTRY:
        add(sub)
