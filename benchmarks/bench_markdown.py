"""Merge the JSON of several `dspark-viz bench --json` runs into one docs/benchmarks.md (each run keeps its
own command line in the page), e.g. a T = 0 and a T = 1 run made separately:

    python benchmarks/bench_markdown.py docs/bench_fp32.json docs/bench_fp32_T1.json docs/bench_bf16.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dspark_viz.bench.report import markdown_report  # noqa: E402
from dspark_viz.bench.runner import load_reports  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="bench --json files, the first one heads the page")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    a = ap.parse_args()
    reports = [r for p in a.runs for r in load_reports(p)]
    Path(a.out).write_text(markdown_report(reports), encoding="utf-8")
    print(f"wrote {a.out} ({len(reports)} runs)")


if __name__ == "__main__":
    main()
