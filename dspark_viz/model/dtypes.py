"""Which dtype a target loads at: the one the caller names, else bf16 on a GPU and, on a CPU, the default this
machine chose (fp32 until it has).

The CPU choice is measured by ``evaluation/dtype_choice.py`` (``dspark-viz profile``, and the command line and the
app before their first load) and kept in this machine's choice file (fast/tune.py); here it is only read.
"""
from __future__ import annotations

import torch

from ..fast import tune

NAMES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
         "fp16": torch.float16, "float16": torch.float16}


def default_dtype(device: str) -> torch.dtype:
    """bf16 on a GPU; on a CPU the kept choice of this machine, fp32 when none is kept (or DSPARK_TUNE=0)."""
    if str(device).startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if tune.kept_default_dtype() == "bfloat16" else torch.float32


def resolve(dtype, device: str) -> torch.dtype:
    """A dtype given as None (the default above), a torch dtype, or a name (fp32, bf16, fp16)."""
    if dtype is None:
        return default_dtype(device)
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in NAMES:
        raise ValueError(f"unknown dtype {dtype!r}: use fp32 or bf16")
    return NAMES[dtype]


__all__ = ["NAMES", "default_dtype", "resolve"]
