"""``dspark-viz eval`` (full-block τ per domain) and ``dspark-viz calibrate`` (STS fit and report)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..calibration import STSCalibration, calibration_report, fit_sts, rollouts_from_traces
from ..datasets.traces import load_traces
from ..drafters import load_drafter
from ..drafters.neural import calibration_path
from ..evaluation.full_block import evaluate_drafter, format_report, load_eval_prompts, to_json
from .common import add_target_args, load_target_from_args


# -- eval ----------------------------------------------------------------------------------------
def add_eval(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drafter", required=True, help="a shipped name (dspark, dspark-rnn, dflash, eagle, lookup) "
                   "or a drafter card FILE.json")
    p.add_argument("--prompts", nargs="+", required=True, help="{\"turns\": [...]} JSONL file(s)")
    p.add_argument("--domain", default=None)
    p.add_argument("--per-domain", type=int, default=None, help="at most this many prompts per domain")
    p.add_argument("--half", choices=["select", "report"], default=None,
                   help="one fixed half of the prompts: select (to choose drafters on) or report (published figures)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    p.add_argument("--traces", default=None, metavar="DIR")
    p.add_argument("--batch", type=int, default=1, help="requests decoded together, 1…8 (same traces, faster)")
    add_target_args(p)


def run_eval(a) -> None:
    recs = load_eval_prompts(a.prompts, domain=a.domain, per_domain=a.per_domain, half=a.half)
    if not recs:
        raise ValueError("no prompts selected (check --prompts / --domain)")
    target = load_target_from_args(a)
    res = evaluate_drafter(target, load_drafter(a.drafter, target), recs, a.temperature, a.max_new_tokens,
                           a.seed, a.traces, batch=a.batch)
    print(format_report(res))
    if a.json:
        to_json(res, a.json)


# -- calibrate -------------------------------------------------------------------------------------
def add_calibrate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drafter", required=True, help="a shipped name or a drafter card FILE.json "
                   "(its calibration is saved beside it as FILE.sts.json)")
    p.add_argument("--prompts", nargs="+", default=None, help="fit prompts (JSONL)")
    p.add_argument("--eval-prompts", nargs="+", default=None, help="out-of-sample prompts (JSONL)")
    p.add_argument("--per-domain", type=int, default=None)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--fit-traces", default=None, metavar="PATH",
                   help="fit on recorded traces (a bundle, Trace JSON or folder) instead of decoding")
    p.add_argument("--eval-traces", default=None, metavar="PATH", help="evaluate on recorded traces")
    p.add_argument("--json", default=None)
    p.add_argument("--out", default=None, help="calibration file (default: beside the shipped drafter)")
    p.add_argument("--level", action="store_true",
                   help="also fit a level term b_k per position: σ(logit(c_k)/T_k + b_k) (beyond the paper)")
    add_target_args(p)


def run_calibrate(a) -> None:
    import numpy as np



    fit_src, eval_src = a.fit_traces or a.prompts, a.eval_traces or a.eval_prompts
    if not fit_src and not eval_src:
        raise ValueError("give --prompts / --fit-traces (fit) and/or --eval-prompts / --eval-traces (evaluate)")
    out = Path(a.out) if a.out else calibration_path(a.drafter)
    state = {}

    def drafter():
        if "d" not in state:
            target = load_target_from_args(a)
            state["t"], state["d"] = target, load_drafter(a.drafter, target, calibrated=False)
            if not state["d"].has_confidence:
                raise ValueError(f"drafter {a.drafter!r} has no confidence head to calibrate")
        return state["t"], state["d"]

    def rollouts(files, trace_dir):
        if trace_dir:
            traces = load_traces(trace_dir)
            if not traces:
                raise FileNotFoundError(f"no traces in {trace_dir}")
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
