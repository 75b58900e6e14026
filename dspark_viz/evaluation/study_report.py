"""Read the scaling studies' cells (benchmarks/studies.py → docs/studies/*.json) into tables and markdown.

A cell is one trained drafter configuration: algo, layers (depth D), gamma (γ), max_seqs (sequences of the corpus
it trained on), steps; with its full-block τ on the evaluation prompts, per-slot conditional acceptance, the
trainer's held-out curve (val_curve: step, τ_est, acc1) and its training budget. ``latency.json`` holds the
draft and verify times per γ, all on one path.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from .. import registry
from ..paper import figs34
from ..serving.seeds import interval
from .reproduction import paired_bootstrap

LABEL = registry.field_map("label")      # algo → printed name, from the one table of drafters
# a recipe variant's setting → (the suffix of its cell name, its words in labels)
VARIANTS = {"conf_grad": {False: ("cdetach", "confidence loss into its head only")}}


def variant_tag(variant: dict | None) -> str:
    """The cell-name suffix of a recipe variant: {"conf_grad": False} → "_cdetach"; "" for none."""
    return "".join(f"_{VARIANTS[k][v][0]}" for k, v in sorted((variant or {}).items()))


def variant_label(cell: dict) -> str:
    """The drafter's name with its recipe variant, if any: "DSpark-Markov (confidence loss into its head only)"."""
    base = registry.label(cell["algo"])
    v = cell.get("variant") or {}
    return base + (" (" + ", ".join(VARIANTS[k][x][1] for k, x in sorted(v.items())) + ")" if v else "")


def load_cells(folder: str | Path) -> list[dict]:
    """Every cell JSON of ``folder`` (latency.json excluded), sorted by name."""
    folder = Path(folder)
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json")) if p.name != "latency.json"]


def load_latency(folder: str | Path) -> dict | None:
    p = Path(folder) / "latency.json"
    return json.loads(p.read_text()) if p.is_file() else None


def _prompt_interval(cell: dict) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean over the cell's prompts of their τ and its 95 % t-interval (nan without them)."""
    taus = [r["tau"] for r in cell.get("per_prompt") or []]
    if len(taus) < 2:
        return (float("nan"),) * 3
    iv = interval(taus)
    return iv.mean, iv.lo, iv.hi


def cells_frame(cells: list[dict]) -> pd.DataFrame:
    """One row per cell: algo, label, layers, gamma, max_seqs, data_tokens, steps, tau, acc1, tau_est (last
    checkpoint), minutes; tau_prompts with tau_lo / tau_hi: the mean of the per-prompt τ and its 95 % interval."""
    rows = []
    for c in cells:
        curve = c.get("val_curve") or [{}]
        acc = c.get("conditional_acceptance") or [None]
        tr = c.get("train") or {}
        rows.append(dict(name=c["name"], algo=c["algo"], label=variant_label(c), layers=c["layers"],
                         variant=",".join(f"{k}={x}" for k, x in sorted((c.get("variant") or {}).items())),
                         gamma=c["gamma"], max_seqs=c["max_seqs"], data_tokens=tr.get("data_tokens"),
                         steps=c["steps"], tau=c["tau"], acc1=acc[0], tau_est=curve[-1].get("tau_est"),
                         **dict(zip(("tau_prompts", "tau_lo", "tau_hi"), _prompt_interval(c))),
                         minutes=tr.get("minutes"), n_prompts=c.get("n_prompts"),
                         temperature=c.get("temperature"), max_new_tokens=c.get("max_new_tokens")))
    return pd.DataFrame(rows)


