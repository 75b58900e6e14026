"""``dspark-viz record``: full-block traces of every drafter on the evaluation prompts, one bundle per
(drafter, temperature) — the recorded evidence the notebooks and the app's model-free tabs replay.

    dspark-viz record                          # writes assets/traces/<drafter>_T<T>.json.gz
    dspark-viz record --drafters dspark --temperatures 1 --out /tmp/traces --force

Each bundle is written once it is complete, so an interrupted run resumes at the next missing one.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from .. import registry
from ..datasets.traces import bundle_name, save_bundle
from ..drafters import load_drafter
from ..evaluation.full_block import evaluate_drafter, load_eval_prompts
from ..fast import tune
from ..settings import assets
from .common import add_target_args, load_target_from_args

def add_record(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drafters", nargs="+", default=list(registry.names(lambda e: e.recorded)),
                   help="default: the drafters the table marks recorded (dspark_viz.registry)")
    p.add_argument("--temperatures", nargs="+", type=float, default=[0.0, 1.0])
    p.add_argument("--prompts", nargs="+", default=None, help="JSONL prompt file(s) (default: the shipped eval split)")
    p.add_argument("--per-domain", type=int, default=30)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=8, help="requests decoded together (same traces, faster)")
    p.add_argument("--out", default=None, metavar="DIR", help="bundle folder (default: the package's assets/traces)")
    p.add_argument("--force", action="store_true", help="re-record bundles that exist")
    add_target_args(p)


def run_record(a) -> None:
    if a.per_domain < 1 or a.max_new_tokens < 1:
        raise ValueError("--per-domain and --max-new-tokens must be ≥ 1")
    if any(not 0.0 <= T <= 10.0 for T in a.temperatures):
        raise ValueError("--temperatures must lie in 0…10")
    files = a.prompts or [assets("prompts", "eval.jsonl")]
    recs = load_eval_prompts(files, per_domain=a.per_domain)
    if not recs:
        raise ValueError("no prompts selected (check --prompts / --per-domain)")
    out = Path(a.out) if a.out else assets("traces")
    if a.dtype is None:
        a.dtype = "fp32"                        # the recording is the lessons' reference: fp32, as the notebooks
    target = load_target_from_args(a)
    for name in a.drafters:
        drafter = load_drafter(name, target)
        for T in a.temperatures:
            path = out / bundle_name(name, T)
            if path.exists() and not a.force:
                print(f"{path.name}: exists (--force re-records)")
                continue
            t0 = time.perf_counter()
            res = evaluate_drafter(target, drafter, recs, temperature=T, max_new_tokens=a.max_new_tokens,
                                   seed=a.seed, batch=a.batch)
            meta = {"drafter": name, "temperature": T, "policy": "fixed-γ (full block)",
                    "max_new_tokens": a.max_new_tokens, "per_domain": a.per_domain, "seed": a.seed,
                    "prompts": [Path(f).name for f in files], "dtype": a.dtype,
                    "device": str(target.device), "threads": torch.get_num_threads(),
                    "cpu": tune.cpu_model_and_flags()[0], "torch": torch.__version__,
                    "command": " ".join(["dspark-viz", "record", *getattr(a, "_argv", [])])}
            save_bundle(res["traces"], path, meta=meta)
            print(f"{path.name}: {len(res['traces'])} requests, {res['rounds']} rounds, τ = {res['tau']:.3f}, "
                  f"{time.perf_counter() - t0:.0f} s, {path.stat().st_size / 1024:.0f} KiB")
