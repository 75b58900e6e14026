"""Where a few-token forward's time goes on this machine: the roofline, the kernel's arithmetic floor and the
measured forward, for n = 1…64 new tokens (the embedded target at one dtype, at the decode's thread count).

    python benchmarks/bench_roofline.py [--dtype bf16|fp32] [--threads 2] [--repeats 7] [--context 128] [--json OUT]

A verification forward reads every weight once whatever n is, and multiplies each weight into n rows. So its
time has two floors: the memory floor (the weights' bytes ÷ the read bandwidth), the same for every n, and the
arithmetic floor, which grows with n. The machine's is 2 · weights · n FLOPs ÷ its peak GEMM rate at this dtype and
thread count (``machine_info.peak_gemm_flops``: a 2048² torch product, on AMX or AVX512-BF16 where the CPU has them);
the roofline is the larger of that and the memory floor, and "÷ roofline" says how close the forward comes to it.
The kernel's own arithmetic floor (the weights ÷ the rate at which it multiplies weights into n rows from the cache)
says how much of the gap is the kernel's. Each round measures, interleaved so that a shared machine's drift lands on
every figure alike:

- read: the streaming read bandwidth (machine_info.ReadProbe: a 1 GiB buffer summed, best of 3);
- stream: the kernel at n = 1 over weight matrices 4× the last-level cache in all (bytes ÷ seconds): how close the
  kernel's own reading comes to the read bandwidth;
- arithmetic at n: the kernel over one weight matrix of half the last-level cache, called again and again so its
  weights come from the cache: weights multiplied per second at n rows;
- forward at n: one target forward of n tokens after a ``--context``-token cache, on the path this machine chose.

Reported per n (medians over the rounds): the memory floor, the machine's arithmetic floor, the roofline, the
kernel's arithmetic floor, the forward, the forward ÷ the roofline (1 at the machine's limit), ÷ the larger of the
memory floor and the kernel's floor (1 where reading and the kernel's arithmetic overlap perfectly and nothing else
costs) and ÷ those two added (about 1 where they do not overlap at all). A machine whose read rate switches state (a shared VM) shows it in the spread of ``read``; the JSON
keeps every round.
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

from dspark_viz.evaluation.machine_info import (  # noqa: E402
    ReadProbe,
    last_level_cache_bytes,
    machine_info,
    peak_gemm_flops,
    weight_bytes,
)
from dspark_viz.fast import kernels, tune  # noqa: E402
from dspark_viz.model.target import load_target  # noqa: E402

WIDTHS = tuple(range(1, 9)) + (12, 16, 24, 32, 48, 64)
FALLBACK_LLC = 8 * 2 ** 20                   # bytes, where the cache size cannot be read


def seconds(fn, calls: int) -> float:
    """Median seconds of ``calls`` calls of fn."""
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7, help="rounds of every measurement (default 7)")
    ap.add_argument("--context", type=int, default=128, help="tokens in the cache before each forward")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.threads < 1 or a.repeats < 1 or a.context < 1:
        raise SystemExit("--threads, --repeats and --context must be ≥ 1")
    torch.set_num_threads(a.threads)
    target = load_target(device="cpu", dtype=a.dtype)
    ext = kernels.load()
    if ext is None or target.paths.matmul != "skinny-kernel":
        raise SystemExit(f"the few-row kernel is not in use here ({target.paths.matmul}); nothing to measure")
    dt, d = target.dtype, target.model.config.hidden_size
    esize = torch.empty(0, dtype=dt).element_size()
    nbytes = weight_bytes(target)
    n_weights = nbytes / esize
    llc = last_level_cache_bytes() or FALLBACK_LLC
    rows = max(64, int(llc // 2 // (d * esize)) // 64 * 64)
    hot = torch.randn(rows, d).to(dt)                                           # (rows, d): fits the cache
    hot_bytes = rows * d * esize
    n_cold = max(8, -(-4 * llc // hot_bytes))
    cold = [torch.randn(rows, d).to(dt) for _ in range(n_cold)]                 # n_cold × (rows, d): does not
    xs = {n: torch.randn(n, d).to(dt) for n in WIDTHS}                           # (n, d)
    ids = (target.encode("The quick brown fox jumps over the lazy dog. ") * a.context)[:a.context]
    cache, _ = target.prefill(ids)
    probe = ReadProbe()

    def forward(n: int) -> float:                                             # n tokens after the context
        t0 = time.perf_counter()
        target.forward(torch.tensor([ids[:n]]), cache)
        dt_ = time.perf_counter() - t0
        target.crop(cache, a.context)
        return dt_

    def stream() -> float:
        t0 = time.perf_counter()
        for w in cold:
            ext.skinny_linear(xs[1], w)
        return n_cold * hot_bytes / (time.perf_counter() - t0)

    for n in WIDTHS:                                                            # warm-up: every call once
        forward(n)
        ext.skinny_linear(xs[n], hot)
    stream()
    calls = max(20, int(2e-3 / max(seconds(lambda: ext.skinny_linear(xs[8], hot), 5), 1e-6)))
    peaks = []
    path = target.paths.at(1)
    rounds = []
    for r in range(a.repeats):
        order = WIDTHS if r % 2 == 0 else tuple(reversed(WIDTHS))
        with tune.run_on(target.model, path):
            rec = {"read_GBps": probe(3) / 1e9, "stream_GBps": stream() / 1e9, "weights_per_s": {}, "forward_ms": {}}
        rec["peak_GFLOPs"] = peak_gemm_flops(dt, repeats=3) / 1e9
        for n in order:
            with tune.run_on(target.model, target.paths.at(n)):              # the instruction set n tokens take
                rec["weights_per_s"][n] = rows * d / seconds(lambda: ext.skinny_linear(xs[n], hot), calls)
            rec["forward_ms"][n] = 1e3 * forward(n)
        rounds.append(rec)
        print(f"round {r + 1}/{a.repeats}: read {rec['read_GBps']:.1f} GB/s, kernel stream {rec['stream_GBps']:.1f} "
              f"GB/s, forward n=1 {rec['forward_ms'][1]:.2f} ms", flush=True)

    med = statistics.median
    read = med(r["read_GBps"] for r in rounds)
    peak = max(r["peak_GFLOPs"] for r in rounds)                               # the best the machine showed
    mem_ms = nbytes / (read * 1e9) * 1e3
    table = []
    for n in WIDTHS:
        rate = med(r["weights_per_s"][n] for r in rounds)
        arith_ms = n_weights / rate * 1e3                                       # the kernel's own rate
        peak_ms = 2 * n_weights * n / (peak * 1e9) * 1e3                        # the machine's
        roof = max(mem_ms, peak_ms)
        fwd = med(r["forward_ms"][n] for r in rounds)
        table.append(dict(n=n, memory_floor_ms=mem_ms, peak_floor_ms=peak_ms, roofline_ms=roof,
                          arithmetic_floor_ms=arith_ms, forward_ms=fwd, forward_over_roofline=fwd / roof,
                          forward_over_floor=fwd / max(mem_ms, arith_ms),
                          forward_over_sum=fwd / (mem_ms + arith_ms), gweights_per_s=rate / 1e9,
                          bound="arithmetic" if peak_ms > mem_ms else "memory"))
    reads = [r["read_GBps"] for r in rounds]
    streams = [r["stream_GBps"] for r in rounds]
    with tune.run_on(target.model, path):
        isa = ext.isa()                                                         # inside: the variant this path runs
    isa = isa.replace("+bf16", "") if a.dtype == "fp32" else isa           # the bf16 dot product serves bf16 only
    print(f"\n{target.name} at {a.dtype}, {a.threads} threads, path {path} (kernel {isa}): {nbytes / 1e6:.0f} MB of "
          f"weights per forward; read {read:.1f} GB/s (rounds {min(reads):.1f}–{max(reads):.1f}), the kernel streaming "
          f"{med(streams):.1f} GB/s at n = 1 ({min(streams):.1f}–{max(streams):.1f}); arithmetic on a "
          f"{hot_bytes / 2 ** 20:.1f} MiB matrix (last-level cache {llc / 2 ** 20:.0f} MiB); peak GEMM {peak:.0f} GFLOP/s "
          f"(a 2048² torch product at {a.dtype}, best of the rounds)")
    print("| n | memory floor ms | peak-GEMM floor ms | roofline ms | kernel floor ms | forward ms | ÷ roofline | "
          "÷ larger floor | ÷ both floors added | bound |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for t in table:
        print(f"| {t['n']} | {t['memory_floor_ms']:.2f} | {t['peak_floor_ms']:.2f} | {t['roofline_ms']:.2f} | "
              f"{t['arithmetic_floor_ms']:.2f} | {t['forward_ms']:.2f} | {t['forward_over_roofline']:.2f} | "
              f"{t['forward_over_floor']:.2f} | {t['forward_over_sum']:.2f} | {t['bound']} |")
    if a.json:
        out = dict(command="python benchmarks/bench_roofline.py " + " ".join(sys.argv[1:]), machine=machine_info(target),
                   dtype=a.dtype, threads=a.threads, context=a.context, weight_MB=nbytes / 1e6,
                   hot_matrix_MiB=hot_bytes / 2 ** 20, llc_MiB=llc / 2 ** 20, kernel_isa=isa, path=path,
                   peak_GFLOPs=peak,
                   table=table, rounds=rounds)
        Path(a.json).write_text(json.dumps(out, indent=1), encoding="utf-8")
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