def study_frame(cells: list[dict], study: str) -> pd.DataFrame:
    """The cells of one study, selected by the study's fixed settings (depth: γ = 7; gamma: D = 1; data: DSpark-Markov
    D = 1, γ = 7, every corpus size; ablation: D = 1, γ = 7 DSpark-Markov with and without its recipe variants, and
    DFlash-style) and one training budget: the most common one (data: the one with the most corpus sizes). Only
    the ablation reads cells of a recipe variant."""
    df = cells_frame(cells)
    if df.empty:
        return df
    if study == "ablation":
        df = df[(df.layers == 1) & (df.gamma == 7) & df.algo.isin(["dspark", "dflash"])]
        with_variant = df[df.variant != ""]
        if with_variant.empty:
            return with_variant
        df = df[(df.steps == with_variant.steps.iloc[0]) & (df.max_seqs == with_variant.max_seqs.iloc[0])]
        return df.sort_values(["algo", "variant"]).reset_index(drop=True)
    df = df[df.variant == ""]
    if study == "depth":
        df = df[(df.gamma == 7) & df.algo.isin(["dspark", "dflash"])]
    elif study == "gamma":
        df = df[(df.layers == 1) & df.algo.isin(["dspark", "dspark-rnn", "dflash"])]
    elif study == "data":
        df = df[(df.layers == 1) & (df.gamma == 7) & (df.algo == "dspark")]
    else:
        raise ValueError(f"unknown study {study!r}: depth, gamma, data or ablation")
    if df.empty:
        return df
    if study == "data":                 # the budget that covers the most corpus sizes (ties: the longer one)
        sizes = df.groupby("steps").max_seqs.nunique()
        df = df[df.steps == max(sizes.index, key=lambda s: (sizes[s], s))]
    else:
        df = df[df.steps == df.steps.mode().iloc[0]]
        df = df[df.max_seqs == df.max_seqs.mode().iloc[0]]
    return df.sort_values(["algo", "layers", "gamma", "max_seqs"]).reset_index(drop=True)


def gain_frame(cells: list[dict], over: str = "dflash") -> pd.DataFrame:
    """DSpark-Markov's τ ÷ ``over``'s at each γ of the block-size study (paired bootstrap over the prompts, as the
    reproduction table) beside the paper's printed gains of Fig. 4 (per domain, 5 layers): one row per (γ, source)
    with gain, lo, hi (lo = hi = gain for the paper's printed values)."""
    gam = study_frame(cells, "gamma")
    by = {c["name"]: c for c in cells}
    rows = []
    for g in sorted(set(gam.gamma)) if len(gam) else []:
        pair = [gam[(gam.algo == a) & (gam.gamma == g)] for a in ("dspark", over)]
        if any(p.empty for p in pair):
            continue
        a, b = (np.array([r["tau"] for r in by[p.name.iloc[0]]["per_prompt"]]) for p in pair)
        est, lo, hi = paired_bootstrap(lambda i: a[i].mean() / b[i].mean(), len(a))
        rows.append(dict(gamma=int(g), source=f"here (D = {int(pair[0].layers.iloc[0])})", gain=est, lo=lo, hi=hi))
    for dom, by_len in figs34.FIG4_GAIN_PRINTED.items():
        for length, v in by_len.items():
            rows.append(dict(gamma=length - 1, source=f"paper, {dom} (D = 5)", gain=1 + v, lo=1 + v, hi=1 + v))
    return pd.DataFrame(rows, columns=["gamma", "source", "gain", "lo", "hi"])


def curves_frame(cells: list[dict]) -> pd.DataFrame:
    """Long format of every cell's held-out curve: name, algo, layers, gamma, max_seqs, step, tau_est, acc1."""
    rows = []
    for c in cells:
        for r in c.get("val_curve") or []:
            rows.append(dict(name=c["name"], algo=c["algo"], label=variant_label(c), layers=c["layers"],
                             gamma=c["gamma"], max_seqs=c["max_seqs"], step=r["step"], tau_est=r.get("tau_est"),
                             acc1=r.get("acc1")))
    return pd.DataFrame(rows)


