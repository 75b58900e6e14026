"""Plain decoding from the main thread and from a worker thread, with and without ``dspark_viz.threads``'s give-back
of OpenMP helpers, interleaved in one process — the measurement behind that module.

    python benchmarks/bench_worker_thread.py [--dtype bf16] [--tokens 128] [--repeats 3] [--json OUT.json]

Arms, rotated per prompt: ``main`` (the main thread decodes), ``worker`` (a fresh ``threading.Thread`` decodes,
as the app's handlers do) and ``worker, helpers kept`` (the same with the give-back switched off, so the main
thread's idle OpenMP pool stays while the worker computes: the behaviour without the fix). Before each worker arm
the main thread runs one short decode, so its pool exists as it does in the app after loading the model. Per arm:
the median tok/s over three shipped evaluation prompts × repeats (T = 0, prefill included) and the process's
voluntary context switches per decoded token. The CPU and thread count are printed with it.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from dspark_viz import threads  # noqa: E402
from dspark_viz.decode import plain_generate  # noqa: E402
from dspark_viz.evaluation.full_block import load_eval_prompts  # noqa: E402
from dspark_viz.fast.tune import cpu_model_and_flags  # noqa: E402
from dspark_viz.model.target import load_target  # noqa: E402
from dspark_viz.settings import assets  # noqa: E402

ARMS = ("main", "worker", "worker, helpers kept")


def _decode(target, text: str, tokens: int) -> tuple[float, int, int]:
    """→ (seconds, tokens, voluntary context switches of the process) of one greedy plain decode."""
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    t0 = time.perf_counter()
    tr = plain_generate(target, text, max_new_tokens=tokens)
    return time.perf_counter() - t0, len(tr.output_ids), resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - r0


def run_arm(arm: str, target, text: str, tokens: int) -> tuple[float, int, int]:
    if arm == "main":
        return _decode(target, text, tokens)
    fn = threads._pause_fn()
    threads._runtime[:] = [fn if arm == "worker" else None]      # None: give_back does nothing
    try:
        plain_generate(target, text, max_new_tokens=2)           # the main thread's pool, as after loading
        out: list = []
        t = threading.Thread(target=lambda: out.append(_decode(target, text, tokens)))
        t.start()
        t.join()
        return out[0]
    finally:
        threads._runtime[:] = [fn]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if not threads.available():
        print("this process's OpenMP runtime is not libgomp: the give-back does nothing here")
    target = load_target(device="cpu", dtype=a.dtype)
    cpu, flags = cpu_model_and_flags()
    print(f"{cpu} · {' '.join(flags)} · {a.dtype} · {torch.get_num_threads()} torch threads")
    texts = [r["turns"][0] for r in load_eval_prompts([assets("prompts", "eval.jsonl")], per_domain=1)]
    plain_generate(target, texts[0], max_new_tokens=4)                            # first-call costs
    rows = {arm: [] for arm in ARMS}
    for rep in range(a.repeats):
        for i, text in enumerate(texts):
            k = (rep * len(texts) + i) % len(ARMS)
            for arm in ARMS[k:] + ARMS[:k]:
                rows[arm].append(run_arm(arm, target, text, a.tokens))
    summary = {arm: dict(tok_per_s=statistics.median(n / s for s, n, _ in r),
                         switches_per_token=sum(c for _, _, c in r) / sum(n for _, n, _ in r), runs=len(r))
               for arm, r in rows.items()}
    ref = summary["main"]["tok_per_s"]
    for arm, m in summary.items():
        print(f"{arm:<22} {m['tok_per_s']:7.1f} tok/s  ×{m['tok_per_s'] / ref:.2f} of main  "
              f"{m['switches_per_token']:8.1f} voluntary switches per token")
    if a.json:
        Path(a.json).write_text(json.dumps(dict(cpu=cpu, flags=flags, dtype=a.dtype,
                                                threads=torch.get_num_threads(), tokens=a.tokens,
                                                summary=summary), indent=1) + "\n")


if __name__ == "__main__":
    main()
