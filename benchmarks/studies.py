"""Scaling studies of the drafters at a reduced budget: depth (the paper's Fig. 3), block size γ (Fig. 4, with its
latency panel) and corpus size.

Every cell trains one drafter configuration with the same recipe (train/config.py), the same steps, sequences
per step and blocks per sequence, on the first ``--max-seqs`` sequences of one feature cache, then decodes the
project's evaluation prompts (assets/prompts/eval.jsonl: held out from the corpus by its decontamination) with
full-block verification (ℓ = γ) at ``--temperature``. Its validation curve is the trainer's held-out estimate
(τ_est, slot-1 acceptance on the cache's validation split, teacher-forced) at every checkpoint.

    python benchmarks/studies.py --study depth --data CACHE --max-seqs 900 --steps 300
    python benchmarks/studies.py --study gamma --data CACHE --max-seqs 900 --steps 300
    python benchmarks/studies.py --study data  --data CACHE --sizes 900 3600 --steps 300
    python benchmarks/studies.py --study ablation --data CACHE --max-seqs 900 --steps 300
    python benchmarks/studies.py --latency          # draft + verify time per γ on torch's stock path
    python benchmarks/studies.py --write-only       # docs/studies.md from the cells that exist

Cells are cached as JSON in docs/studies/ (a cell shared by two studies runs once); runs (checkpoints, logs,
exported drafters) live under $DSPARK_CACHE/studies/CELL, so an interrupted study resumes where it stopped.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "studies"
STUDIES = {
    "depth": dict(algos=["dspark", "dflash"], layers=[1, 2, 3], gammas=[7]),
    # the paper's Fig. 4 counts the anchor: draft lengths 4, 8, 12, 16 are γ = 3, 7, 11, 15
    "gamma": dict(algos=["dspark", "dspark-rnn", "dflash"], layers=[1], gammas=[3, 7, 11, 15]),
    "data": dict(algos=["dspark"], layers=[1], gammas=[7]),
    # does the confidence loss's gradient into the backbone and the Markov head cost draft quality? (the paper
    # trains the three terms jointly and says no more); compared with the depth study's D = 1 cells
    "ablation": dict(algos=["dspark"], layers=[1], gammas=[7], variants=[dict(conf_grad=False)]),
}
STOCK_ENV = {"DSPARK_SKINNY": "0", "DSPARK_PACKED_GQA": "0", "DSPARK_FUSED_LAYERS": "0", "DSPARK_LEAN_LAYERS": "0"}


def cell_name(algo: str, layers: int, gamma: int, max_seqs: int, steps: int, variant: dict | None = None) -> str:
    from dspark_viz.evaluation.study_report import variant_tag

    return f"{algo}_L{layers}_g{gamma}_n{max_seqs}_s{steps}{variant_tag(variant)}"


def cells_of(study: str, max_seqs: int, steps: int, sizes: list[int]) -> list[dict]:
    spec = STUDIES[study]
    out = []
    for n in (sizes if study == "data" else [max_seqs]):
        for algo in spec["algos"]:
            for L in spec["layers"]:
                for g in spec["gammas"]:
                    for v in spec.get("variants", [{}]):
                        out.append(dict(algo=algo, layers=L, gamma=g, max_seqs=n, steps=steps,
                                        name=cell_name(algo, L, g, n, steps, v), **({"variant": v} if v else {})))
    return out


def machine(precision: str = "fp32") -> str:
    import torch

    from dspark_viz.fast import tune

    cpu, _ = tune.cpu_model_and_flags()
    return f"{cpu} ({os.cpu_count()} cores) · torch threads {torch.get_num_threads()} · {precision}"


def val_curve(run_dir: Path) -> list[dict]:
    """(step, τ_est, acc1) of every checkpoint's held-out evaluation in the run's log."""
    rows = []
    log = run_dir / "log.jsonl"
    for line in log.read_text().splitlines() if log.exists() else []:
        r = json.loads(line)
        if "val" in r and r["val"]:
            rows.append(dict(step=r["step"], tau_est=r["val"].get("tau_est"), acc1=r["val"].get("acc1"),
                             loss=r["val"].get("loss")))
    return rows


def run_cell(cell: dict, args, target, records) -> dict:
    from dspark_viz import metrics
    from dspark_viz.drafters.neural import load_drafter_file
    from dspark_viz.evaluation.full_block import evaluate_drafter
    from dspark_viz.settings import cache_dir
    from dspark_viz.train.config import TrainConfig
    from dspark_viz.evaluation.study_report import LABEL
    from dspark_viz.train.trainer import train

    run_dir = cache_dir() / "studies" / cell["name"]
    drafter_file = run_dir / "drafter.json"
    tc = TrainConfig(steps=cell["steps"], lr=args.lr, ckpt_every=args.ckpt_every, precision=args.precision,
                     **cell.get("variant", {}))
    t0 = time.perf_counter()
    train(target, cell["algo"], args.data, run_dir, drafter_file, tc, init=None, max_seqs=cell["max_seqs"],
          cfg_overrides=dict(n_layers=cell["layers"], gamma=cell["gamma"]), log=lambda m: print(m, flush=True))
    train_s = time.perf_counter() - t0
    drafter = load_drafter_file(drafter_file, target, name=cell["name"])
    t0 = time.perf_counter()
    res = evaluate_drafter(target, drafter, records, temperature=args.temperature,
                           max_new_tokens=args.max_new_tokens, seed=0, batch=args.batch)
    card = drafter.card.get("train", {})
    per_prompt = [dict(domain=t.meta.get("domain", "mixed"), tau=metrics.tau([t])) for t in res["traces"]]
    return {**cell, "label": LABEL[cell["algo"]], "tau": res["tau"], "per_domain": res["per_domain"],
            "conditional_acceptance": res["conditional_acceptance"], "rounds": res["rounds"],
            "n_prompts": res["n_prompts"], "per_prompt": per_prompt, "temperature": args.temperature,
            "max_new_tokens": args.max_new_tokens,
            "val_curve": val_curve(run_dir), "train": {k: card.get(k) for k in
                                                       ("data_sequences", "data_tokens", "steps", "minutes",
                                                        "positions", "positions_per_s", "precision")},
            "recipe": card.get("recipe"), "train_seconds_this_run": round(train_s, 1),
            "eval_seconds": round(time.perf_counter() - t0, 1),
            "machine": machine(card.get("precision") or args.precision)}


def run(args) -> None:
    import torch

    from dspark_viz.evaluation.full_block import load_eval_prompts
    from dspark_viz.model.target import load_target
    from dspark_viz.settings import assets

    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.data:
        raise SystemExit("--data CACHE is required to train (a feature cache from `dspark-viz data --corpus`)")
    target = load_target(dtype="fp32")
    records = load_eval_prompts([assets("prompts", "eval.jsonl")], per_domain=args.per_domain)
    OUT.mkdir(parents=True, exist_ok=True)
    for cell in cells_of(args.study, args.max_seqs, args.steps, args.sizes):
        path = OUT / f"{cell['name']}.json"
        if path.exists() and not args.force:
            continue
        body = run_cell(cell, args, target, records)
        path.write_text(json.dumps(body, indent=1))
        print(f"{cell['name']}: τ = {body['tau']:.3f}", flush=True)


def latency(args) -> None:
    """Draft and verify seconds per γ, every γ on torch's stock path (the fast path ends at 8 rows), with the
    study's DSpark-Markov and DFlash-style drafters of each γ → docs/studies/latency.json."""
    os.environ.update(STOCK_ENV)
    import torch

    from dspark_viz.drafters.neural import load_drafter_file
    from dspark_viz.evaluation.round_timing import measure_round_times
    from dspark_viz.model.target import load_target
    from dspark_viz.settings import cache_dir

    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_target(dtype="fp32")
    rows = []
    for cell in cells_of("gamma", args.max_seqs, args.steps, []):
        f = cache_dir() / "studies" / cell["name"] / "drafter.json"
        if not f.exists():
            print(f"skip {cell['name']}: not trained")
            continue
        rt = measure_round_times(target, load_drafter_file(f, target), repeats=args.repeats)
        rows.append(dict(name=cell["name"], algo=cell["algo"], gamma=cell["gamma"], t_draft=rt.t_draft,
                         t_verify_full=rt.t_verify[-1], t_plain=rt.t_plain))
        print(f"{cell['name']}: draft {rt.t_draft * 1e3:.1f} ms, verify γ+1 {rt.t_verify[-1] * 1e3:.1f} ms")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latency.json").write_text(json.dumps({"path": "torch stock (" + ", ".join(
        f"{k}={v}" for k, v in STOCK_ENV.items()) + ")", "dtype": "fp32", "machine": machine(),
        "platform": platform.platform(), "rows": rows}, indent=1))


def write_markdown() -> None:
    from dspark_viz.evaluation.study_report import studies_markdown

    text = studies_markdown(OUT)
    (ROOT / "docs" / "studies.md").write_text(text)
    print(f"wrote docs/studies.md ({len(text.splitlines())} lines)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--study", choices=sorted(STUDIES), default=None)
    ap.add_argument("--data", default=None, help="feature cache (`dspark-viz data --corpus …`)")
    ap.add_argument("--max-seqs", type=int, default=900, help="train on the first N cached sequences")
    ap.add_argument("--sizes", type=int, nargs="*", default=[], help="--study data: the corpus sizes (sequences)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--per-domain", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="training precision of every cell (bf16: autocast, for CPUs with AVX512-BF16 / AMX); "
                         "one study's cells share it")
    ap.add_argument("--repeats", type=int, default=9, help="--latency: timed repeats per part")
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--write-only", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--out", default=None, help="cell folder (default docs/studies; the markdown is written only there)")
    a = ap.parse_args(argv)
    global OUT
    OUT = Path(a.out) if a.out else OUT
    if a.latency:
        latency(a)
    elif a.study and not a.write_only:
        run(a)
    if OUT == ROOT / "docs" / "studies":
        write_markdown()


if __name__ == "__main__":
    main()
