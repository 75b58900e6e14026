"""Which dtype a target loads at: the one the caller names, else bf16 on a GPU and, on a CPU, the default this
machine chose for that target (fp32 until it has, and fp32 for any target it was not measured on).

The CPU choice is measured by ``evaluation/dtype_choice.py`` (``dspark-viz profile``, and the command line and the
app before their first load) and kept in this machine's choice file (fast/tune.py); here it is only read.
"""
from __future__ import annotations

import torch

from ..fast import tune

NAMES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
         "fp16": torch.float16, "float16": torch.float16}


def default_dtype(device: str, model: str = "") -> torch.dtype:
    """bf16 on a GPU; on a CPU the choice kept for ``model`` (a target's name) on this machine, fp32 when none is
    kept (or DSPARK_TUNE=0). Only the embedded target is measured (it has shipped drafters to time with), so any
    other target loads at fp32 on a CPU unless bf16 is asked for: fp32 keeps greedy speculative decoding equal to
    greedy decoding on torch's stock path too, where bf16 rounds differently at each forward width."""
    if str(device).startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if tune.kept_default_dtype(model) == "bfloat16" else torch.float32


def resolve(dtype, device: str, model: str = "") -> torch.dtype:
    """A dtype given as None (the default above for ``model``), a torch dtype, or a name (fp32, bf16, fp16)."""
    if dtype is None:
        return default_dtype(device, model)
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in NAMES:
        raise ValueError(f"unknown dtype {dtype!r}: use fp32 or bf16")
    return NAMES[dtype]


__all__ = ["NAMES", "default_dtype", "resolve"]
