"""Write docs/results.md: τ per domain (Table-1 style) and conditional acceptance per position (Fig. 2 style)
for the shipped drafters, full-block verification (ℓ = γ), on the project's evaluation split and on
the benchmark prompt folder (--bench-dir or $DSPARK_BENCH_DIR: gsm8k = math, humaneval = code, mt-bench = chat).

Every (drafter, source, temperature) cell is cached as JSON in docs/results/ so an interrupted run
resumes, and the markdown is regenerated from whatever cells exist:

    python benchmarks/results.py --per-domain 30 --temperatures 0 1 --max-new-tokens 128 --batch 8
    python benchmarks/results.py --write-only
    python benchmarks/results.py --simulate --write-only     # serving simulation (docs/simulation/)

The simulation replays the DSpark drafter's out-of-sample traces (benchmark prompt folder, T = 1, recorded by the
cells above into $DSPARK_CACHE/traces) with the shipped STS applied, on each named engine profile.
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

from dspark_viz.evaluation.full_block import evaluate_drafter, load_eval_prompts  # noqa: E402
from dspark_viz.settings import assets, bench_files  # noqa: E402
from dspark_viz.train.cards import training_runs  # noqa: E402

OUT = ROOT / "docs" / "results"
SIM = ROOT / "docs" / "simulation"
SIM_PROFILES = ["gpu-like", "jagged", "cpu"]
DRAFTERS = ["dspark", "dspark-rnn", "dflash", "eagle"]
# the benchmark folder is split once (datasets.prompts.bench_half): tools/select_drafters.py chooses the shipped
# drafters on the "select" half, and the published figures come from the "report" half
HALF = {"project-eval": None, "shared-bench": "report"}
LABEL = {"dspark": "DSpark-Markov", "dspark-rnn": "DSpark-RNN", "dflash": "DFlash-style", "eagle": "EAGLE-style",
         "lookup": "prompt lookup"}


def sources(bench_dir: str | None = None) -> dict[str, list[Path]]:
    """The project's evaluation suite, and the benchmark prompt folder when one is given."""
    s = {"project-eval": [assets("prompts", "eval.jsonl")]}
    if bench_files(bench_dir):
        s["shared-bench"] = bench_files(bench_dir)
    return s


def cell_path(drafter: str, source: str, T: float) -> Path:
    return OUT / f"{drafter}__{source}__T{T:g}.json"


def run(args) -> None:
    import torch

    from dspark_viz.drafters import load_drafter
    from dspark_viz.model.target import load_target

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
        for src, files in sources(args.bench_dir).items():
            if args.sources and src not in args.sources:
                continue
            half = HALF.get(src)
            recs = load_eval_prompts(files, per_domain=args.per_domain, half=half)
            for T in args.temperatures:
                path = cell_path(name, src, T)
                if path.exists() and not args.force:
                    continue
                t0 = time.perf_counter()
                res = evaluate_drafter(target, drafter, recs, temperature=T, max_new_tokens=args.max_new_tokens,
                                       seed=args.seed, batch=args.batch)
                body = {k: v for k, v in res.items() if k != "traces"}
                card = getattr(drafter, "card", {})
                body.update(source=src, half=half, seconds=round(time.perf_counter() - t0, 1),
                            card_train=card.get("train", {}), card_config=card.get("config", {}),
                            card_sha256=card.get("sha256", ""))
                path.write_text(json.dumps(body, indent=1))
                print(f"{name} {src} T={T:g}: τ = {res['tau']:.3f}")
                from dspark_viz.model.target import cache_dir

                cdir = cache_dir() / "traces" / name / f"{src}_T{T:g}"      # all traces, for `calibrate`
                cdir.mkdir(parents=True, exist_ok=True)
                for i, tr in enumerate(res["traces"]):
                    tr.to_json(str(cdir / f"{i:04d}.json"))


