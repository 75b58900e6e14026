"""The machine decides: per dtype, which variant of the few-token path this machine runs fastest — measured
once, kept in the cache with a fingerprint of the machine.

Legend: n tokens in one target forward (1 … 8: a decode step, or the anchor plus up to 7 drafts), ms median
milliseconds.

Paths: ``fast`` (the project's few-token path; its kernel in AVX-512 where the CPU has it: 16-output blocks by
FMAs, bf16 by vdpbf16ps with AVX512-BF16), ``fast-avx512-fma`` (bf16 by AVX-512 FMAs of the widened weights; measured
only where the CPU has AVX512-BF16), ``fast-avx2`` (the AVX2 kernel; measured only where an AVX-512 variant exists)
and ``stock`` (torch / transformers). kernels.VARIANTS maps each to its kernel variant; the one chosen also runs
the live engine's exact ragged forward (fast/ragged.py).
One path per dtype, never one per size: each variant is one arithmetic for every width (the kernel's summation
order per output does not depend on how many rows share a call), so a token's logits are the same whether it
is decoded alone or verified in a block — greedy speculative decoding then equals greedy decoding bit for bit.
Mixing variants across sizes would break that, and so would torch's stock path, which picks its kernels by the
number of rows: it is timed for reference (the choice file keeps its times), not chosen.

A choice file (``$DSPARK_CACHE/tune/<fingerprint>.json``, one per target) holds, per dtype, the median forward time of
each size on each path, the chosen path and the path each size takes (the same for all), plus (written by
``evaluation/dtype_choice.py``) the default CPU dtype. It is re-measured when the fingerprint changes: another
CPU model or instruction set, another thread count, another torch, another kernel source.
``DSPARK_TUNE=0`` skips measuring: every size takes the fast path (the widest instruction set) and fp32 is the
default.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from ..settings import cache_dir, switch
from . import kernels, stock_path

SIZES = tuple(range(1, 9))                # 1 … 8 tokens: a decode step or a verification block, timed
INVARIANT = tuple(kernels.VARIANTS)      # the project's variants: one arithmetic for every width
FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")


@functools.lru_cache(maxsize=1)
def cpu_model_and_flags() -> tuple[str, list[str]]:
    """The CPU's model name and which of the instruction sets that matter here it has (Linux /proc/cpuinfo)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and name in ("", platform.machine(), platform.processor()):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return name, [f for f in FLAGS if f in flags]                 # read once per process


def fingerprint(model: str = "") -> dict:
    """What the choice depends on: the model, the CPU, its instruction sets, the thread count, torch, the kernel
    source. A choice measured on one target is not taken for another."""
    cpu, flags = cpu_model_and_flags()
    return {"model": model, "cpu": cpu, "flags": flags, "threads": torch.get_num_threads(), "torch": torch.__version__,
            "kernel": kernels.source_hash(), "fast_path": {k: switch(k) for k in
                                                            ("DSPARK_SKINNY", "DSPARK_PACKED_GQA",
                                                             "DSPARK_LEAN_LAYERS", "DSPARK_FUSED_LAYERS")}}


def choice_path(fp: dict) -> Path:
    key = hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / "tune" / f"{key}.json"


def enabled() -> bool:
    return os.environ.get("DSPARK_TUNE", "1").strip() != "0"


