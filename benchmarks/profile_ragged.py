"""Where a ragged forward's time goes: S decode rows (one per slot) at a context of C tokens, on the target.

    .venv/bin/python benchmarks/profile_ragged.py --slots 64 --context 150 --dtype bf16 --threads 2

Prints the forward's milliseconds (median of --repeats) and, from torch's profiler, the products' share
(``_linear_pointwise`` / ``linear``), the other torch ops', and the rest — the native calls (``ragged_attention``,
``rms_norm_rows``), which the profiler does not see. Run it on a quiet machine."""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from dspark_viz.fast import ragged
from dspark_viz.model.target import load_target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--context", type=int, default=150)
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    target = load_target(dtype=a.dtype)
    fwd = ragged.forward_for(target)
    cache = fwd.cache(a.slots, a.context + 8)
    ids = torch.randint(0, 1000, (a.slots,), generator=torch.Generator().manual_seed(0))
    slot, pos, out = torch.arange(a.slots), torch.full((a.slots,), a.context), torch.arange(a.slots)
    for _ in range(3):
        fwd(cache, ids, slot, pos, out)
    each = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        fwd(cache, ids, slot, pos, out)
        each.append((time.perf_counter() - t0) * 1e3)
    with profile(activities=[ProfilerActivity.CPU]) as p:
        for _ in range(3):
            fwd(cache, ids, slot, pos, out)
    ops = {e.key: e.self_cpu_time_total / 3e3 for e in p.key_averages()}                 # ms per forward
    linear = sum(v for k, v in ops.items() if "linear" in k)
    other = sum(ops.values()) - linear
    ms = statistics.median(each)
    print(json.dumps({"slots": a.slots, "context": a.context, "dtype": a.dtype, "threads": a.threads,
                      "forward_ms": round(ms, 1), "products_ms": round(linear, 1), "other_torch_ops_ms": round(other, 1),
                      "native_ms": round(ms - linear - other, 1)}, indent=1))


if __name__ == "__main__":
    main()
