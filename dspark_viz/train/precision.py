"""Training precision: bf16 autocast or fp32, by device and by what this CPU multiplies natively."""
from __future__ import annotations

from pathlib import Path

import torch


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX); elsewhere bf16 is slower than fp32."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: torch.device) -> str:
    """fp32, bf16 or "time" for ``precision`` in {fp32, bf16, auto}: auto is bf16 on CUDA, fp32 on a CPU without
    native bf16, and on a CPU with it "time": the faster of the two, measured on the run's own steps
    (``faster_precision``) — there bf16 autocast can still lose to fp32, its casts costing more than it saves."""
    if precision not in ("fp32", "bf16", "auto"):
        raise ValueError(f"precision must be fp32, bf16 or auto, got {precision!r}")
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16"
    return "time" if cpu_has_bf16() else "fp32"
