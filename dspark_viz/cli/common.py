"""Arguments and helpers that several subcommands share."""
from __future__ import annotations

import argparse

import torch

from ..drafters.deepspec_config import feature_layers_for
from ..evaluation.dtype_choice import dtype_for
from ..model import target as model_target  # looked up per call: tests substitute load_target


def set_threads(n: int | None) -> None:
    """``--threads N``: torch's intra-op threads (None keeps torch's choice)."""
    if n is None:
        return
    if n < 1:
        raise ValueError(f"--threads must be ≥ 1, got {n}")
    torch.set_num_threads(n)


def load_target_from_args(a: argparse.Namespace):
    """The target named by --target / --dtype (the embedded SmolLM2 by default), after --threads; with the
    feature layers a ``--drafter DIR`` (DeepSpec checkpoint folder) reads."""
    set_threads(getattr(a, "threads", None))
    return model_target.load_target(getattr(a, "target", None), dtype=dtype_for(None, getattr(a, "dtype", None),
                                                                                  getattr(a, "target", None)),
                                    feature_layers=feature_layers_for(getattr(a, "drafter", None)))


def add_target_args(p: argparse.ArgumentParser, threads: bool = True) -> None:
    p.add_argument("--target", default=None, help="a local HF causal-LM folder or .gguf (default: embedded SmolLM2)")
    p.add_argument("--dtype", default=None, choices=["fp32", "bf16"])
    if threads:
        p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
