"""Training throughput: positions per second of one drafter's optimiser steps on a feature cache.

    .venv/bin/python benchmarks/bench_train.py --data DIR --algo dspark --precision fp32,bf16 --steps 8

Positions = the (block, slot) pairs a step trains (a block running past a sequence's end counts its valid
slots only; an older trainer that does not report them counts blocks × γ). Repeats alternate the precisions (interleaved), so a busy machine slows
all of them alike; the median step time is reported. Run it on a quiet machine for figures to quote.
The cache's shards are read here directly (tensors only), so the same command times an older checkout of
the trainer on the same data: ``PYTHONPATH=OLD_CHECKOUT python benchmarks/bench_train.py …``.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
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
    ap.add_argument("--data", required=True)
    ap.add_argument("--algo", default="dspark")
    ap.add_argument("--precision", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-layers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--blocks-per-seq", type=int, default=None, help="default: the trainer's")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    target = load_target(dtype="fp32")
    tr = read_cache(a.data)
    cfg = DrafterConfig.for_target(target, a.algo, n_layers=a.n_layers)
    model = build_model(cfg, target, build_draft_vocab(tr, cfg.draft_vocab, set(target.stop_ids), target.vocab_size))
    init_from_target(model, target)
    tc = TrainConfig(**({"blocks_per_seq": a.blocks_per_seq} if a.blocks_per_seq else {}))
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], tc)
    nominal = tc.seqs_per_step * tc.blocks_per_seq * cfg.gamma
    gen = torch.Generator().manual_seed(0)
    precs = a.precision.split(",")
    times: dict[str, list[float]] = {p: [] for p in precs}
    done: dict[str, int] = {p: 0 for p in precs}

    def step(prec):
        idx = torch.randint(len(tr), (tc.seqs_per_step,), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            loss, st = batch_loss(model, [tr[i] for i in idx], tc, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return st.get("positions", nominal)            # trained (block, slot) pairs; older trainers: nominal

    for p in precs:
        step(p)                                              # warm-up
    for _ in range(a.repeats):
        for p in precs:
            for _ in range(a.steps):
                t0 = time.perf_counter()
                done[p] += step(p)
                times[p].append(time.perf_counter() - t0)
    res = {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(), "algo": a.algo,
           "n_layers": a.n_layers, "blocks_per_seq": tc.blocks_per_seq, "seqs_per_step": tc.seqs_per_step,
           "results": {p: {"median_ms": round(1000 * statistics.median(t), 1),
                           "positions_per_step": round(done[p] / len(t)),
                           "positions_per_s": round(done[p] / sum(t))} for p, t in times.items()}}
    print(json.dumps(res, indent=1))
    if a.json:
        open(a.json, "w").write(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
