"""``dspark-viz …``: the command line, one table of thin subcommands over the library.

    dspark-viz generate "Explain RoPE in two sentences." --drafter dspark --policy hardware-aware
    dspark-viz bench --n-prompts 2 --max-new-tokens 64 --json bench.json
    dspark-viz data | train | eval | calibrate | profile | simulate | warm …

Each subcommand is an ``add(parser)`` and a ``run(args) -> int | None`` in one of this package's
modules, listed once in ``SUBCOMMANDS``. Bad input (ValueError / FileNotFoundError, argparse errors)
prints one line on stderr and exits 2.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Callable

from . import bench, corpus, evaluate, export, generate, record, reproduces, serve_bench, serving, setup, train


@dataclass(frozen=True)
class Subcommand:
    help: str
    add: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int | None]


SUBCOMMANDS: dict[str, Subcommand] = {
    "generate": Subcommand("decode one prompt, colouring accepted / rejected / bonus tokens",
                           generate.add_generate, generate.run_generate),
    "bench": Subcommand("time HF generate and HF prompt lookup against our decoding methods, interleaved",
                        bench.add_bench, bench.run_bench),
    "corpus": Subcommand("make training prompts (Magpie-style) and the target's answers to them (resumable)",
                         corpus.add_corpus, corpus.run_corpus),
    "data": Subcommand("generate target responses and cache target features (resumable)",
                       train.add_data, train.run_data),
    "train": Subcommand("train one drafter (dspark | dspark-rnn | dflash | eagle), resumable",
                        train.add_train, train.run_train),
    "eval": Subcommand("full-block evaluation (ℓ = γ): τ per domain, survival, acceptance",
                       evaluate.add_eval, evaluate.run_eval),
    "record": Subcommand("record full-block traces of every drafter on the evaluation prompts (resumable)",
                         record.add_record, record.run_record),
    "calibrate": Subcommand("fit Sequential Temperature Scaling and report ECE / AUROC",
                            evaluate.add_calibrate, evaluate.run_calibrate),
    "reproduces": Subcommand("which of the paper's effects the recorded data reproduce, with intervals",
                             reproduces.add_reproduces, reproduces.run_reproduces),
    "profile": Subcommand("measure the target's steps/s for B = 1…Bmax tokens per forward",
                          serving.add_profile, serving.run_profile),
    "simulate": Subcommand("trace-driven serving simulation of every policy",
                           serving.add_simulate, serving.run_simulate),
    "serve-bench": Subcommand("the live engine under load: R requests at once, drafter against plain decoding",
                              serve_bench.add_serve_bench, serve_bench.run_serve_bench),
    "warm": Subcommand("load the embedded target once: convert its GGUF and build the CPU kernels",
                       setup.add_warm, setup.run_warm),
    "kernels": Subcommand("build the few-token CPU kernel now and check it against torch",
                          setup.add_kernels, setup.run_kernels),
    "export": Subcommand("write a dspark / dspark-rnn / dflash drafter as a DeepSpec checkpoint folder",
                         export.add_export, export.run_export),
}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="dspark-viz", description="DSpark speculative decoding, visualised.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name, sc in SUBCOMMANDS.items():
        sc.add(sub.add_parser(name, help=sc.help, description=sc.help))
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser()
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:                       # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    if not a.command:
        ap.print_help(sys.stderr)
        return 2
    a._argv = argv[1:]
    try:
        return int(SUBCOMMANDS[a.command].run(a) or 0)
    except (ValueError, FileNotFoundError) as e:
        print(f"dspark-viz {a.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