def simulate(args) -> None:
    """Trace-driven serving simulation per profile → docs/simulation/PROFILE.json (curves + headline)."""
    from dspark_viz.calibration import STSCalibration
    from dspark_viz.drafters.neural import calibration_path
    from dspark_viz.serving.simulate import SWEEP_POLICIES, headline, sweep
    from dspark_viz.cost import named_profile
    from dspark_viz.model.target import cache_dir
    from dspark_viz.trace import Trace

    tdir = cache_dir() / "traces" / args.sim_drafter / args.sim_traces
    traces = [Trace.from_json(str(p)) for p in sorted(tdir.glob("*.json"))]
    if not traces:
        raise SystemExit(f"no traces in {tdir}: run the {args.sim_drafter} cells first (they record them)")
    cal_file = calibration_path(args.sim_drafter)
    cal = STSCalibration.load(cal_file) if cal_file.exists() else None
    for t in traces:                                     # schedule on calibrated confidences, as decoding does
        for r in t.rounds:
            ds = sorted(r.drafts, key=lambda d: d.k)
            if cal is not None and ds and all(d.confidence is not None for d in ds):
                for d, c in zip(ds, cal.apply([float(d.confidence) for d in ds])):
                    d.confidence_cal = float(c)
    SIM.mkdir(parents=True, exist_ok=True)
    for name in args.profiles:
        prof = named_profile(name)
        df = sweep(traces, SWEEP_POLICIES, prof, n_rounds=args.sim_rounds)
        where = (f" (measured on {prof.meta['cpu']}, {prof.meta.get('dtype', '')}, {prof.meta.get('when', '')})"
                 if prof.meta.get("cpu") else "")
        body = {"profile": prof.name + where, "drafter": args.sim_drafter,
                "traces": f"{args.sim_traces} ({len(traces)} prompts)",
                "calibration": cal_file.name if cal is not None else None, "rounds": args.sim_rounds,
                "curves": df.to_dict(orient="records"), **headline(df),
                "floor": headline(df, policy="hardware-aware+floor"), "oracle": headline(df, policy="oracle")}
        (SIM / f"{name}.json").write_text(json.dumps(body, indent=1, default=float))
        print(f"{name}: gain at SLA {body['throughput_gain_at_sla']:.3f}, per-user at matched throughput "
              f"{body['per_user_speedup_at_matched_throughput']:.3f}, min vs best fixed {body['min_ratio_vs_best_fixed']:.3f}")


def simulation_markdown() -> list[str]:
    sims = [json.loads(p.read_text()) for p in sorted(SIM.glob("*.json"))] if SIM.exists() else []
    if not sims:
        return []
    lines = ["## Serving simulation (trace-driven)", "",
             "`python benchmarks/results.py --simulate --write-only`: R concurrent requests replay the recorded "
             "rounds of the drafter below (acceptance outcomes from real traces, confidences through the shipped "
             "STS); each policy picks the verification lengths; a step takes 1/SPS(B). Read against the paper's claims: on a "
             "GPU-like profile HardwareAware well above FixedLength(1) in throughput at the SLA and in per-user "
             "speed at matched throughput, and close to the best fixed length at every R. "
             "HardwareAware is Algorithm 1 exactly; \"stale floor\" (beyond the paper, `hardware-aware+floor`) "
             "admits the first K sorted candidates unconditionally, K sized on the batch two steps old as in "
             "AsyncGlobal, then applies the early stop (lossless by the same argument; tests/test_scheduler.py). "
             "The oracle is a yardstick, not a policy (`OracleReference` in dspark_viz/serving/simulate.py): it reads each "
             "round's recorded outcome and verifies only drafts that will be accepted, so what it cannot reach no "
             "scheduler can on these drafts; the gap between it and HardwareAware bounds what better confidences "
             "could buy (a perfect head buys part of it: see the ceiling section above).",
             "", "| profile | drafter, traces | gain at SLA | per-user speed-up at matched throughput | "
             "oracle: gain / per-user | min over R of HA / best fixed (at R) | HA mean budget falls with R |",
             "|---|---|---|---|---|---|---|"]
    for d in sims:
        ha = sorted([c for c in d["curves"] if c["policy"] == "hardware-aware"], key=lambda c: c["R"])
        bud = [c["mean_budget"] for c in ha]
        mono = all(b2 <= b1 + 1e-9 for b1, b2 in zip(bud, bud[1:]))
        fl = d.get("floor", {})
        floor = (f"; with the stale floor {fl['min_ratio_vs_best_fixed']:.3f} (R = {fl['argmin_R_vs_best_fixed']})"
                 if fl else "")
        orc = d.get("oracle")
        oracle = (f"{orc['throughput_gain_at_sla']:.3f} / {orc['per_user_speedup_at_matched_throughput']:.3f}"
                  if orc else "–")
        lines.append(f"| {d['profile']} | {d['drafter']}, {d['traces']}, {d['rounds']} steps per point | "
                     f"{d['throughput_gain_at_sla']:.3f} | {d['per_user_speedup_at_matched_throughput']:.3f} | "
                     f"{oracle} | {d['min_ratio_vs_best_fixed']:.3f} (R = {d['argmin_R_vs_best_fixed']}){floor} | "
                     f"{'yes' if mono else 'no'} |")
    for d in sims:
        rows = {}
        for c in d["curves"]:
            rows.setdefault(c["R"], {})[c["policy"]] = c
        lines += ["", f"**{d['profile']}**: throughput (tokens/s) per concurrency R", "",
                  "| R | FixedLength(1) | best fixed (ℓ) | HardwareAware | HA / best fixed | HA mean ℓ | "
                  "HA + stale floor (/ best fixed) | AsyncGlobal | oracle |", "|---|---|---|---|---|---|---|---|---|"]
        for R in sorted(rows):
            pr = rows[R]
            fx = {k: v for k, v in pr.items() if k.startswith("fixed-")}
            best = max(fx, key=lambda k: fx[k]["throughput"])
            ha, ag, hf = pr["hardware-aware"], pr.get("async-global"), pr.get("hardware-aware+floor")
            fl = (f"{hf['throughput']:.1f} ({hf['throughput'] / fx[best]['throughput']:.3f})" if hf else "–")
            lines.append(f"| {R} | {pr['fixed-1']['throughput']:.1f} | {fx[best]['throughput']:.1f} ({best[6:]}) | "
                         f"{ha['throughput']:.1f} | {ha['throughput'] / fx[best]['throughput']:.3f} | "
                         f"{ha['mean_budget']:.2f} | {fl} | {ag['throughput'] if ag else float('nan'):.1f} | "
                         f"{pr['oracle']['throughput'] if 'oracle' in pr else float('nan'):.1f} |")
    return lines + [""]


