"""Decode speed side by side: HF generate, HF prompt lookup, our plain loop, our lookup drafter.

    python benchmarks/bench_decode.py                      # 4 prompts from each /work/shared/bench file
    python benchmarks/bench_decode.py --n-prompts 1 --max-new-tokens 64 --threads 1 --json out.json
    python benchmarks/bench_decode.py --prompts my.jsonl --methods hf_generate,plain

Same as `dspark-viz bench`; the methods live in dspark_viz/bench.py (METHODS, register_method).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing

from dspark_viz.bench.runner import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="python benchmarks/bench_decode.py"))
