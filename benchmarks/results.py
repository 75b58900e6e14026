"""Write docs/results.md: τ per domain (Table-1 style) and conditional acceptance per position (Fig. 2 style)
for the shipped drafters, full-block verification (ℓ = γ), on the project's evaluation split and on
../shared/bench (gsm8k = math, humaneval = code, mt-bench = chat).

Every (drafter, source, temperature) cell is cached as JSON in docs/results/ so an interrupted run
resumes, and the markdown is regenerated from whatever cells exist:

    python benchmarks/results.py --per-domain 30 --temperatures 0 1 --max-new-tokens 128 --batch 8
    python benchmarks/results.py --write-only
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dspark_viz.evaluate import bench_files, evaluate_drafter, load_eval_prompts  # noqa: E402

OUT = ROOT / "docs" / "results"
DRAFTERS = ["dspark", "dspark-rnn", "dflash", "eagle"]
LABEL = {"dspark": "DSpark-Markov", "dspark-rnn": "DSpark-RNN", "dflash": "DFlash-style", "eagle": "EAGLE-style",
         "lookup": "prompt lookup"}


def sources() -> dict[str, list[Path]]:
    s = {"project-eval": [ROOT / "assets" / "prompts" / "eval.jsonl"]}
    if bench_files():
        s["shared-bench"] = bench_files()
    return s


def cell_path(drafter: str, source: str, T: float) -> Path:
    return OUT / f"{drafter}__{source}__T{T:g}.json"


def run(args) -> None:
    import torch

    from dspark_viz.drafters import load_drafter
    from dspark_viz.target import load_target

    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_target(dtype="fp32")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in args.drafters:
        try:
            drafter = load_drafter(name, target)
        except (FileNotFoundError, ValueError) as e:
            print(f"skip {name}: {e}")
            continue
        for src, files in sources().items():
            if args.sources and src not in args.sources:
                continue
            recs = load_eval_prompts(files, per_domain=args.per_domain)
            for T in args.temperatures:
                path = cell_path(name, src, T)
                if path.exists() and not args.force:
                    continue
                t0 = time.perf_counter()
                res = evaluate_drafter(target, drafter, recs, temperature=T, max_new_tokens=args.max_new_tokens,
                                       seed=args.seed, batch=args.batch)
                body = {k: v for k, v in res.items() if k != "traces"}
                body.update(source=src, seconds=round(time.perf_counter() - t0, 1),
                            card_train=drafter.card.get("train", {}) if hasattr(drafter, "card") else {})
                path.write_text(json.dumps(body, indent=1))
                print(f"{name} {src} T={T:g}: τ = {res['tau']:.3f}")
                from dspark_viz.target import cache_dir

                cdir = cache_dir() / "traces" / name / f"{src}_T{T:g}"      # all traces, for `calibrate`
                cdir.mkdir(parents=True, exist_ok=True)
                for i, tr in enumerate(res["traces"]):
                    tr.to_json(str(cdir / f"{i:04d}.json"))
                if args.traces and src == "project-eval":                  # a few shipped for the faces
                    tdir = ROOT / "assets" / "traces"
                    tdir.mkdir(parents=True, exist_ok=True)
                    for i, tr in enumerate(res["traces"][: args.traces]):
                        tr.to_json(str(tdir / f"{name}_T{T:g}_{i:03d}.json"))


def write_markdown() -> Path:
    cells = [json.loads(p.read_text()) for p in sorted(OUT.glob("*.json"))]
    lines = ["# Results: drafter quality on the embedded target", "",
             "Written by `python benchmarks/results.py` from the cells in `docs/results/` (rerun it to refresh).",
             "Target: SmolLM2-135M-Instruct (embedded GGUF, fp32 on CPU). Full-block verification ℓ = γ = 7 "
             "(the paper's Table 1 setting); τ = committed tokens per round, bonus included.",
             "The training budget of each drafter is listed at the end: every algorithm gets the same data and "
             "steps; cells with few prompts per domain are small samples (see the prompt counts).", ""]
    if not cells:
        lines.append("_No results yet: run the command above._")
    for src in sorted({c["source"] for c in cells}):
        for T in sorted({c["temperature"] for c in cells if c["source"] == src}):
            sub = sorted([c for c in cells if c["source"] == src and c["temperature"] == T],
                         key=lambda c: DRAFTERS.index(c["drafter"]) if c["drafter"] in DRAFTERS else 9)
            doms = sorted({d for c in sub for d in c["per_domain"]})
            lines += [f"## {src}, T = {T:g}", "",
                      f"Prompts per domain: {max(c['n_prompts'] for c in sub) // max(len(doms), 1)}, "
                      f"{sub[0]['max_new_tokens']} new tokens, seeds fixed.", "",
                      "| drafter | " + " | ".join(doms) + " | mixed τ | rounds |",
                      "|---|" + "---|" * (len(doms) + 2)]
            for c in sub:
                lines.append(f"| {LABEL.get(c['drafter'], c['drafter'])} | " +
                             " | ".join(f"{c['per_domain'].get(d, {}).get('tau', float('nan')):.3f}" for d in doms) +
                             f" | **{c['tau']:.3f}** | {c['rounds']} |")
            g = max(len(c["conditional_acceptance"]) for c in sub)
            lines += ["", "Conditional acceptance P(x_k accepted | x_1..x_{k−1} accepted) per position k:", "",
                      "| drafter | " + " | ".join(f"k={k}" for k in range(1, g + 1)) + " |",
                      "|---|" + "---|" * g]
            for c in sub:
                lines.append(f"| {LABEL.get(c['drafter'], c['drafter'])} | " +
                             " | ".join(f"{x:.3f}" for x in c["conditional_acceptance"]) + " |")
            lines += ["", "Prefix survival P(m ≥ k):", "",
                      "| drafter | " + " | ".join(f"k={k}" for k in range(1, g + 1)) + " |", "|---|" + "---|" * g]
            for c in sub:
                lines.append(f"| {LABEL.get(c['drafter'], c['drafter'])} | " +
                             " | ".join(f"{x:.3f}" for x in c["survival"]) + " |")
            lines.append("")
    cal_dir = ROOT / "docs" / "calibration"
    cals = sorted(cal_dir.glob("*.json")) if cal_dir.exists() else []
    if cals:
        lines += ["## Confidence calibration (STS)", "",
                  "Fitted on the full-block traces of the project's evaluation split, measured out of sample on the "
                  "../shared/bench traces (`dspark-viz calibrate --fit-traces … --eval-traces … --json …`). "
                  "ECE of prefix survival a_k against 1[m ≥ k] (20 bins); AUROC of a_k.", ""]
        for p in cals:
            r = json.loads(p.read_text())
            g = len(r["ece_before"])
            kind = ("STS + a level term per position, σ(logit(c_k)/T_k + b_k) (beyond the paper; "
                    "`dspark-viz calibrate --level`)" if p.stem.endswith("_level") else
                    "STS, one temperature per position (the paper's; shipped beside the drafter)")
            lines += [f"**{p.stem}**: {kind} (rounds per position: {r['n']})", "",
                      "| | " + " | ".join(f"k={k}" for k in range(1, g + 1)) + " |", "|---|" + "---|" * g]
            for key, lab in (("ece_before", "ECE before"), ("ece_after", "ECE after STS"), ("auroc", "AUROC")):
                lines.append(f"| {lab} | " + " | ".join(f"{x:.3f}" if x == x else "–" for x in r[key]) + " |")
            lines.append("")
    trained = {c["drafter"]: c.get("card_train", {}) for c in cells}
    if trained:
        lines += ["## Training budget of the evaluated drafters", "",
                  "| drafter | steps | minutes | positions | positions/s | train sequences | train tokens |",
                  "|---|---|---|---|---|---|---|"]
        for d, t in trained.items():
            lines.append(f"| {LABEL.get(d, d)} | {t.get('steps', '')} | {t.get('minutes', '')} | {t.get('positions', '')} "
                         f"| {t.get('positions_per_s', '')} | {t.get('data_sequences', '')} | {t.get('data_tokens', '')} |")
    lines += ["", f"Machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}."]
    md = ROOT / "docs" / "results.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drafters", nargs="+", default=DRAFTERS)
    ap.add_argument("--per-domain", type=int, default=30)
    ap.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0])
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--traces", type=int, default=0, help="save this many project-eval traces per cell to assets/traces")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--batch", type=int, default=8, help="requests decoded together (batched verification; same traces)")
    ap.add_argument("--sources", nargs="+", default=None, help="project-eval and/or shared-bench (default: both)")
    ap.add_argument("--write-only", action="store_true")
    args = ap.parse_args()
    if not args.write_only:
        run(args)
    print(f"wrote {write_markdown()}")


if __name__ == "__main__":
    main()
