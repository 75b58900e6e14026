"""What a benchmark ran on: the machine, the versions and the target's fast paths, as one flat dict.

The dict is stored in every bench JSON as ``machine`` (its keys are read by other tools; keep them):
cpu, cores, torch_threads, torch, transformers, python, platform; with a target also target, device,
dtype, matmul (stock | lm-head-wxt | skinny-kernel), attention (sdpa | packed-gqa), layers
(stock | lean | lean+fused), draft_diagnostics (the neural drafters' chart-only top-k: off in the bench),
bf16_gemm on CPU (native | widened), kernel with the few-row kernel (rows | tiles), gpu on CUDA;
cpu_flags (the instruction sets that matter: avx2 … avx512_bf16, amx), default_dtype (this machine's
chosen CPU dtype, fast/tune.py), paths.choice and paths.sizes as path_choice and size_paths (per few-token size: fast, fast-avx2 or stock).
A run whose JSON lacks ``kernel`` used the row layout.
"""
from __future__ import annotations

import os
import platform
import sys

import torch

from ..fast import FastPaths, tune
from ..model.target import DEFAULT_ID
from ..fast.kernels import LAYOUT, native_bf16_gemm
from ..fast.lean import fused

try:
    import resource
except ImportError:                                 # not on Windows
    resource = None


def machine_info(target=None) -> dict:
    """The machine fingerprint of a bench run on ``target`` (keys in the module docstring)."""
    import transformers

    cpu, flags = tune.cpu_model_and_flags()
    info = dict(cpu=cpu, cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                transformers=transformers.__version__, python=platform.python_version(),
                platform=platform.platform(), cpu_flags=flags, default_dtype=tune.kept_default_dtype(DEFAULT_ID))
    if target is not None:
        paths = getattr(target, "paths", None) or FastPaths("stock", "sdpa", "stock")
        info.update(target=target.name, device=str(target.device), dtype=str(target.dtype).replace("torch.", ""),
                    matmul=paths.matmul, attention=paths.attention, layers=paths.layers)
        info["draft_diagnostics"] = "off"              # the bench loads neural drafters speed_only
        if info["layers"] == "lean":                    # lean layers as fused native calls where built
            info["layers"] = "lean+fused" if fused(target.model) else "lean"
        if str(target.device) == "cpu":                 # bf16 products: torch's GEMM or widened to fp32
            info["bf16_gemm"] = "native" if native_bf16_gemm() else "widened"
            if info["matmul"] == "skinny-kernel":       # the few-row kernel's layout
                info["kernel"] = LAYOUT
            info["path_choice"] = paths.choice
            info["size_paths"] = {str(n): p for n, p in sorted(paths.sizes.items())}
        if str(target.device).startswith("cuda"):
            info["gpu"] = torch.cuda.get_device_name(target.device)
    return info


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
