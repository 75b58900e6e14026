"""Merge the JSON of several `dspark-viz bench --json` runs into one docs/benchmarks.md (each run keeps its
own command line in the page), e.g. a T = 0 and a T = 1 run made separately:

    python benchmarks/bench_markdown.py docs/data/bench_DATE_DTYPES_T0.json docs/data/bench_DATE_DTYPES_T1.json
    python benchmarks/bench_markdown.py RUN.json --note "The eagle rows were measured with an earlier drafter."
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dspark_viz.evaluation.speed_report import markdown_report  # noqa: E402
from dspark_viz.evaluation.speed_runner import load_reports  # noqa: E402


def threads_section(t: dict) -> str:
    """One bench_threads.py run as Markdown: n-token forward ms and whole-decode tok/s per thread count."""
    ths = list(next(iter(t["forward_ms"].values())))
    lines = [f"## Threads: 1 → {ths[-1]}, {t['dtype']}", "", f"`{t.get('command', 'python benchmarks/bench_threads.py')}` "
             f"on {t['cpu']} ({' '.join(t['flags'])}); paths: {t['paths']}. Median ms of one n-token forward after "
             f"a 256-token cache, the thread counts interleaved; then DSpark + hardware-aware decodes (T = 0, 64 "
             f"tokens, one prompt per domain).", "",
             "| n | " + " | ".join(f"{th} thread(s), ms" for th in ths) + " | speed-up |",
             "|---|" + "---|" * (len(ths) + 1)]
    for n, d in t["forward_ms"].items():
        lines.append(f"| {n} | " + " | ".join(f"{d[th]:.1f}" for th in ths) + f" | {d[ths[0]] / d[ths[-1]]:.2f} |")
    dec = t["decode_tok_s"]
    lines += ["", "Decode tok/s: " + ", ".join(f"{th} thread(s) {v:.1f}" for th, v in dec.items())
              + f" (speed-up {dec[ths[-1]] / dec[ths[0]]:.2f}).", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="bench --json files, the first one heads the page")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--threads-json", action="append", default=[], metavar="RUN.json",
                    help="a benchmarks/bench_threads.py --json run to add as a thread-scaling section")
    ap.add_argument("--note", action="append", default=[], metavar="TEXT",
                    help="a paragraph under the first command: what a reader must know that the runs do not record")
    a = ap.parse_args()
    reports = [r for p in a.runs for r in load_reports(p)]
    page = markdown_report(reports, notes=a.note)
    for p in a.threads_json:
        page += "\n" + threads_section(json.loads(Path(p).read_text(encoding="utf-8")))
    Path(a.out).write_text(page, encoding="utf-8")
    print(f"wrote {a.out} ({len(reports)} runs)")


if __name__ == "__main__":
    main()
