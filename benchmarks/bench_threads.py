"""1 → N torch threads on the few-token path: n-token verification forwards and whole speculative decodes,
the thread counts interleaved in one process (the fast path splits weight rows and query rows across torch's
intra-op threads).

    python benchmarks/bench_threads.py [--threads 1,2] [--dtype fp32|bf16] [--repeats 9] [--json OUT.json]

Prints, per n = 1 … 8, the median ms of one forward after a 256-token cache at each thread count and the
speed-up; then the median tok/s of DSpark + hardware-aware decodes (T = 0, 64 new tokens, three prompts of
the shipped evaluation suite) at each thread count. The machine and the per-size paths are printed with it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from dspark_viz.datasets.prompts import load_prompts  # noqa: E402
from dspark_viz.decode import speculative_generate  # noqa: E402
from dspark_viz.drafters import load_drafter, speed_only  # noqa: E402
from dspark_viz.fast.tune import cpu_model_and_flags  # noqa: E402
from dspark_viz.cost import profile_for  # noqa: E402
from dspark_viz.model.target import load_target  # noqa: E402
from dspark_viz.scheduler import HardwareAware  # noqa: E402
from dspark_viz.settings import assets  # noqa: E402


def forward_ms(target, threads: list[int], repeats: int, ctx_len: int = 256) -> dict[int, dict[int, float]]:
    ids = (target.encode("The quick brown fox jumps over the lazy dog. ") * ctx_len)[:ctx_len]
    cache, _ = target.prefill(ids)
    out: dict[int, dict[int, list[float]]] = {n: {t: [] for t in threads} for n in range(1, 9)}
    for rep in range(repeats + 1):
        for n in range(1, 9):
            for th in threads if rep % 2 == 0 else list(reversed(threads)):
                torch.set_num_threads(th)
                x = torch.tensor([ids[-n:]])
                t0 = time.perf_counter()
                target.forward(x, cache)
                dt = time.perf_counter() - t0
                target.crop(cache, ctx_len - 1)
                if rep:
                    out[n][th].append(dt * 1e3)
    return {n: {th: statistics.median(v) for th, v in d.items()} for n, d in out.items()}


def decode_tok_s(target, threads: list[int], prompts: list[str], repeats: int = 2) -> dict[int, float]:
    drafter = speed_only(load_drafter("dspark", target))
    sps = profile_for(target)
    speed: dict[int, list[float]] = {t: [] for t in threads}
    for rep in range(repeats + 1):
        for i, p in enumerate(prompts):
            for th in threads if (rep + i) % 2 == 0 else list(reversed(threads)):
                torch.set_num_threads(th)
                t0 = time.perf_counter()
                tr = speculative_generate(target, drafter, p, policy=HardwareAware(), sps=sps, max_new_tokens=64)
                if rep:
                    speed[th].append(tr.n_generated / (time.perf_counter() - t0))
    return {th: statistics.median(v) for th, v in speed.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    target = load_target(device="cpu", dtype=a.dtype)
    cpu, flags = cpu_model_and_flags()
    print(f"{cpu} · {' '.join(flags)} · {a.dtype} · paths: {target.paths.choice}")
    fw = forward_ms(target, threads, a.repeats)
    print("n   " + "".join(f"{t:>2} thr ms  " for t in threads) + f"speed-up {threads[0]}→{threads[-1]}")
    for n, d in fw.items():
        print(f"{n:<4}" + "".join(f"{d[t]:9.2f}  " for t in threads) + f"{d[threads[0]] / d[threads[-1]]:8.2f}")
    recs = load_prompts(assets("prompts", "eval.jsonl"))
    prompts = [next(r["turns"][0] for r in recs if r.get("domain") == d) for d in ("math", "code", "chat")]
    dec = decode_tok_s(target, threads, prompts)
    print("decode tok/s (DSpark, hardware-aware, T = 0): " + ", ".join(f"{t} thr {v:.1f}" for t, v in dec.items())
          + f"; speed-up {dec[threads[-1]] / dec[threads[0]]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"cpu": cpu, "flags": flags, "dtype": a.dtype, "paths": target.paths.choice,
                                            "forward_ms": fw, "decode_tok_s": dec}, indent=1))


if __name__ == "__main__":
    main()
