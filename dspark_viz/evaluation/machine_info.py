"""What a benchmark ran on: the machine, the versions and the target's fast paths, as one flat dict.

The dict is stored in every bench JSON as ``machine`` (its keys are read by other tools; keep them):
cpu, cores, torch_threads, omp_spincount (the process's GOMP_SPINCOUNT: settings.openmp_defaults picks a short spin
when another process held a core at start, which slows 2-thread decoding), torch, transformers, python, platform;
with a target also target, device,
dtype, matmul (stock | lm-head-wxt | skinny-kernel), attention (sdpa | packed-gqa), layers
(stock | lean | lean+fused), stack (with lean layers), draft_diagnostics (the neural drafters' chart-only top-k: off in the bench),
bf16_gemm on CPU (native | widened), kernel with the few-row kernel (rows | tiles), gpu on CUDA;
cpu_flags (the instruction sets that matter: avx2 … avx512_bf16, amx), llc_MiB (the last-level cache; None where
the system does not say), default_dtype (this machine's
chosen CPU dtype, fast/tune.py), paths.choice and paths.sizes as path_choice and size_paths (per few-token size: fast, fast-avx512-fma, fast-avx2 or stock).
A run whose JSON lacks ``kernel`` used the row layout; ``stack`` (straight-line: fast/stack.py around lean layers) is
absent from runs that called transformers' model forward around them.

The memory floor of plain decoding (``read_bandwidth``, ``weight_bytes``, ``floor_ms``): a one-token step reads
every weight once, so it cannot take less than (bytes of the weights one forward reads) ÷ (the machine's streaming
read bandwidth) — unless the weights fit the last-level cache (``last_level_cache_bytes``): then a step reads them
from there, and plain decoding can come close to the floor or beat it. Two machines with the same CPU name can
differ here, and so can one virtual machine from minute to minute: on a shared host the read rate of the same
buffer has been seen to switch between ~34 and ~67 GB/s within seconds. ``ReadProbe`` reads one kept buffer at
any moment, so a benchmark can take the bandwidth right beside the decode it compares with it.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from ..fast import FastPaths, tune
from ..model.target import DEFAULT_ID
from ..fast.kernels import native_bf16_gemm
from ..fast.lean import fused

try:
    import resource
except ImportError:                                 # not on Windows
    resource = None


def machine_info(target=None) -> dict:
    """The machine fingerprint of a bench run on ``target`` (keys in the module docstring)."""
    import transformers

    cpu, flags = tune.cpu_model_and_flags()
    info = dict(cpu=cpu, cores=os.cpu_count(), torch_threads=torch.get_num_threads(),
                omp_spincount=os.environ.get("GOMP_SPINCOUNT"), torch=torch.__version__,
                transformers=transformers.__version__, python=platform.python_version(),
                platform=platform.platform(), cpu_flags=flags, default_dtype=tune.kept_default_dtype(DEFAULT_ID))
    llc = last_level_cache_bytes()
    info["llc_MiB"] = round(llc / 2 ** 20) if llc else None
    if target is not None:
        paths = getattr(target, "paths", None) or FastPaths("stock", "sdpa", "stock")
        info.update(target=target.name, device=str(target.device), dtype=str(target.dtype).replace("torch.", ""),
                    matmul=paths.matmul, attention=paths.attention, layers=paths.layers)
        info["draft_diagnostics"] = "off"              # the bench loads neural drafters speed_only
        if info["layers"] == "lean":                    # lean layers as fused native calls where built
            info["layers"] = "lean+fused" if fused(target.model) else "lean"
            info["stack"] = "straight-line"              # fast/stack.py around the layers
        if str(target.device) == "cpu":                 # bf16 products: torch's GEMM or widened to fp32
            info["bf16_gemm"] = "native" if native_bf16_gemm() else "widened"
            if info["matmul"] == "skinny-kernel":       # the few-row kernel's layout: csrc/packed_*.h
                info["kernel"] = "packed"
            info["path_choice"] = paths.choice
            info["size_paths"] = {str(n): p for n, p in sorted(paths.sizes.items())}
        if str(target.device).startswith("cuda"):
            info["gpu"] = torch.cuda.get_device_name(target.device)
    return info


def last_level_cache_bytes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """The size of the CPU's largest-level cache in bytes, as Linux reports it under ``root`` (index*/level, size
    such as "491520K"); None where there is no such folder (other systems) or it cannot be read."""
    best = None
    for d in sorted(Path(root).glob("index*")):
        try:
            level = int((d / "level").read_text().strip())
            size = (d / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}.get(size[-1:], 1)
        digits = size.rstrip("KMG")
        if digits.isdigit() and (best is None or level > best[0]):
            best = (level, int(digits) * scale)
    return best[1] if best else None


READ_BUFFERS = 5                                    # read_bandwidth's default: the median of this many


def read_bandwidth(gib: float = 1.0, repeats: int = 5, buffers: int = READ_BUFFERS) -> float:
    """The machine's streaming read bandwidth in bytes/s: per buffer the best of ``repeats`` sums over a ``gib``
    GiB fp32 buffer (≥ 1 GiB, far beyond any cache), at torch's current thread count (the decode's); the median
    over ``buffers`` buffers allocated one after another. On a VM the same process can read one buffer at
    twice the speed of the next (measured: 29–54 GB/s, eight buffers in a row on one 2-core EPYC VM): where
    the pages land matters, so one buffer alone would make the floor a draw."""
    if gib < 1.0 or repeats < 1 or buffers < 1:
        raise ValueError(f"read_bandwidth needs buffers of ≥ 1 GiB, ≥ 1 repeat and ≥ 1 buffer, got {gib} GiB × "
                         f"{repeats} × {buffers}")
    rates = []
    for _ in range(buffers):
        probe = ReadProbe(gib)                                                  # a buffer of its own, warmed up
        rates.append(probe(repeats))
        del probe
    return statistics.median(rates)


class ReadProbe:
    """One ``gib`` GiB fp32 buffer (≥ 1 GiB, every page touched), kept; calling the probe returns the streaming
    read bandwidth in bytes/s now: the best of ``repeats`` sums over it at torch's current thread count."""

    def __init__(self, gib: float = 1.0):
        if gib < 1.0:
            raise ValueError(f"ReadProbe needs a buffer of ≥ 1 GiB, got {gib} GiB")
        self.buf = torch.ones(int(gib * 2 ** 30) // 4, dtype=torch.float32)           # (n,)
        self.buf.sum()                                                                 # first read: warm-up

    def __call__(self, repeats: int = 3) -> float:
        if repeats < 1:
            raise ValueError(f"ReadProbe needs ≥ 1 read, got {repeats}")
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            self.buf.sum()
            best = min(best, time.perf_counter() - t0)
        return self.buf.numel() * self.buf.element_size() / best


def peak_gemm_flops(dtype: torch.dtype = torch.float32, n: int = 2048, repeats: int = 5) -> float:
    """The machine's arithmetic ceiling in FLOP/s at ``dtype`` and torch's current thread count: the best of
    ``repeats`` large square products (n × n · n × n, 2n³ FLOPs) through torch's own GEMM — on CPUs with AMX or
    AVX512-BF16 a bf16 product runs on those units."""
    if n < 256 or repeats < 1:
        raise ValueError(f"peak_gemm_flops needs n ≥ 256 and ≥ 1 repeat, got {n} × {repeats}")
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=g).to(dtype) for _ in range(2))
    a @ b                                                                          # warm-up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def weight_bytes(target) -> int:
    """Bytes of every weight one forward of ``target`` reads: each parameter tensor once (a tied LM head and
    input embedding count once); an untied input embedding only gives one row per token and is left out."""
    model = target.model
    emb = model.get_input_embeddings().weight if hasattr(model, "get_input_embeddings") else None
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    head_w = getattr(head, "weight", None)
    seen, total = set(), 0
    for p in model.parameters():
        ptr = p.data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        if emb is not None and ptr == emb.data_ptr() and (head_w is None or head_w.data_ptr() != ptr):
            continue                                                            # untied: a gather, not a read
        total += p.numel() * p.element_size()
    return total


