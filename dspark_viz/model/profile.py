"""Which SPS profile (cost.py) a loaded target schedules with: on a CPU the curve measured for its dtype and
matmul path, elsewhere the synthetic GPU-like curve.

Measured curves live in ``assets/profiles`` (``cost.PROFILE_DIR``), one file per setup; ``dspark-viz profile``
writes the file of the setup it runs under.
"""
from __future__ import annotations

from pathlib import Path

from .. import cost
from ..cost import SPSProfile, gpu_like


def cpu_profile_file(dtype: str = "float32", matmul: str = "skinny-kernel") -> Path:
    """Where the measured CPU curve for this setup lives: cpu.json (fp32 with the few-row kernel, the default
    setup), cpu-stock.json (fp32, stock matmuls: DSPARK_SKINNY=0 or no compiler), cpu-bf16.json and
    cpu-bf16-stock.json (bf16 with / without the kernel). Each is written by `dspark-viz profile` run under
    that setup; the costs differ enough to change ℓ."""
    dt = str(dtype).replace("torch.", "")
    stem = "cpu-bf16" if dt in ("bfloat16", "bf16") else "cpu"
    return cost.PROFILE_DIR / (f"{stem}.json" if matmul == "skinny-kernel" else f"{stem}-stock.json")


def profile_for(target) -> SPSProfile:
    """The profile single-user decoding schedules with for this target: on CPU the measured curve of its
    dtype and matmul path (``target.paths.matmul``; falling back to cpu.json), else the synthetic GPU-like
    curve. A target without a paths record (a toy) counts as the default setup."""
    device = str(getattr(target, "device", "cpu"))
    if device.startswith("cpu"):
        matmul = getattr(getattr(target, "paths", None), "matmul", "skinny-kernel")
        path = cpu_profile_file(str(getattr(target, "dtype", "float32")), matmul)
        for p in (path, cost.PROFILE_DIR / "cpu.json"):
            if p.exists():
                return SPSProfile.load(p)
    return gpu_like()


__all__ = ["cpu_profile_file", "profile_for"]
