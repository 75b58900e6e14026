"""The straight-line model forward (dspark_viz/fast/stack.py) against transformers' model forward on the same
fused layers: n-token forwards (n = 1, 2, 4, 8) after a prompt's cache, both variants interleaved in one process.

    python benchmarks/bench_stack.py [--dtype fp32|bf16] [--threads 2] [--rounds 4] [--repeats 15]

Prints per n the median ms of one forward through ``model(...)`` and through the stack, and their ratio (the
same bits either way: tests/test_stack.py). Pause other jobs first: a busy core scrambles the figures.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from dspark_viz.fast import stack  # noqa: E402
from dspark_viz.fast.tune import cpu_model_and_flags  # noqa: E402
from dspark_viz.model.target import load_target  # noqa: E402


def one(target, cache, P: int, n: int, on: bool, repeats: int) -> float:
    """Median ms of an n-token forward after the P cached positions, through the stack (on) or model(...)."""
    real = stack.applies
    stack.applies = real if on else (lambda *a, **k: None)
    try:
        ts = []
        ids = torch.tensor([[1000 + 611 * i for i in range(n)]])
        for _ in range(repeats):
            target.crop(cache, P)
            t0 = time.perf_counter()
            target.forward(ids, cache, last_only=n == 1, features=n > 1)
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e3
    finally:
        stack.applies = real


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4, help="interleaved rounds per n (the median is printed)")
    ap.add_argument("--repeats", type=int, default=15, help="forwards per round")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    t = load_target(dtype=a.dtype, tune_paths=False)
    if stack.layer_forwards(t.model) is None:
        sys.exit(f"the stack does not apply here (layers: {t.paths.layers}, matmul: {t.paths.matmul})")
    prompt = t.chat_ids("Explain how a hash map works, with an example in Python.")
    cache, _ = t.prefill(prompt)
    cpu, flags = cpu_model_and_flags()
    print(f"{cpu} ({', '.join(flags)}); {a.dtype}, {a.threads} threads, context {len(prompt)}")
    for n in (1, 2, 4, 8):
        hf, ours = [], []
        for _ in range(a.rounds):
            hf.append(one(t, cache, len(prompt), n, False, a.repeats))
            ours.append(one(t, cache, len(prompt), n, True, a.repeats))
        h, o = statistics.median(hf), statistics.median(ours)
        print(f"n = {n}: model(...) {h:6.2f} ms   stack {o:6.2f} ms   ×{h / o:.3f}")


if __name__ == "__main__":
    main()
