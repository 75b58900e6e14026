"""Training throughput: positions per second of one drafter's optimiser steps on a feature cache.

    .venv/bin/python benchmarks/bench_train.py --data DIR --algo dspark --precision fp32,bf16 --steps 8
    .venv/bin/python benchmarks/bench_train.py --data DIR --precision fp32 --loss compiled --against OLD --repeats 4
    .venv/bin/python benchmarks/bench_train.py --data DIR --corpus corpus/answers --precision fp32,bf16

With ``--corpus`` it also times steps that compute their sequences' target features inside the step (training
from token ids, dspark_viz/train/online.py) on the same first sequences, interleaved with the cached steps.

Positions = the (block, slot) pairs a step trains (a block running past a sequence's end counts its valid
slots only; an older trainer that does not report them counts blocks × γ). Repeats alternate the precisions (interleaved), so a busy machine slows
all of them alike; the median step time is reported. Run it on a quiet machine for figures to quote.
The cache's shards are read here directly (tensors only), so the same command times an older checkout of
the trainer on the same data: ``PYTHONPATH=OLD_CHECKOUT python benchmarks/bench_train.py …``; with
``--against OLD_CHECKOUT`` it alternates the two checkouts (one process per repeat each), so that a busy
machine slows both alike:

    .venv/bin/python benchmarks/bench_train.py --data DIR --precision fp32 --against ../old --repeats 3
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from dspark_viz.drafters.config import DrafterConfig
from dspark_viz.drafters.neural import build_model, init_from_target
from dspark_viz.model.target import load_target
from dspark_viz.train.config import TrainConfig
from dspark_viz.train.trainer import batch_loss, build_draft_vocab

try:                                   # the trainer's own optimiser; an older checkout's plain AdamW
    from dspark_viz.train.trainer import make_optimizer
except ImportError:
    def make_optimizer(params, tc):
        return torch.optim.AdamW(params, lr=tc.lr, betas=(0.9, 0.95), weight_decay=tc.weight_decay)


def cpu_name() -> str:
    """The CPU's model name (Linux), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def read_cache(folder: str, limit: int = 400) -> list[dict]:
    """The first ``limit`` usable sequences of a feature cache (dspark_viz/train/data.py's shard layout)."""
    index = json.loads((Path(folder) / "index.json").read_text())
    seqs: list[dict] = []
    for name in index["shards"]:
        sh = torch.load(Path(folder) / name, weights_only=True, mmap=True)
        off, pl = sh["offsets"].tolist(), sh["prompt_len"].tolist()
        for i in range(len(pl)):
            a, b = off[i], off[i + 1]
            if b - a - pl[i] >= 3 and len(seqs) < limit:
                seqs.append({"id": f"{len(seqs):06d}", "n": b - a, "prompt_len": pl[i], "ids": sh["ids"][a:b].long(),
                             "feats": sh["feats"][a:b], "hidden": sh["hidden"][a:b], "lse": sh["lse"][a:b]})
    return seqs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="feature cache (the cached trainer's sequences)")
    ap.add_argument("--corpus", default=None, help="corpus folder: also time steps whose features are computed "
                    "in the step (train/online.py), interleaved with the cached ones")
    ap.add_argument("--algo", default="dspark")
    ap.add_argument("--precision", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-layers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--blocks-per-seq", type=int, default=None, help="default: the trainer's")
    ap.add_argument("--loss", default="eager", choices=["eager", "compiled"],
                    help="compiled: the loss through torch.compile (the trainer's choice for runs of ≥ 300 steps)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--profile", action="store_true", help="profile two steps (torch.profiler) and print the top ops")
    ap.add_argument("--against", default=None, metavar="OLD_CHECKOUT",
                    help="alternate with an older checkout's trainer, one process per repeat each")
    a = ap.parse_args()
    if a.against:
        return compare(a)
    if a.threads:
        torch.set_num_threads(a.threads)
    target = load_target(dtype="fp32")
    sets = {"cache": read_cache(a.data)} if a.data else {}
    if a.corpus:                      # the same first sequences, features computed by the cache's forward dtype
        from dspark_viz.cli.train import feature_dtype
        from dspark_viz.train.online import CorpusFeatures
        dt = feature_dtype()
        ft = target if dt == "fp32" else load_target(dtype=dt)
        sets["online"] = CorpusFeatures(ft, a.corpus, limit=400).seqs
    if not sets:
        ap.error("give --data (a feature cache), --corpus (features online) or both")
    tr = next(iter(sets.values()))
    cfg = DrafterConfig.for_target(target, a.algo, n_layers=a.n_layers)
    model = build_model(cfg, target, build_draft_vocab(tr, cfg.draft_vocab, set(target.stop_ids), target.vocab_size))
    init_from_target(model, target)
    tc = TrainConfig(**({"blocks_per_seq": a.blocks_per_seq} if a.blocks_per_seq else {}))
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], tc)
    nominal = tc.seqs_per_step * tc.blocks_per_seq * cfg.gamma
    gen = torch.Generator().manual_seed(0)
    precs = a.precision.split(",")
    runs = [(f, p) for f in sets for p in precs]
    key = lambda f, p: p if len(sets) == 1 else f"{f}/{p}"                                  # noqa: E731
    times: dict[str, list[float]] = {key(*r): [] for r in runs}
    done: dict[str, int] = {key(*r): 0 for r in runs}

    terms = {}
    if a.loss == "compiled":                  # the loss through torch.compile (train/fused.py)
        try:
            from dspark_viz.train.fused import compiled_terms
            terms = {"terms": compiled_terms()}
        except ImportError:                   # a checkout from before the compiled loss: eager
            pass

    def step(prec, feats=None):
        seqs = sets[feats] if feats else tr
        idx = torch.randint(len(seqs), (tc.seqs_per_step,), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            loss, st = batch_loss(model, [seqs[i] for i in idx], tc, gen, **terms)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return st.get("positions", nominal)            # trained (block, slot) pairs; older trainers: nominal

    for f, p in runs:
        step(p, f)                                           # warm-up
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        for p in precs:
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                step(p)
                step(p)
            print(f"== {p}\n" + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
        return
    for _ in range(a.repeats):
        for f, p in runs:
            for _ in range(a.steps):
                t0 = time.perf_counter()
                done[key(f, p)] += step(p, f)
                times[key(f, p)].append(time.perf_counter() - t0)
    res = {"cpu": cpu_name(), "threads": torch.get_num_threads(), "algo": a.algo, "features": list(sets),
           "loss": "compiled" if terms else "eager", "n_layers": a.n_layers, "blocks_per_seq": tc.blocks_per_seq, "seqs_per_step": tc.seqs_per_step,
           "results": {p: {"median_ms": round(1000 * statistics.median(t), 1),
                           "positions_per_step": round(done[p] / len(t)),
                           "positions_per_s": round(done[p] / sum(t))} for p, t in times.items()}}
    print(json.dumps(res, indent=1))
    if a.json:
        open(a.json, "w").write(json.dumps(res, indent=1) + "\n")


def compare(a: argparse.Namespace) -> None:
    """Both checkouts' trainers, alternating, each repeat a fresh process with the same arguments."""
    here = str(Path(__file__).resolve().parents[1])
    flags = ["--data", a.data, "--algo", a.algo, "--precision", a.precision, "--steps", str(a.steps),
             "--repeats", "1", "--n-layers", str(a.n_layers), "--loss", a.loss]
    flags += ["--threads", str(a.threads)] if a.threads else []
    flags += ["--blocks-per-seq", str(a.blocks_per_seq)] if a.blocks_per_seq else []
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for r in range(a.repeats):
        for name, path in ((("before", a.against), ("after", here)) if r % 2 == 0
                           else (("after", here), ("before", a.against))):
            out = subprocess.run([sys.executable, __file__, *flags], capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONPATH": str(Path(path).resolve())}).stdout
            runs[name].append(json.loads(out[out.rindex("\n{\n") + 1:] if "\n{\n" in out else out))
    res = {"cpu": runs["after"][0]["cpu"], "threads": runs["after"][0]["threads"], "algo": a.algo,
           "before": {"checkout": a.against}, "after": {"checkout": "this one"}}
    for name in runs:
        for prec in a.precision.split(","):
            pps = [x["results"][prec]["positions_per_s"] for x in runs[name]]
            res[name][prec] = {"positions_per_s_each": pps, "positions_per_s": round(statistics.median(pps))}
        res[name]["blocks_per_seq"] = runs[name][0].get("blocks_per_seq")
    for prec in a.precision.split(","):
        res[f"speedup_{prec}"] = round(res["after"][prec]["positions_per_s"] / res["before"][prec]["positions_per_s"], 2)
    print(json.dumps(res, indent=1))
    if a.json:
        open(a.json, "w").write(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
