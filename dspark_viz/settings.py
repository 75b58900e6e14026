"""Every setting of the toolkit in one place: the ``DSPARK_*`` environment variables and the paths.

Settings are read when asked for (not at import), so a test or a notebook can change one with
``monkeypatch.setenv`` / ``os.environ`` before the call that uses it.

| variable              | default               | effect                                                              |
|-----------------------|-----------------------|---------------------------------------------------------------------|
| ``DSPARK_CACHE``      | ``~/.cache/dspark_viz`` | converted models, compiled kernels, feature caches, runs, traces  |
| ``DSPARK_BENCH_DIR``  | unset                 | a folder of ``*.jsonl`` benchmark prompts (``bench``, ``eval``, …)  |
| ``DSPARK_SKINNY``     | ``1``                 | ``0``: stock torch matmuls in few-token forwards (no native kernel) |
| ``DSPARK_PACKED_GQA`` | ``1``                 | ``0``: transformers' SDPA attention in few-token forwards           |
| ``DSPARK_LEAN_LAYERS``| ``1``                 | ``0``: transformers' own decoder-layer forwards                     |
| ``DSPARK_FUSED_LAYERS``| ``1``                | ``0``: lean layers run as Python ops, without the fused native calls|
| ``DSPARK_TUNE``       | ``1``                 | ``0``: no per-machine measuring; fast path at every size, fp32      |
| ``DSPARK_FALLBACK``   | ``1``                 | ``0``: the decode loop's default leaves the speculation gate off    |
| ``DSPARK_TEST_THREADS``| ``1``                | torch threads in the test suite                                     |
| ``DSPARK_CHROMIUM``   | ``/usr/bin/chromium`` | the browser the browser test drives                                 |
| ``DSPARK_REFRESH_SCREENSHOT`` | unset         | ``1``: the browser test rewrites docs/app.png                       |
| ``GOMP_SPINCOUNT``    | ``10000`` / ``1000``  | OpenMP's spin before a waiting thread sleeps: the shorter one when  |
|                       | (if unset)            | another process holds a core at import (``openmp_defaults``)        |

Paths: ``assets()`` is the shipped data (drafters, STS files, SPS profiles, prompt suites, recorded traces). It
lives in the top-level ``assets/`` folder of the repository and is installed as the package data
``dspark_viz/assets/``, so it is found beside the package in a wheel and one folder up in a clone or an
editable install.
"""
from __future__ import annotations

import os
from pathlib import Path

SWITCHES = ("DSPARK_SKINNY", "DSPARK_PACKED_GQA", "DSPARK_LEAN_LAYERS", "DSPARK_FUSED_LAYERS")


SPIN_QUIET = 10_000          # OpenMP spin iterations when every core is ours (GOMP_SPINCOUNT)
SPIN_BUSY = 1_000            # … when another process already runs on one


def runnable_others(samples: int = 3, gap: float = 0.01) -> int | None:
    """Processes other than this one running or ready to run right now: the least of a few readings of the
    kernel's run queue (/proc/loadavg's fourth field, which counts the reader), so a passing task does not count
    and a busy one does. None where /proc is missing. A reading of none ends it: the least cannot go lower, so a
    quiet machine's import pays for one read, not for the gaps."""
    import time

    least = None
    for i in range(samples):
        try:
            with open("/proc/loadavg", encoding="ascii") as f:
                n = max(0, int(f.read().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return None
        least = n if least is None else min(least, n)
        if least == 0:
            break
        if i + 1 < samples:
            time.sleep(gap)
    return least


def openmp_defaults() -> None:
    """Set before torch loads (the package's first import does it): how long an OpenMP thread spins at a barrier
    before it sleeps. A decode step has a few hundred parallel regions; a long spin keeps the threads hot between
    them, but when another process holds a core a spinning thread waits for a time slice at every barrier.
    Measured on a 2-core Xeon (bf16 plain decoding, 2 threads, ms per token; ``python benchmarks/bench_spin.py
    [--busy]``, docs/data/spin_*.json): quiet machine 16.6 at 10,000 iterations, 24.2 at 1,000 (16.5 at about
    libgomp's own default, 300,000); beside one busy process 67.8 at 10,000, 36.0 at 1,000. So the spin is 10,000
    when the run queue leaves a core for each of our threads and 1,000 when it does not; the choice is made once
    per process. A value the user set is kept."""
    if "GOMP_SPINCOUNT" in os.environ:
        return
    others, cores = runnable_others(), os.cpu_count() or 1
    threads = int(os.environ.get("OMP_NUM_THREADS") or 0) or cores
    busy = others is not None and others + threads > cores
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_BUSY if busy else SPIN_QUIET)


def switch(name: str) -> bool:
    """An on/off switch of the CPU fast path: on unless the variable is ``0``."""
    if name not in SWITCHES:
        raise KeyError(f"unknown switch {name!r}: {', '.join(SWITCHES)}")
    return os.environ.get(name, "1").strip() != "0"


def fallback_default() -> bool:
    """Whether the decode loop's default (``fallback=None`` with its own policy on a CPU) turns the speculation
    gate on: yes unless ``DSPARK_FALLBACK=0`` (the test suite sets it, so that rounds do not depend on timing)."""
    return os.environ.get("DSPARK_FALLBACK", "1").strip() != "0"


def cache_dir() -> Path:
    """Where converted models, compiled kernels, feature caches, training runs and traces go."""
    return Path(os.environ.get("DSPARK_CACHE") or Path.home() / ".cache" / "dspark_viz").expanduser()


def assets_dir() -> Path:
    """The shipped data folder: ``dspark_viz/assets`` where the package is installed from a wheel, else the
    repository's top-level ``assets/`` (a clone on the path, or an editable install)."""
    package = Path(__file__).resolve().parent
    installed = package / "assets"
    return installed if installed.is_dir() else package.parent / "assets"


def assets(*parts: str) -> Path:
    """A path inside the shipped data (``assets/…``)."""
    return assets_dir().joinpath(*parts)


def bench_dir(flag: str | os.PathLike | None = None) -> Path | None:
    """The benchmark prompt folder: the flag when given, else ``$DSPARK_BENCH_DIR``, else None."""
    raw = flag if flag is not None else os.environ.get("DSPARK_BENCH_DIR")
    if raw is None or str(raw).strip() == "":
        return None
    p = Path(raw).expanduser()
    if not p.is_dir():
        raise FileNotFoundError(f"benchmark prompt folder {p} does not exist (--bench-dir / DSPARK_BENCH_DIR)")
    return p


def bench_files(flag: str | os.PathLike | None = None) -> list[Path]:
    """The ``*.jsonl`` files of the benchmark prompt folder (empty when none is set)."""
    d = bench_dir(flag)
    return sorted(d.glob("*.jsonl")) if d is not None else []


def test_threads() -> int:
    raw = os.environ.get("DSPARK_TEST_THREADS") or os.environ.get("OMP_NUM_THREADS") or "1"
    try:
        return max(1, int(raw))
    except ValueError:
        return 1


def chromium() -> str:
    return os.environ.get("DSPARK_CHROMIUM", "/usr/bin/chromium")