def floor_ms(nbytes: int, bandwidth: float) -> float:
    """The memory floor of a one-token step in ms: ``nbytes`` (``weight_bytes``: what one forward reads) ÷
    ``bandwidth`` (bytes/s)."""
    return 1e3 * nbytes / bandwidth


def kernel_note(machine: dict) -> str:
    """', kernel tiles' etc. for a run on the few-row kernel (a machine without ``kernel``: rows), else ''."""
    if machine.get("matmul") != "skinny-kernel":
        return ""
    return f", kernel {machine.get('kernel', 'rows')}"


def peak_rss_mb() -> float | None:
    """Peak resident memory of this process so far (MB), or None where the OS does not say."""
    if resource is None:
        return None
    try:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except OSError:
        return None
    return round(kb / 1024 if sys.platform != "darwin" else kb / 2 ** 20, 1)


def course_stamp() -> str:
    """One line for a notebook's stored outputs: the CPU, its vector instructions, torch, threads and whether the
    CPU fast path is on — the facts that change a notebook's measured numbers."""
    from ..fast import kernels, lean

    cpu, flags = tune.cpu_model_and_flags()
    isa = ("AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2") + (
        " + BF16" if {"avx512_bf16", "amx_bf16"} & set(flags) else "")
    fast = "on" if kernels.enabled() and lean.enabled() and lean.fused_enabled() else "off"
    return (f"computed on {cpu} ({isa}), {os.cpu_count()} cores, torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s), CPU fast path {fast}")
