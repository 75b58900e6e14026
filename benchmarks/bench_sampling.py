"""Corpus sampling throughput: answer tokens per CPU-second of ``train.sample.sample_rows`` (the batched sampler
behind ``dspark-viz corpus``), optionally alternating with an older checkout's sampler on the same prompts.

    .venv/bin/python benchmarks/bench_sampling.py --prompts 64 --max-new-tokens 192
    .venv/bin/python benchmarks/bench_sampling.py --prompts 64 --max-new-tokens 192 --against OLD_CHECKOUT

CPU time of this process (``time.process_time``), one thread by default, so another process on the other core
disturbs the figure less than it would wall time; each repeat reverses the order of the two samplers. Prompts
are the self-written training requests (``assets/prompts/magpie.jsonl.gz``), T = 0.7 as the corpus samples.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import statistics
import time
from pathlib import Path

import torch

from dspark_viz.model.target import load_target
from dspark_viz.train import sample as this_sampler

ROOT = Path(__file__).resolve().parents[1]


def load_sampler(checkout: str):
    """An older checkout's train/sample.py as a module (it runs with this checkout's target)."""
    spec = importlib.util.spec_from_file_location("sample_before", Path(checkout) / "dspark_viz/train/sample.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--against", default=None, metavar="OLD_CHECKOUT")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    target = load_target(dtype=a.dtype)
    with gzip.open(ROOT / "assets/prompts/magpie.jsonl.gz", "rt", encoding="utf-8") as f:
        recs = [json.loads(line) for _, line in zip(range(a.prompts), f)]
    prompts = [target.chat_ids(r["turns"][0]) for r in recs]
    samplers = {"this": this_sampler}
    if a.against:
        samplers = {"before": load_sampler(a.against), "this": this_sampler}
    rates: dict[str, list[float]] = {k: [] for k in samplers}
    for rep in range(a.repeats):
        for name in (list(samplers) if rep % 2 == 0 else list(samplers)[::-1]):
            c0 = time.process_time()
            out = samplers[name].sample_rows(target, prompts, 0.7, a.max_new_tokens, torch.Generator().manual_seed(rep))
            rates[name].append(sum(map(len, out)) / (time.process_time() - c0))
    res = {"prompts": len(prompts), "max_new_tokens": a.max_new_tokens, "dtype": a.dtype, "threads": a.threads,
           "against": a.against,
           "tokens_per_cpu_s": {k: {"each": [round(x, 1) for x in v], "median": round(statistics.median(v), 1)}
                                for k, v in rates.items()}}
    if a.against:
        res["ratio"] = round(res["tokens_per_cpu_s"]["this"]["median"] / res["tokens_per_cpu_s"]["before"]["median"], 2)
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
