"""A/B of a verification-path optimisation on the embedded target: one forward of n = 1…8 new tokens after a
256-token cache, the stock path vs the optimised one, interleaved in one process.

    python benchmarks/bench_matmul.py [--what matmul|attention|layers|kernel|fused|prefetch] [--dtype fp32|bf16]
                                      [--threads 1]
                                      [--repeats 9] [--json OUT.json]

``--what matmul`` (default): stock torch matmuls vs the few-row kernel (dspark_viz/fast/kernels.py);
``--what attention``: transformers' SDPA (repeat_kv) vs packed grouped-query attention (dspark_viz/fast/attention.py);
``--what layers``: transformers' decoder-layer forward vs the lean one (dspark_viz/fast/lean.py);
``--what kernel``: the kernel's row layout vs its packed outer-product form;
``--what fused``: the lean Python layer forward vs the fused native one (fast/csrc/decoder_layer.h, lean.unfused);
``--what prefetch``: the kernel without vs with its prefetch of the weight rows ahead (3+ tokens; kernels.no_prefetch;
the row layout and the bf16 dot product — bf16 in the AVX2 tiles prefetches on its own in both columns).

Prints the median ms per forward for each path, their ratio, the cost of n tokens relative to one token
(what the scheduler's SPS profile sees), and the largest logit difference between the two paths.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from dspark_viz.fast import attention, kernels, lean  # noqa: E402
from dspark_viz.model.target import load_target  # noqa: E402


def forward_ms(target, ctx: list[int], n: int, stock: bool, what: str = "matmul") -> tuple[float, torch.Tensor]:
    cache, _ = target.prefill(ctx)
    x = torch.tensor([[ctx[-1]] * n])                                    # (1, n)
    off = {"matmul": kernels.stock_linears, "attention": attention.stock_attention, "layers": lean.stock_layers,
           "kernel": lambda model: kernels.row_layout(kernels.load()), "fused": lean.unfused,
           "prefetch": lambda model: kernels.no_prefetch(kernels.load())}[what]
    with off(target.model) if stock else contextlib.nullcontext():
        t0 = time.perf_counter()
        out = target.forward(x, cache)
        dt = time.perf_counter() - t0
    return dt * 1e3, out.logits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--json", default=None)
    ap.add_argument("--what", choices=["matmul", "attention", "layers", "kernel", "fused", "prefetch"], default="matmul")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    target = load_target(device="cpu", dtype=a.dtype)
    if a.what in ("matmul", "kernel", "prefetch") and target.paths.matmul != "skinny-kernel":
        raise SystemExit(f"the kernel is not in use here ({target.paths.matmul}); nothing to compare")
    if a.what == "attention" and target.paths.attention != "packed-gqa":
        raise SystemExit(f"packed attention is not in use here ({target.paths.attention}); nothing to compare")
    if a.what == "fused" and not lean.fused(target.model):
        raise SystemExit("fused layers are not in use here; nothing to compare")
    if a.what == "layers" and target.paths.layers != "lean":
        raise SystemExit(f"lean layers are not in use here ({target.paths.layers}); nothing to compare")
    g = torch.Generator().manual_seed(0)
    ctx = torch.randint(100, 40000, (a.context,), generator=g).tolist()
    rows = []
    for n in range(1, 9):
        s_ms, k_ms, diff = [], [], 0.0
        for r in range(a.repeats):                                       # interleaved, order alternating
            for stock in ((True, False) if r % 2 == 0 else (False, True)):
                ms, logits = forward_ms(target, ctx, n, stock, a.what)
                (s_ms if stock else k_ms).append(ms)
                if stock:
                    ref = logits
                else:
                    kern = logits
            diff = max(diff, float((ref - kern).abs().max()))
        rows.append(dict(n=n, stock_ms=statistics.median(s_ms), fast_ms=statistics.median(k_ms), max_abs_logit_diff=diff))
    one_s, one_f = rows[0]["stock_ms"], rows[0]["fast_ms"]
    new = {"matmul": "kernel", "attention": "packed", "layers": "lean", "kernel": "tiles", "fused": "fused",
           "prefetch": "prefetch"}[a.what]
    print(f"embedded target, {a.dtype}, {a.threads} thread(s), {a.context}-token cache, median of {a.repeats}, "
          f"A/B: {a.what} (matmuls: {target.paths.matmul}, attention: {target.paths.attention}, "
          f"layers: {target.paths.layers})")
    old = {"kernel": "rows", "fused": "lean", "prefetch": "none"}.get(a.what, "stock")
    print(f"{'n':>2} {old + ' ms':>9} {new + ' ms':>10} {new + '/' + old:>13} {old + ' n/1':>10} {new + ' n/1':>11} {'max|Δlogit|':>12}")
    for r in rows:
        print(f"{r['n']:>2} {r['stock_ms']:9.1f} {r['fast_ms']:10.1f} {r['fast_ms'] / r['stock_ms']:13.2f} "
              f"{r['stock_ms'] / one_s:10.2f} {r['fast_ms'] / one_f:11.2f} {r['max_abs_logit_diff']:12.1e}")
    if a.what == "prefetch":
        print("(1–2 tokens take no prefetch in either column: only 3+ rows of x prefetch)")
        if a.dtype == "bf16" and kernels.load().isa() != "avx512+bf16":
            print("(bf16 runs the AVX2 tiles here, which prefetch in both columns: the columns differ only by noise)")
    if a.json:
        Path(a.json).write_text(json.dumps(dict(what=a.what, dtype=a.dtype, threads=a.threads, context=a.context, repeats=a.repeats,
                                                rows=rows),
                                           indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