def shipped_sha(drafter: str) -> str:
    """sha256 of the shipped drafter's weights, from its card ('' when it is not shipped)."""
    from dspark_viz.drafters.neural import ASSETS, SHIPPED

    card = ASSETS / f"{SHIPPED.get(drafter, drafter)}.json"
    return json.loads(card.read_text()).get("sha256", "") if card.exists() else ""


def write_markdown() -> Path:
    cells = [json.loads(p.read_text()) for p in sorted(OUT.glob("*.json"))]
    lines = ["# Results: drafter quality on the embedded target", "",
             "Written by `python benchmarks/results.py` from the cells in `docs/results/`: "
             "`python benchmarks/results.py --per-domain 30 --batch 8` decodes the missing cells, "
             "`--write-only` rewrites this page from the cells there.",
             "Target: SmolLM2-135M-Instruct (embedded GGUF, fp32 on CPU). Full-block verification ℓ = γ = 7 "
             "(the paper's Table 1 setting); τ = committed tokens per round, bonus included.",
             "Prompt sources: **project-eval** is the shipped evaluation split "
             "(`assets/prompts/eval.jsonl`, math / code / chat); **shared-bench** is a benchmark prompt "
             "folder given with `--bench-dir` or `DSPARK_BENCH_DIR` (GSM8K = math, HumanEval = code, "
             "MT-Bench = chat), its report half: the folder is split once, the shipped drafters were chosen on the "
             "other half (`tools/select_drafters.py`), so these prompts played no part in choosing them.",
             "The training budget of each drafter (layers, corpus, steps) is listed at the end: a difference "
             "between two drafters with different budgets mixes method with budget. Cells with few prompts per "
             "domain are small samples (see the prompt counts).", ""]
    if not cells:
        lines.append("_No results yet: run the command above._")
    for src in sorted({c["source"] for c in cells}):
        for T in sorted({c["temperature"] for c in cells if c["source"] == src}):
            sub = sorted([c for c in cells if c["source"] == src and c["temperature"] == T],
                         key=lambda c: DRAFTERS.index(c["drafter"]) if c["drafter"] in DRAFTERS else 9)
            doms = sorted({d for c in sub for d in c["per_domain"]})
            missing = [LABEL[d] for d in DRAFTERS if d not in {c["drafter"] for c in sub}]
            lines += [f"## {src}, T = {T:g}", "",
                      f"Prompts per domain: {max(c['n_prompts'] for c in sub) // max(len(doms), 1)}, "
                      f"{sub[0]['max_new_tokens']} new tokens, seeds fixed."
                      + (f" Not run for the shipped drafters yet: {', '.join(missing)}." if missing else ""), "",
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
                  "benchmark-folder traces (`dspark-viz calibrate --fit-traces … --eval-traces … --json …`). "
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
    from confidence_ceiling import markdown as ceiling_markdown          # benchmarks/, beside this script

    lines += ceiling_markdown()
    lines += simulation_markdown()
    shipped = {d: shipped_sha(d) for d in {c["drafter"] for c in cells}}
    stale = sorted({f"{LABEL.get(c['drafter'], c['drafter'])} ({c['source']}, T = {c['temperature']:g})"
                    for c in cells if c.get("card_sha256") and c["card_sha256"] != shipped[c["drafter"]]})
    unsplit = sorted({f"{LABEL.get(c['drafter'], c['drafter'])} (T = {c['temperature']:g})" for c in cells
                      if HALF.get(c["source"]) and c.get("half") != HALF[c["source"]]})
    if unsplit:
        lines += ["**Cells of the whole benchmark folder** (its first prompts per domain, measured before the "
                  "folder was split into a selection and a report half; rerun them with `--force`): "
                  + ", ".join(unsplit) + ".", ""]
    if stale:
        lines += ["**Stale cells** (evaluated a drafter file that is no longer the shipped one; rerun them with "
                  "`--force`): " + ", ".join(stale) + ".", ""]
    trained = {c["drafter"]: (c.get("card_train", {}), c.get("card_config", {})) for c in cells}
    if trained:
        lines += ["## Training budget of the evaluated drafters", "",
                  "Depth as in the paper's setup: the parallel drafters may be deeper than the one-layer "
                  "autoregressive EAGLE-style drafter, since they draft a whole block in one forward.", "",
                  "A drafter trained on from another (a warm start) lists each run, the first one first (`a + b`).",
                  "",
                  "| drafter | draft layers | trained on | steps | minutes | positions | positions/s | train sequences "
                  "| train tokens |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for d, (t, cf) in trained.items():
            runs = training_runs(t)
            each = lambda key: " + ".join(str(r.get(key, "")) for r in runs)  # noqa: E731
            where = " + ".join("CPU" if r.get("device", "cpu") == "cpu" else r["device"] for r in runs)
            lines.append(f"| {LABEL.get(d, d)} | {cf.get('n_layers', '?')} | {where} | {each('steps')} "
                         f"| {each('minutes')} | {each('positions')} | {each('positions_per_s')} "
                         f"| {t.get('data_sequences', '')} | {t.get('data_tokens', '')} |")
    lines += ["", "The cells are decoded in fp32 (τ does not depend on the machine's speed). This page was "
              f"written on: {platform.processor() or platform.machine()}, Python {platform.python_version()}."]
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
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--batch", type=int, default=8, help="requests decoded together (batched verification; same traces)")
    ap.add_argument("--bench-dir", default=None, help="folder of benchmark prompt files (*.jsonl; gsm8k = math, "
                    "humaneval = code, mt-bench = chat); default $DSPARK_BENCH_DIR")
    ap.add_argument("--sources", nargs="+", default=None, help="project-eval and/or shared-bench (default: both)")
    ap.add_argument("--write-only", action="store_true", help="no decoding (with --simulate: only the simulation)")
    ap.add_argument("--simulate", action="store_true", help="run the serving simulation on the recorded traces")
    ap.add_argument("--profiles", nargs="+", default=SIM_PROFILES)
    ap.add_argument("--sim-drafter", default="dspark")
    ap.add_argument("--sim-traces", default="shared-bench_T1", help="trace folder under $DSPARK_CACHE/traces/DRAFTER")
    ap.add_argument("--sim-rounds", type=int, default=400, help="decode steps simulated per (policy, R)")
    args = ap.parse_args()
    if not args.write_only:
        run(args)
    if args.simulate:
        simulate(args)
    print(f"wrote {write_markdown()}")


if __name__ == "__main__":
    main()
