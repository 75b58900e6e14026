"""Plain decoding's ms per token at several OpenMP spin counts (GOMP_SPINCOUNT), on a quiet machine and beside
one busy process — the measurement behind ``dspark_viz.settings.openmp_defaults``.

    python benchmarks/bench_spin.py [--spins 1000,10000,300000] [--dtype bf16] [--tokens 48] [--busy] [--json F]

Each spin count runs in its own process (the OpenMP runtime reads the variable once, when torch loads), the counts
interleaved over ``--rounds``; every process decodes the same three shipped evaluation prompts greedily with torch's
default thread count and reports the median ms per decoded token (prefill left out). ``--busy`` starts one
process that spins on a core for the whole run: the case of a second job sharing the machine. Run it on an
otherwise quiet machine; 300,000 is about libgomp's own default and takes minutes per prompt when ``--busy``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, statistics, sys
from dspark_viz.decode import plain_generate
from dspark_viz.evaluation.full_block import load_eval_prompts
from dspark_viz.model.target import load_target
from dspark_viz.settings import assets
t = load_target(dtype=sys.argv[1])
picked = [r["turns"][0] for r in load_eval_prompts([assets("prompts", "eval.jsonl")], per_domain=1)]
plain_generate(t, picked[0], max_new_tokens=4)                                # first-call costs
ms = []
for text in picked:
    tr = plain_generate(t, text, max_new_tokens=int(sys.argv[2]))
    ms.append(1e3 * (tr.t_total - tr.t_prefill) / max(1, len(tr.output_ids) - 1))
print(json.dumps(dict(ms=statistics.median(ms))))
"""


def spin_forever() -> None:
    x = 0
    while True:
        x += 1


def one_run(spin: int, dtype: str, tokens: int) -> float:
    env = {**os.environ, "GOMP_SPINCOUNT": str(spin)}
    out = subprocess.run([sys.executable, "-c", CHILD, dtype, str(tokens)], env=env, cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ms"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spins", default="1000,10000", help="comma-separated GOMP_SPINCOUNT values")
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--tokens", type=int, default=48, help="new tokens per prompt")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved repeats of every spin count")
    ap.add_argument("--busy", action="store_true", help="one other process keeps a core busy meanwhile")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    spins = [int(s) for s in a.spins.split(",") if s.strip()]
    if not spins or min(spins) < 0 or a.tokens < 2 or a.rounds < 1:
        raise SystemExit("--spins must list non-negative integers; --tokens ≥ 2; --rounds ≥ 1")
    hog = mp.Process(target=spin_forever, daemon=True) if a.busy else None
    if hog:
        hog.start()
    try:
        seen: dict[int, list[float]] = {s: [] for s in spins}
        for r in range(a.rounds):
            for s in spins if r % 2 == 0 else list(reversed(spins)):
                seen[s].append(one_run(s, a.dtype, a.tokens))
                print(f"round {r + 1}: GOMP_SPINCOUNT={s}: {seen[s][-1]:.1f} ms/token", flush=True)
    finally:
        if hog:
            hog.terminate()
    result = {str(s): statistics.median(v) for s, v in seen.items()}
    from dspark_viz.fast.tune import cpu_model_and_flags

    cpu, _ = cpu_model_and_flags()
    print(f"{cpu}, {os.cpu_count()} cores, {a.dtype}, {'one busy process beside' if a.busy else 'quiet'}: "
          + ", ".join(f"{s} → {m:.1f} ms/token" for s, m in result.items()))
    if a.json:
        Path(a.json).write_text(json.dumps(dict(cpu=cpu, cores=os.cpu_count(), dtype=a.dtype, busy=a.busy,
                                                tokens=a.tokens, rounds=a.rounds, ms_per_token=result,
                                                command="python benchmarks/bench_spin.py " + " ".join(
                                                    sys.argv[1:] if argv is None else argv)), indent=1))


if __name__ == "__main__":
    main()
