"""What of the paper reproduces here: one table of its effects, computed from the data this repository records.

Each row is one effect the paper reports (Table 1, Figs. 2–8, Eq. 1), the paper's number beside ours, our 95 %
interval, and a verdict computed from that interval against "no effect" (a difference of 0, a ratio of 1, an
AUROC of 0.5):

- *reproduced*: the whole interval lies on the paper's side;
- *reversed*: the whole interval lies on the other side;
- *not resolved at this budget*: the interval holds "no effect".

A verdict is about the direction of an effect, not its size: the paper's drafters saw ~1,000× our data, so a
reproduced effect is usually far smaller here (both numbers are in the row). Re-record the traces, retrain a
drafter or re-run a benchmark and the table follows: nothing in it is typed.

Where each interval comes from (``Effect.basis``):
- recorded traces (``assets/traces``, 90 evaluation requests per drafter, the same prompts and seeds for every
  drafter): a paired bootstrap over requests (2,000 resamples, seed 0) of the pooled statistic — τ = committed
  tokens ÷ rounds, acceptance = accepted ÷ rounds that reached the slot;
- the scaling studies (``docs/studies``, same prompts for every cell): a paired bootstrap over prompts of the mean
  per-prompt τ;
- the serving simulation: the t-interval over 5 seeds (``serving.seeds``);
- benchmarks (``docs/data``): the range of the recorded runs (two each), named as such.

Only drafters trained on the same budget are compared (DSpark-RNN, DFlash-style, EAGLE-style: same data, recipe
and steps; the shipped DSpark-Markov had 2,150 more steps on a GPU and appears only where it is compared with
nothing but itself).

Legend: τ committed tokens per round (bonus included), k 1-based draft position, α_k conditional acceptance at k,
γ block size, θ threshold on the prefix survival, ECE expected calibration error, R concurrent requests.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import calibration as cal
from .. import registry
from ..paper import FIG2_READ, FIG2_TEXT, TEXT_MACRO_GAIN, domain_means
from ..paper import figs34, figs56, figs78
from .reproduction import (BEGIN, END, NO_DATA, VERDICTS, Effect, RequestCounts, no_data,  # noqa: F401
                           paired_bootstrap, reproduction_frame, reproduction_markdown, request_counts,
                           verdict_counts, with_table)

ROOT = Path(__file__).resolve().parents[2]      # the source checkout: docs/ lives there, not in the wheel
EQUAL_BUDGET = ("dspark-rnn", "dflash", "eagle")  # one data set, recipe and step count (their cards)


# -- Table 1 and Fig. 2: the recorded traces -----------------------------------------------------------------------
def _traces(temperature: float = 1.0) -> dict[str, list] | None:
    from ..datasets.traces import recorded_traces

    try:
        ts = {d: recorded_traces(d, temperature) for d in EQUAL_BUDGET}
    except FileNotFoundError:
        return None
    prompts = [[t.prompt_ids for t in v] for v in ts.values()]
    if any(p != prompts[0] for p in prompts):
        raise ValueError("the recorded traces do not decode the same prompts: re-record them together")
    return ts


def table1_and_fig2(temperature: float = 1.0) -> list[Effect]:
    L = registry.label
    ts = _traces(temperature)
    g = figs34.FIG3_SETUP["gamma"]
    gain = {o: TEXT_MACRO_GAIN["Qwen3-4B"][o] for o in ("dflash", "eagle3")}
    spread = {o: [v[o] for v in TEXT_MACRO_GAIN.values()] for o in ("dflash", "eagle3")}
    m = domain_means("Qwen3-4B")
    a1 = {d: _fig2_text("dflash", d, 1) - _fig2_text("eagle3", d, 1) for d in ("math", "chat")}
    decay = {d: _fig2_text("dflash", d, 1) - _fig2_text("dflash", d, None) for d in ("code", "chat")}
    suffix = {d: float(np.mean(FIG2_READ[d]["math"][1:g])) for d in ("dspark", "dflash")}
    specs = [  # (where, claim, paper, short, paper_short, (a, b), statistic, null, fmt)
        ("Table 1", "DSpark's τ above DFlash's",
         f"×{1 + gain['dflash']:.2f} (Qwen3-4B; ×{1 + min(spread['dflash']):.2f}–{1 + max(spread['dflash']):.2f} "
         "over three targets, text)", "τ, DSpark ÷ DFlash", f"×{1 + gain['dflash']:.2f}",
         ("dspark-rnn", "dflash"), "tau_ratio", 1.0, "×{:.3f}"),
        ("Table 1", "DSpark's τ above EAGLE-3's",
         f"×{1 + gain['eagle3']:.2f} (Qwen3-4B; ×{1 + min(spread['eagle3']):.2f}–{1 + max(spread['eagle3']):.2f}, "
         "text)", "τ, DSpark ÷ EAGLE-3", f"×{1 + gain['eagle3']:.2f}", ("dspark-rnn", "eagle"), "tau_ratio", 1.0,
         "×{:.3f}"),
        ("Table 1", "DFlash's τ above EAGLE-3's", f"×{m['dflash']['all'] / m['eagle3']['all']:.2f} (Qwen3-4B, "
         "macro average of Table 1)", "τ, DFlash ÷ EAGLE-3", f"×{m['dflash']['all'] / m['eagle3']['all']:.2f}",
         ("dflash", "eagle"), "tau_ratio", 1.0, "×{:.3f}"),
        ("Fig. 2", "a parallel drafter accepts slot 1 more often than an autoregressive one (α₁, DFlash − EAGLE-3)",
         _fig2_pair("dflash", "eagle3", 1), "α₁, DFlash − EAGLE-3",
         " / ".join(f"+{v:.2f}" for v in a1.values()) + " (math / chat)", ("dflash", "eagle"), "a1_diff", 0.0,
         "{:+.3f}"),
        ("Fig. 2", f"a parallel drafter's acceptance decays after slot 1 (α₁ − α₂…{_sub(g)}, DFlash)", _fig2_decay(),
         f"α₁ − α₂…{_sub(g)}, DFlash", " / ".join(f"+{v:.2f}" for v in decay.values()) + " (code / chat)",
         ("dflash", "dflash"), "decay", 0.0, "{:+.3f}"),
        ("Fig. 2", f"DSpark's sequential head keeps slots 2…{g} above DFlash's (α₂…{_sub(g)}, DSpark − DFlash)",
         f"≈ {suffix['dspark']:.2f} vs ≈ {suffix['dflash']:.2f} (math, k = 2…{g}, read off Fig. 2)",
         f"α₂…{_sub(g)}, DSpark − DFlash", f"≈ +{suffix['dspark'] - suffix['dflash']:.2f} (math)", ("dspark-rnn", "dflash"),
         "suffix_diff", 0.0, "{:+.3f}"),
    ]
    out = []
    basis = "paired bootstrap over the recorded requests"
    for where, claim, paper, short, pshort, (a, b), stat, null, fmt in specs:
        here = (f"{L(a)} vs {L(b)}" if a != b else L(a)) + f", recorded traces at T = {temperature:g}, full block"
        if ts is None:
            out.append(no_data(where, claim, paper, short, pshort, here, null, 1, basis, "02", fmt))
            continue
        ca, cb = (request_counts(ts[d], g) for d in (a, b))
        rest = range(2, g + 1)
        f = {"tau_ratio": lambda i: ca.tau(i) / cb.tau(i),
             "a1_diff": lambda i: ca.alpha(i, [1]) - cb.alpha(i, [1]),
             "decay": lambda i: ca.alpha(i, [1]) - ca.alpha(i, rest),
             "suffix_diff": lambda i: ca.alpha(i, rest) - cb.alpha(i, rest)}[stat]
        est, lo, hi = paired_bootstrap(f, len(ts[a]))
        out.append(Effect(where, claim, paper, short, pshort, f"{here}, {len(ts[a])} requests", est, lo, hi, null, 1,
                          basis, "02", fmt))
    return out


def _sub(n: int) -> str:
    """7 → "₇": a slot index as a subscript."""
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _fig2_text(drafter: str, domain: str, k: int | None) -> float:
    return next(r["value"] for r in FIG2_TEXT if (r["drafter"], r["domain"], r["k"]) == (drafter, domain, k))


def _fig2_pair(a: str, b: str, k: int) -> str:
    return "; ".join(f"{_fig2_text(a, d, k):.2f} vs {_fig2_text(b, d, k):.2f} ({d})" for d in ("math", "chat")) + \
        " (text)"


def _fig2_decay() -> str:
    return "; ".join(f"{_fig2_text('dflash', d, 1):.2f} → {_fig2_text('dflash', d, None):.2f} ({d})"
                     for d in ("code", "chat")) + " (text)"


# -- Figs. 3 and 4: the scaling studies ----------------------------------------------------------------------------
def _cells(folder: Path) -> dict[str, dict]:
    from .study_report import load_cells

    return {c["name"]: c for c in load_cells(folder)} if folder.is_dir() else {}


def _per_prompt(cell: dict) -> np.ndarray:
    return np.array([r["tau"] for r in cell["per_prompt"]])


def figs3_and_4(folder: Path | None = None) -> list[Effect]:
    from .study_report import study_frame

    cells = _cells(Path(folder) if folder else ROOT / "docs" / "studies")
    depth = study_frame(list(cells.values()), "depth") if cells else None
    gam = study_frame(list(cells.values()), "gamma") if cells else None
    basis = "paired bootstrap over the studies' prompts"

    def pick(df, algo, **kw):
        if df is None or not len(df):
            return None
        r = df[(df.algo == algo) & np.logical_and.reduce([df[k] == v for k, v in kw.items()])]
        return cells[r.name.iloc[0]] if len(r) else None

    def row(where, claim, paper, short, pshort, here, parts, stat, null=1.0, fmt="×{:.3f}"):
        if any(p is None for p in parts):
            return no_data(where, claim, paper, short, pshort, here, null, 1, basis, "06", fmt)
        x = [_per_prompt(p) for p in parts]
        if len({len(v) for v in x}) != 1:
            raise ValueError(f"{here}: the cells decoded different numbers of prompts")
        est, lo, hi = paired_bootstrap(lambda i: stat(*(v[i].mean() for v in x)), len(x[0]))
        return Effect(where, claim, paper, short, pshort, f"{here}; {parts[0]['steps']} steps each, {len(x[0])} "
                      "prompts", est, lo, hi, null, 1, basis, "06", fmt)

    d_layers = sorted(set(depth[depth.algo == "dflash"].layers)) if depth is not None and len(depth) else []
    deepest = d_layers[-1] if d_layers else None
    printed = figs34.FIG4_GAIN_PRINTED
    doms = ("math", "code", "chat")
    at7 = [printed[d][8] for d in doms]
    widen = [printed[d][16] - printed[d][8] for d in doms]
    return [
        row("Fig. 3", "DSpark's τ rises with depth, most from 1 to 2 layers", "rises, steepest 1 → 2 (text)",
            "τ, DSpark 2 ÷ 1 layers", "> 1", "DSpark-Markov, 2 vs 1 layers, γ = 7",
            [pick(depth, "dspark", layers=2), pick(depth, "dspark", layers=1)], lambda a, b: a / b),
        row("Fig. 3", "a 2-layer DSpark above the deepest DFlash", "2 layers above DFlash's 5 in every domain (text)",
            "τ, DSpark 2 layers ÷ deepest DFlash", "> 1",
            f"DSpark-Markov 2 layers vs DFlash-style {deepest} layers, γ = 7",
            [pick(depth, "dspark", layers=2), pick(depth, "dflash", layers=deepest) if deepest else None],
            lambda a, b: a / b),
        row("Fig. 4", "DSpark's τ above DFlash's at γ = 7",
            " / ".join(f"×{1 + v:.2f}" for v in at7) + " (math / code / chat, text)", "τ, DSpark ÷ DFlash at γ = 7",
            f"×{1 + min(at7):.2f}–{1 + max(at7):.2f}", "DSpark-Markov vs DFlash-style, 1 layer, γ = 7",
            [pick(gam, "dspark", gamma=7), pick(gam, "dflash", gamma=7)], lambda a, b: a / b),
        row("Fig. 4", "DSpark's gain over DFlash widens from γ = 7 to 15",
            " / ".join(f"+{printed[d][8]:.0%} → +{printed[d][16]:.0%}" for d in doms) + " (math / code / chat, text)",
            "that ratio, γ = 15 − γ = 7", f"+{min(widen):.2f} … +{max(widen):.2f}",
            "DSpark-Markov ÷ DFlash-style at γ = 15 minus at γ = 7, 1 layer",
            [pick(gam, "dspark", gamma=15), pick(gam, "dflash", gamma=15), pick(gam, "dspark", gamma=7),
             pick(gam, "dflash", gamma=7)], lambda a, b, c, d: a / b - c / d, null=0.0, fmt="{:+.3f}"),
    ]


# -- Figs. 5 and 6: the confidence head and STS, on the DSpark-Markov traces ---------------------------------------
def figs5_and_6(temperature: float = 1.0) -> list[Effect]:
    """Fitted and judged as notebook 03 does: STS fitted on every other request of each domain, judged on the
    others; the threshold sweep on the shipped STS."""
    from ..datasets.traces import recorded_traces

    here = f"DSpark-Markov, recorded traces at T = {temperature:g}, the held-out half of the requests"
    basis = "bootstrap over the held-out requests"
    k1 = figs56.FIG6[1]
    rate = figs56.FIG5_ACCEPT_RATE
    rise = [v[1] - v[0] for v in rate.values()]
    specs = [("Fig. 6", "the confidence head ranks rounds (AUROC of a₁ for slot 1 surviving, above 0.5)",
              f"{k1[2]:.3f} at k = 1; {figs56.FIG6_TEXT['auc'][0]:.2f}–{figs56.FIG6_TEXT['auc'][1]:.2f} (Fig. 6, "
              f"{figs56.FIG6_DATASET})", "AUROC of a₁", f"{k1[2]:.2f}", 0.5, 1, "{:.3f}"),
             ("Fig. 6", "STS lowers the held-out ECE at k = 1 (after − before)",
              f"{k1[0]:.3f} → {k1[1]:.3f} (Fig. 6, {figs56.FIG6_DATASET})", "ECE at k = 1, after − before STS",
              f"{k1[1] - k1[0]:+.3f}".replace("-", "−"), 0.0, -1, "{:+.3f}"),
             ("Fig. 5", "a higher threshold raises the accepted share of verified tokens (θ = 0.9 − θ = 0, bonus "
              "counted as the paper does)",
              "; ".join(f"{v[0]:.3f} → {v[1]:.3f} ({d})" for d, v in rate.items()) + " (text)",
              "accepted share, θ = 0.9 − θ = 0", f"+{min(rise):.2f} … +{max(rise):.2f}", 0.0, 1, "{:+.3f}")]
    try:
        traces = recorded_traces("dspark", temperature)
    except FileNotFoundError:
        return [no_data(w, c, p, sh, ps, here, n, s, basis, "03", f) for w, c, p, sh, ps, n, s, f in specs]
    fit, test = [], []
    for dom in ("math", "code", "chat"):
        ts = [t for t in traces if t.meta["domain"] == dom]
        fit += ts[0::2]
        test += ts[1::2]
    sts = cal.fit_sts(*cal.rollouts_from_traces(fit))
    per = [cal.rollouts_from_traces([t]) for t in test]                   # per request: conf (m, γ), accepted, ℓ
    raw = [np.asarray(c, dtype=float) for c, _, _ in per]
    after = [sts.apply(c) for c in raw]
    m = [np.asarray(a) for _, a, _ in per]
    hit = [a >= 1 for a in m]                                              # slot 1 survived
    shipped = _shipped_sts()
    surv = [(shipped or sts).survival(c) for c in raw]                     # (rounds, γ) prefix survival a_k
    verified = {th: [(s >= th).sum(axis=1) for s in surv] for th in (0.0, 0.9)}   # ℓ(θ): the slots with a_k ≥ θ

    def cat(xs, i):
        return np.concatenate([xs[j] for j in i])

    def auroc(i):
        return cal.auroc(cat(raw, i)[:, 0], cat(hit, i))

    def ece_change(i):
        y = cat(hit, i).astype(float)
        return cal.ece(cat(after, i)[:, 0], y) - cal.ece(cat(raw, i)[:, 0], y)

    def share(i, th):                                                      # (accepted + bonus) ÷ (verified + bonus)
        ell, acc = cat(verified[th], i), cat(m, i)
        return (np.minimum(acc, ell).sum() + len(ell)) / (ell.sum() + len(ell))

    stats = [auroc, ece_change, lambda i: share(i, 0.9) - share(i, 0.0)]
    out = []
    for (w, c, p, sh, ps, n, s, f), stat in zip(specs, stats):
        est, lo, hi = paired_bootstrap(stat, len(test))
        where = f"{here} ({len(test)})" + ("; the shipped STS" if w == "Fig. 5" else "; STS fitted on the other half")
        out.append(Effect(w, c, p, sh, ps, where, est, lo, hi, n, s, basis, "03", f))
    return out


def _shipped_sts():
    from ..drafters.neural import calibration_path

    p = calibration_path("dspark")
    return cal.STSCalibration.load(p) if p.is_file() else None


# -- Figs. 7 and 8: under load -------------------------------------------------------------------------------------
def figs7_and_8(data: Path | None = None, seeds: Sequence[int] = range(5)) -> list[Effect]:
    from ..cost import gpu_like
    from ..datasets.traces import recorded_traces
    from ..serving.seeds import headline_seeds, interval, sweep_seeds

    gains = [v for v in figs78.FIG7 if v.quantity == figs78.THROUGHPUT_GAIN and "moderate" in v.at]
    paper = "; ".join(f"×{v.value:.2f} ({v.engine}, {v.at})" for v in gains) + " over MTP-1 (text)"
    pshort = " / ".join(f"×{v.value:.2f}" for v in gains) + " over MTP-1"
    claim = "DSpark's throughput above the baseline's at a per-user SLA"
    out = []
    try:
        traces = recorded_traces("dspark", 1.0)
    except FileNotFoundError:
        traces = None
    here = ("simulated: the gpu-like profile, recorded DSpark-Markov rounds (T = 1), hardware-aware ÷ fixed-1 "
            "(MTP-1's one draft) at fixed-1's per-user speed at R = 32")
    short = "throughput ÷ fixed-1 at the SLA, simulated"
    basis = f"t-interval over {len(seeds)} seeds"
    if traces is None:
        out.append(no_data("Figs. 7–8", claim, paper, short, pshort, here, 1.0, 1, basis, "05", "×{:.2f}"))
    else:
        runs = sweep_seeds(traces, ["fixed-1", "hardware-aware"], gpu_like(), seeds, Rs=(1, 2, 4, 8, 16, 32, 64, 128),
                           n_rounds=100)
        iv = interval(headline_seeds(runs, "hardware-aware", "fixed-1", sla_R=32).throughput_gain_at_sla)
        out.append(Effect("Figs. 7–8", claim, paper, short, pshort, here, iv.mean, iv.lo, iv.hi, 1.0, 1, basis, "05",
                          "×{:.2f}"))
    bench = _engine_bench(Path(data) if data else ROOT / "docs" / "data")
    here = "measured: the live engine on a CPU, DSpark-Markov ÷ plain decoding at R = 4, T = 0 (`dspark-viz serve-bench`)"
    short = "throughput ÷ plain decoding, R = 4, a CPU"
    if bench is None:
        out.append(no_data("Figs. 7–8", claim, paper, short, pshort, here, 1.0, 1, "range of the recorded runs", "05",
                            "×{:.2f}"))
    else:
        name, ratios = bench
        out.append(Effect("Figs. 7–8", claim, paper, short, pshort, f"{here}, {name}", float(np.mean(ratios)),
                          min(ratios), max(ratios), 1.0, 1, f"range of {len(ratios)} recorded runs", "05", "×{:.2f}"))
    return out


def _engine_bench(folder: Path, R: int = 4) -> tuple[str, list[float]] | None:
    """(machine, [DSpark ÷ plain throughput of each repeat at R]) from the newest ``serve-bench`` record made on
    the shipped profile."""
    files = sorted(p for p in folder.glob("engine_bench_*.json") if "engine-profile" not in p.name)
    if not files:
        return None
    d = json.loads(files[-1].read_text())
    by = {(r["method"], r["repeat"]): r["throughput"] for r in d["runs"] if r["R"] == R}
    reps = sorted({k[1] for k in by})
    return f"{d['cpu']}, {d['dtype'].replace('bfloat16', 'bf16')}", [by["dspark", i] / by["plain", i] for i in reps]


# -- Eq. 1: the speed-up over our plain decoding -------------------------------------------------------------------
BENCH_METHOD = "dspark_sched@bf16"


def eq1(data: Path | None = None) -> list[Effect]:
    folder = Path(data) if data else ROOT / "docs" / "data"
    paper = "> 1 wherever τ · t_step > t_draft + t_verify (Eq. 1; the paper times serving, not single requests)"
    out = []
    for T in (0, 1):
        runs = _bench_runs(folder, T)
        claim = f"speculation decodes faster than plain decoding (tokens/s ratio, T = {T})"
        short = f"tokens/s ÷ plain decoding, T = {T}"
        here = "DSpark-Markov, hardware-aware, bf16, `dspark-viz bench`"
        if not runs:
            out.append(no_data("Eq. 1", claim, paper, short, "> 1", here, 1.0, 1, "range of the recorded runs", "07",
                                "×{:.2f}"))
            continue
        r = [x for _, x in runs]
        out.append(Effect("Eq. 1", claim, paper, short, "> 1", f"{here}, {runs[0][0]}", float(np.mean(r)), min(r),
                          max(r), 1.0, 1, f"range of {len(r)} recorded runs", "07", "×{:.2f}"))
    return out


def _bench_runs(folder: Path, T: int) -> list[tuple[str, float]]:
    """(machine, DSpark ÷ plain) of each ``dspark-viz bench`` run at T recorded on the newest date, on the machine of
    the newest run (files bench_<date>_<machine>_<dtypes>_T<T>[_repeat].json; ``_before`` runs, kept for a
    before/after table, left out). A run at one dtype keys its methods without the dtype."""
    files = sorted(p for p in folder.glob(f"bench_*_T{T}*.json") if "gate" not in p.name and "before" not in p.name)
    if not files:
        return []
    date, machine = max((p.name.split("_")[1], p.name.split("_")[2]) for p in files)
    out = []
    for p in files:
        if p.name.split("_")[1:3] != [date, machine]:
            continue
        methods = json.loads(p.read_text())["methods"]
        one_dtype = not any("@" in k for k in methods)              # a --dtype run names methods bare
        m = methods.get(BENCH_METHOD) or (methods.get(BENCH_METHOD.split("@")[0]) if one_dtype else None)
        if m is not None:
            out.append((machine, m["ratio_vs_plain"]))
    return out


# -- the table -----------------------------------------------------------------------------------------------------
def reproduction_table() -> list[Effect]:
    """Every effect, in the paper's order."""
    return table1_and_fig2() + figs3_and_4() + figs5_and_6() + figs7_and_8() + eq1()


__all__ = ["Effect", "VERDICTS", "NO_DATA", "BEGIN", "END", "table1_and_fig2", "figs3_and_4", "figs5_and_6",
           "figs7_and_8", "eq1", "reproduction_table", "reproduction_frame", "reproduction_markdown", "with_table",
           "verdict_counts", "paired_bootstrap", "request_counts"]
