"""``dspark-viz bench``: argument parsing over dspark_viz.bench."""
from __future__ import annotations

import argparse

from ..bench.runner import add_arguments, run_from_args


def add_bench(p: argparse.ArgumentParser) -> None:
    add_arguments(p)


def run_bench(a: argparse.Namespace) -> int:
    run_from_args(a, getattr(a, "_argv", None))
    return 0