def _table(df: pd.DataFrame, cols: list[tuple[str, str, str]]) -> list[str]:
    lines = ["| " + " | ".join(h for h, _, _ in cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(("—" if pd.isna(r[c]) else format(r[c], f))
                                       for _, c, f in cols) + " |")
    return lines


def studies_markdown(folder: str | Path) -> str:
    """docs/studies.md: one section per study with its cells, curves (τ_est by checkpoint) and the latency panel."""
    cells = load_cells(folder)
    out = ["# Scaling studies", "",
           "Written by `python benchmarks/studies.py --write-only` from the cells in [`studies/`](studies) "
           "(each names its command settings, machine and training budget). Every drafter of a study is trained with "
           "the same recipe, steps, sequences per step and blocks per sequence on the first N sequences of one feature "
           "cache — a reduced budget next to the shipped drafters' — then decodes the project's evaluation prompts "
           "(held out from the corpus) with full-block verification (ℓ = γ). τ: committed tokens per round; acc₁: "
           "conditional acceptance at slot 1; τ_est: the trainer's teacher-forced estimate on its held-out split at "
           "the last checkpoint; train min: wall-clock minutes on the cell's machine, which may have run other jobs "
           "meanwhile (a record, not a cost comparison).", "",
           "Commands (CACHE: `dspark-viz data --corpus corpus/answers --max-seqs N --out CACHE`, N at least the largest "
           "size; each run resumes where it stopped): `python benchmarks/studies.py --study depth --data CACHE "
           "--steps 400 --threads 1`, the same with `--study gamma` and `--study ablation`, `--study data --sizes 900 3600 … "
           "--steps 2000`, "
           "then `--latency` on a quiet machine and `--write-only` for this page.", ""]
    if not cells:
        return "\n".join(out + ["No cells yet: run `python benchmarks/studies.py --study depth --data CACHE`.", ""])
    cols = [("drafter", "label", "s"), ("D", "layers", "d"), ("γ", "gamma", "d"), ("sequences", "max_seqs", "d"),
            ("answer tokens", "data_tokens", ",.0f"), ("steps", "steps", "d"), ("τ", "tau", ".3f"),
            ("acc₁", "acc1", ".3f"), ("τ_est", "tau_est", ".3f"), ("train min", "minutes", ".1f")]
    titles = {"depth": "Depth (the paper's Fig. 3): D = 1, 2, 3 at γ = 7",
              "gamma": "Block size (the paper's Fig. 4): draft lengths γ + 1 = 4, 8, 12, 16 at D = 1",
              "data": "Corpus size: DSpark-Markov, D = 1, γ = 7",
              "ablation": "Ablation: the confidence loss's gradient (D = 1, γ = 7)"}
    for study, title in titles.items():
        df = study_frame(cells, study)
        if df.empty:
            continue
        r0 = df.iloc[0]
        out += [f"## {title}", "",
                f"{int(r0.n_prompts)} evaluation prompts, T = {r0.temperature:g}, {int(r0.max_new_tokens)} new tokens "
                f"each, seed 0 for every drafter.", ""]
        out += _table(df, cols) + [""]
        cur = curves_frame([c for c in cells if c["name"] in set(df.name)])
        if not cur.empty:
            piv = cur.pivot_table(index="step", columns="name", values="tau_est")
            out += ["Held-out τ_est by step:", "", "| step | " + " | ".join(piv.columns) + " |",
                    "|---|" + "---|" * len(piv.columns)]
            for step, row in piv.iterrows():
                out.append(f"| {step} | " + " | ".join("—" if pd.isna(v) else f"{v:.3f}" for v in row) + " |")
            out.append("")
    lat = load_latency(folder)
    if lat and lat.get("rows"):
        out += ["## Latency per γ (Fig. 4's right panel)", "",
                f"`python benchmarks/studies.py --latency`: one draft of γ tokens and one verify forward over γ + 1 "
                f"tokens after a 128-token context, median of the timed repeats, every γ on one path: {lat['path']}, "
                f"{lat['dtype']}, {lat['machine']}.", "",
                "| drafter | γ | draft ms | verify ms (γ + 1 tokens) | plain step ms |", "|---|---|---|---|---|"]
        for r in lat["rows"]:
            out.append(f"| {LABEL.get(r['algo'], r['algo'])} | {r['gamma']} | {r['t_draft'] * 1e3:.1f} | "
                       f"{r['t_verify_full'] * 1e3:.1f} | {r['t_plain'] * 1e3:.1f} |")
        out.append("")
    return "\n".join(out)
