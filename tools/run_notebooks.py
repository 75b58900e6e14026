"""Execute the course notebooks in place, stamp the machine, and write their run times into notebooks/README.md.

    .venv/bin/python tools/run_notebooks.py                 # every notebook
    .venv/bin/python tools/run_notebooks.py 02 05           # those whose names start with 02 / 05

Each notebook runs in a fresh kernel from notebooks/ (as nbval runs it), one thread unless DSPARK_TEST_THREADS
or OMP_NUM_THREADS says otherwise. Its first code cell after the setup prints the machine (``course_stamp``), so
the stored outputs say where they were computed; the notebook's metadata keeps the same facts and the seconds it
took. The table between the ``run-times`` markers of notebooks/README.md is rewritten from every notebook's
metadata: run time, whether it loads the model, and the machine; the minutes column of the README's table of
notebooks comes from the same metadata (``readme_minutes``), so the two never disagree. Run it on a quiet machine.

    .venv/bin/python tools/run_notebooks.py --tables        # rewrite both tables from the stored metadata only
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
README = NB_DIR / "README.md"
TOP_README = ROOT / "README.md"
BEGIN, END = "<!-- run-times:begin -->", "<!-- run-times:end -->"


def loads_model(nb) -> bool:
    """Whether a notebook loads the embedded target (its code calls ``load_target``)."""
    return any(c.cell_type == "code" and "load_target(" in c.source for c in nb.cells)


def run(path: Path, timeout: int = 900) -> dict:
    from dspark_viz.evaluation.machine_info import machine_info

    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NB_DIR)}}).execute()
    secs = time.perf_counter() - t0
    m = machine_info()
    nb.metadata["dspark_viz"] = {"cpu": m["cpu"], "cpu_flags": m["cpu_flags"], "torch": m["torch"],
                                 "seconds": round(secs), "loads_model": loads_model(nb)}
    nbformat.write(nb, path)
    return nb.metadata["dspark_viz"]


def table() -> str:
    rows = ["| notebook | run time | loads the model | executed on |", "|---|---|---|---|"]
    for path in sorted(NB_DIR.glob("0*.ipynb")):
        meta = nbformat.read(path, as_version=4).metadata.get("dspark_viz", {})
        secs = meta.get("seconds")
        rows.append(f"| `{path.stem}` | {f'{secs // 60} min {secs % 60:02d} s' if secs is not None else '—'} | "
                    f"{'yes' if meta.get('loads_model') else 'no'} | {meta.get('cpu', '—')} |")
    return "\n".join(rows)


def write_table() -> None:
    text = README.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{README} has no {BEGIN} … {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    README.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}", encoding="utf-8")
    TOP_README.write_text(readme_minutes(TOP_README.read_text(encoding="utf-8")), encoding="utf-8")


def minutes(path: Path) -> str | None:
    """A notebook's stored run time in minutes, one decimal (None: never run by this tool)."""
    secs = nbformat.read(path, as_version=4).metadata.get("dspark_viz", {}).get("seconds")
    return None if secs is None else f"{secs / 60:.1f}"


def readme_minutes(text: str) -> str:
    """``text`` (the top README) with the last column of each notebook row, | `NN_name` | … | minutes |, set to the
    notebook's stored run time."""
    def row(m: re.Match) -> str:
        got = minutes(NB_DIR / f"{m.group(2)}.ipynb")
        return m.group(0) if got is None else f"{m.group('head')}{got} |"
    return re.sub(r"^(?P<head>\| `(\d\d_\w+)` \|.*\| )[^|]*\|$", row, text, flags=re.M)


def main(argv: list[str]) -> None:
    if argv == ["--tables"]:
        write_table()
        return
    paths = sorted(NB_DIR.glob("0*.ipynb"))
    if argv:
        paths = [p for p in paths if any(p.name.startswith(a) for a in argv)]
        if not paths:
            raise SystemExit(f"no notebook starts with {' or '.join(argv)}")
    for p in paths:
        print(f"{p.name}: running …", flush=True)
        meta = run(p)
        print(f"{p.name}: {meta['seconds']} s", flush=True)
    write_table()


if __name__ == "__main__":
    main(sys.argv[1:])