def read_choice(model: str = "") -> dict:
    """The kept choice for ``model`` on this machine ({} when none, or when the file is unreadable)."""
    fp = fingerprint(model)
    try:
        d = json.loads(choice_path(fp).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) and d.get("fingerprint") == fp else {}


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs since boot (Linux /proc/stat), None elsewhere."""
    try:
        with open("/proc/stat", encoding="utf-8") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)                                   # idle + iowait
    return sum(v) - idle, sum(v)


def machine_busy(window: float = 0.5, cores: float = 0.5) -> bool:
    """Whether other processes hold at least ``cores`` of a core while this one sleeps for ``window`` seconds
    (Linux; elsewhere False). A choice timed on a busy machine is kept as provisional and measured again on the
    next start."""
    a = _cpu_jiffies()
    if a is None:
        return False
    t0 = os.times()
    time.sleep(window)
    b, t1 = _cpu_jiffies(), os.times()
    if b is None or b[1] <= a[1]:
        return False
    mine = (t1.user + t1.system - t0.user - t0.system) * os.sysconf("SC_CLK_TCK")     # this process, in jiffies
    n_cpu = os.cpu_count() or 1
    return (b[0] - a[0] - mine) / (b[1] - a[1]) * n_cpu >= cores


def write_choice(update: dict, model: str = "") -> Path:
    """Merge ``update`` into the choice file of ``model`` on this machine (atomic replace)."""
    fp = fingerprint(model)
    d = read_choice(model) or {"fingerprint": fp}
    for k, v in update.items():
        d[k] = {**d.get(k, {}), **v} if isinstance(v, dict) and isinstance(d.get(k), dict) else v
    p = choice_path(fp)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(d, indent=1), encoding="utf-8")
    tmp.replace(p)
    return p


def paths_here(dtype: torch.dtype) -> tuple[str, ...]:
    """The paths worth timing for ``dtype`` on this CPU."""
    ext = kernels.load()
    isa = ext.isa() if ext is not None and hasattr(ext, "isa") else "avx2"
    if isa == "avx512+bf16" and dtype == torch.bfloat16:                 # vdpbf16ps or the FMAs: the CPU decides
        return ("fast", "fast-avx512-fma", "fast-avx2", "stock")
    return ("fast", "fast-avx2", "stock") if isa.startswith("avx512") else ("fast", "stock")


def time_sizes(target, sizes=SIZES, repeats: int = 7, ctx_len: int = 128) -> dict[int, dict[str, float]]:
    """Median ms of an n-token forward after a ctx_len cache on each path, interleaved (order alternating)."""
    ids = (target.encode("The quick brown fox jumps over the lazy dog. ") * ctx_len)[:ctx_len]
    cache, _ = target.prefill(ids)
    paths = paths_here(target.dtype)
    times: dict[int, dict[str, list[float]]] = {n: {p: [] for p in paths} for n in sizes}
    x = {n: torch.tensor([ids[-n:]]) for n in sizes}                                   # (1, n)
    for rep in range(repeats + 1):                                                     # first pass: warm-up
        for n in sizes:
            for path in paths if rep % 2 == 0 else tuple(reversed(paths)):
                with run_on(target.model, path):
                    t0 = time.perf_counter()
                    target.forward(x[n], cache, choose_path=False)
                    dt = time.perf_counter() - t0
                target.crop(cache, ctx_len - 1)
                if rep:
                    times[n][path].append(dt * 1e3)
    return {n: {p: statistics.median(v) for p, v in t.items()} for n, t in times.items()}


@contextlib.contextmanager
def run_on(model, path: str):
    """Inside the block, ``model``'s few-token forwards take ``path`` (fast / fast-avx512-fma / fast-avx2 / stock)."""
    with kernels.variant(path), stock_path(model, path == "stock"):
        yield model


def best_path(times: dict[int, dict[str, float]]) -> str:
    """The one path every size of a dtype takes: of the width-invariant variants timed, the one with the least
    total time over the sizes (ties go to the first-listed, the widest instruction set). The stock path only
    where none of ours was timed."""
    timed = list(next(iter(times.values()), {}))
    cands = [p for p in timed if p in INVARIANT] or timed
    total = {p: sum(t[p] for t in times.values()) for p in cands}
    return min(cands, key=lambda p: (total[p], cands.index(p)))


def dtype_key(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def paths_for(target, measure: bool = True, force: bool = False) -> tuple[dict[int, str], str]:
    """({size: path}, where the choice came from) for this target's dtype on this machine: one path for all sizes."""
    if not enabled():
        return {}, "DSPARK_TUNE=0"
    key = dtype_key(target.dtype)
    kept = read_choice(target.name).get("sizes", {}).get(key)
    if kept is not None and not force and not (kept.get("provisional") and measure):
        return {int(n): p for n, p in kept["path"].items() if int(n) in SIZES}, "measured on this machine"
    if not (measure or force):
        return {}, "not measured"
    busy = machine_busy()
    times = time_sizes(target)
    path = best_path(times)
    busy = busy or machine_busy()
    chosen = {n: path for n in times}
    write_choice({"sizes": {key: {"choice": path, "path": {str(n): p for n, p in chosen.items()},
                                  "ms": {str(n): t for n, t in times.items()}, "provisional": busy,
                                  "when": time.strftime("%Y-%m-%d %H:%M")}}}, target.name)
    return chosen, "measured now" + (" on a busy machine: provisional" if busy else "")


def kept_default_dtype(model: str = "") -> str | None:
    """The default CPU dtype chosen for ``model`` on this machine ("float32" / "bfloat16"), or None if not chosen
    yet (or DSPARK_TUNE=0)."""
    return read_choice(model).get("default_dtype") if enabled() else None


def default_dtype_is_final(model: str = "") -> bool:
    """Whether the kept default dtype was timed on a quiet machine with agreeing repeats."""
    d = read_choice(model)
    return "default_dtype" in d and not d.get("default_dtype_provisional", False)
