"""``dspark-viz reproduces``: which of the paper's effects this repository's recorded data reproduce."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..evaluation import reproduces as rp


def add_reproduces(p: argparse.ArgumentParser) -> None:
    p.add_argument("--markdown", action="store_true", help="print the short Markdown table (the README's)")
    p.add_argument("--write", metavar="FILE", default=None,
                   help="rewrite the table between the reproduces markers of FILE (e.g. README.md)")


def run_reproduces(a: argparse.Namespace) -> int:
    effects = rp.reproduction_table()
    if a.write:
        path = Path(a.write)
        if not path.is_file():
            raise FileNotFoundError(f"no file {path} to write the table into")
        path.write_text(rp.with_table(path.read_text(encoding="utf-8"), rp.reproduction_markdown(effects)),
                        encoding="utf-8")
        print(f"wrote the table into {path}")
    if a.markdown:
        print(rp.reproduction_markdown(effects))
    elif not a.write:
        for e in effects:
            print(f"{e.where:<10} {e.claim}\n{'':<10} paper: {e.paper}\n{'':<10} here:  {e.ours} — {e.here}; "
                  f"{e.basis}\n{'':<10} → {e.verdict}")
    counts = rp.verdict_counts(effects)
    print(", ".join(f"{n} {v}" for v, n in counts.items() if n))
    return 0
