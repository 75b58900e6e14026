"""Corpus sampling throughput: answer tokens per second of ``train.sample`` (the sampler behind ``dspark-viz corpus
answers``), against the machine's limit, optionally alternating with an older checkout's sampler on the same prompts.

    .venv/bin/python benchmarks/bench_sampling.py --prompts 256 --batch 64 --max-new-tokens 192
    .venv/bin/python benchmarks/bench_sampling.py --against OLD_CHECKOUT --json docs/data/sampling_CPU.json

Each sampler answers the same prompts (the self-written training requests, ``assets/prompts/magpie.jsonl.gz``;
T = 0.7 as the corpus samples): this checkout's ``sample_rows`` with ``--batch`` slots, an older checkout's in
chunks of ``--batch`` prompts (its ``sample_rows`` had no slots); each repeat reverses their order. Reported per
sampler: sampled answer tokens per wall second (the median of the repeats) and the finished ones (answers that end
on the stop token, what the corpus trains on). The limit: 2 × parameters FLOPs a token ÷ the peak GEMM rate of
this machine at the dtype and thread count (``machine_info.peak_gemm_flops``, a 2048² product); a sampler's share
of it says how far from the arithmetic ceiling it runs. Run it on a quiet machine (no other job on the cores).
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from dspark_viz.evaluation.machine_info import machine_info, peak_gemm_flops, read_bandwidth
from dspark_viz.model.target import load_target
from dspark_viz.train import sample as this_sampler

ROOT = Path(__file__).resolve().parents[1]


def load_sampler(checkout: str):
    """An older checkout's train/sample.py as a module of this package (its relative imports resolve here)."""
    name = "dspark_viz.train._sample_before"
    spec = importlib.util.spec_from_file_location(name, Path(checkout) / "dspark_viz/train/sample.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run(mod, target, prompts, max_new: int, batch: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    if mod is this_sampler:
        return mod.sample_rows(target, prompts, 0.7, max_new, g, slots=batch)
    out = []
    for i in range(0, len(prompts), batch):
        out += mod.sample_rows(target, prompts[i:i + batch], 0.7, max_new, g)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64, help="slots (this sampler) / batch size (an older one)")
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip", type=int, default=0, help="start this many prompts into the file")
    ap.add_argument("--against", default=None, metavar="OLD_CHECKOUT")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    target = load_target(dtype=a.dtype)
    with gzip.open(ROOT / "assets/prompts/magpie.jsonl.gz", "rt", encoding="utf-8") as f:
        recs = [json.loads(line) for _, line in zip(range(a.skip + a.prompts), f)][a.skip:]
    prompts = [target.chat_ids(r["turns"][0]) for r in recs]
    samplers = {"before": load_sampler(a.against), "this": this_sampler} if a.against else {"this": this_sampler}
    rates: dict[str, list[float]] = {k: [] for k in samplers}
    finished: dict[str, list[float]] = {k: [] for k in samplers}
    run(this_sampler, target, prompts[:4], 8, a.batch, 0)                       # build and warm the paths
    for rep in range(a.repeats):
        for name in (list(samplers) if rep % 2 == 0 else list(samplers)[::-1]):
            t0 = time.perf_counter()
            out = run(samplers[name], target, prompts, a.max_new_tokens, a.batch, rep)
            secs = time.perf_counter() - t0
            rates[name].append(sum(map(len, out)) / secs)
            finished[name].append(sum(len(x) for x in out if x and x[-1] in target.stop_ids) / secs)
            print(f"repeat {rep} {name}: {rates[name][-1]:.1f} tok/s", flush=True)
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    peak = peak_gemm_flops(dt)
    n_params = sum(p.numel() for p in target.model.parameters())
    limit = peak / (2 * n_params)
    res = {"machine": machine_info(target), "prompts": len(prompts), "batch": a.batch,
           "max_new_tokens": a.max_new_tokens, "dtype": a.dtype, "threads": a.threads, "against": a.against,
           "peak_gemm_tflops": round(peak / 1e12, 3), "params": n_params,
           "limit_tokens_per_s": round(limit, 1), "read_bandwidth_GBps": round(read_bandwidth() / 1e9, 1),
           "tokens_per_s": {k: {"each": [round(x, 1) for x in v], "median": round(statistics.median(v), 1),
                                "finished_median": round(statistics.median(finished[k]), 1),
                                "share_of_limit": round(statistics.median(v) / limit, 4)}
                            for k, v in rates.items()}}
    if a.against:
        res["ratio"] = round(res["tokens_per_s"]["this"]["median"] / res["tokens_per_s"]["before"]["median"], 2)
    print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
