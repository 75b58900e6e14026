"""Ship only what is better: compare candidate drafters with the shipped ones on the selection half of the benchmark
prompts, at T = 0 and T = 1, and (with --apply) copy a candidate into assets/drafters/ only where its full-block τ
is higher at both temperatures.

    python tools/select_drafters.py --candidates $DSPARK_CACHE/candidates --depth 2 --bench-dir ../shared/bench \
        --per-domain 20 --max-new-tokens 64 --json docs/data/selection.json [--apply]

Candidates are the cards `tools/train_drafters.sh` writes (ALGO-L{D}.json; EAGLE-style at one layer). The
benchmark files are read at run time only; the report half (`--half report`) is left for the published figures.
A replaced DSpark drafter loses its STS calibration file (it belonged to the old weights): refit it with
`dspark-viz calibrate` on held-out rollouts.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def candidate_file(folder: Path, algo: str, depth: int) -> Path:
    return folder / f"{algo}-L{1 if algo == 'eagle' else depth}.json"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--algos", nargs="*", default=["dspark", "dspark-rnn", "dflash", "eagle"])
    ap.add_argument("--bench-dir", default=None, help="benchmark prompt folder (default $DSPARK_BENCH_DIR)")
    ap.add_argument("--per-domain", type=int, default=20)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--apply", action="store_true", help="copy the better candidates into assets/drafters/")
    a = ap.parse_args(argv)

    import torch

    from dspark_viz.drafters.neural import ASSETS, SHIPPED, calibration_path, load_drafter_file, load_shipped
    from dspark_viz.evaluation.full_block import evaluate_drafter, load_eval_prompts
    from dspark_viz.model.target import load_target
    from dspark_viz.settings import bench_files

    files = bench_files(a.bench_dir)
    if not files:
        raise SystemExit("no benchmark prompts: pass --bench-dir or set DSPARK_BENCH_DIR")
    if a.threads:
        torch.set_num_threads(a.threads)
    target = load_target(dtype="fp32")
    recs = load_eval_prompts(files, per_domain=a.per_domain, half="select")
    report = {"prompts": len(recs), "half": "select", "max_new_tokens": a.max_new_tokens, "rows": []}
    for algo in a.algos:
        cand = candidate_file(Path(a.candidates), algo, a.depth)
        if not cand.exists():
            print(f"{algo}: no candidate at {cand}")
            continue
        pair = {"shipped": load_shipped(algo, target, calibrated=False),
                "candidate": load_drafter_file(cand, target, name=f"{algo} candidate")}
        row = {"algo": algo, "candidate": cand.name, "candidate_sha256": pair["candidate"].card.get("sha256", ""),
               "tau": {}}
        for who, d in pair.items():
            for T in (0.0, 1.0):
                res = evaluate_drafter(target, d, recs, temperature=T, max_new_tokens=a.max_new_tokens, seed=0,
                                       batch=a.batch, progress=False)
                row["tau"][f"{who}_T{T:g}"] = res["tau"]
        t = row["tau"]
        row["better"] = t["candidate_T0"] > t["shipped_T0"] and t["candidate_T1"] > t["shipped_T1"]
        report["rows"].append(row)
        print(f"{algo}: shipped τ {t['shipped_T0']:.3f} / {t['shipped_T1']:.3f}, candidate {t['candidate_T0']:.3f} / "
              f"{t['candidate_T1']:.3f} (T = 0 / 1) → {'replace' if row['better'] else 'keep'}", flush=True)
        if a.apply and row["better"]:
            dst = ASSETS / f"{SHIPPED[algo]}.json"
            shutil.copyfile(cand, dst)
            shutil.copyfile(cand.with_suffix(".safetensors"), dst.with_suffix(".safetensors"))
            cal = calibration_path(algo)
            if cal.exists():
                cal.unlink()
                print(f"  removed {cal.name}: refit it with `dspark-viz calibrate --drafter {algo}`")
    if a.json:
        # rows of candidates not compared in this run (other algorithms, other depths) stay in the report
        out = Path(a.json)
        if out.exists():
            old = json.loads(out.read_text())
            if old.get("prompts") == report["prompts"] and old.get("max_new_tokens") == a.max_new_tokens:
                done = {(r["algo"], r["candidate"]) for r in report["rows"]}
                report["rows"] = [r for r in old.get("rows", []) if (r["algo"], r["candidate"]) not in done] \
                    + report["rows"]
        out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
