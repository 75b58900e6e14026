"""``dspark-viz warm`` and ``dspark-viz kernels``: one-time setup a user can also run by hand."""
from __future__ import annotations

import argparse

from ..fast import kernels
from ..model.target import load_target


def add_warm(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=None, help="a local HF folder or .gguf (default: embedded SmolLM2)")


def run_warm(a: argparse.Namespace) -> int:
    t = load_target(a.target)
    print(f"target {t.name}: {t.n_layers} layers, d={t.hidden_size}, V={t.vocab_size}, loaded in "
          f"{t.load_seconds:.1f}s on {t.device} ({t.dtype}); few-token forwards: {t.paths.matmul}")
    return 0


def add_kernels(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="store_true", help="show the compiler's output")


def run_kernels(a: argparse.Namespace) -> int:
    print(kernels.self_check(verbose=a.verbose))
    return 0
