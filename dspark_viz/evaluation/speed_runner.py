"""Running the decode-speed comparison: which prompts, every method on each (interleaved), the summary.

Legend: n prompts, γ block size, τ mean committed tokens per round, T temperature.

Methods run interleaved in one process: for prompt i the method order is rotated by i, so slow drift of
a shared machine hits every method alike. Reported per method (``BenchReport.methods``): tok_per_s
(median over prompts), ratio_vs_plain (median of per-prompt speed ratios against our ``plain`` decoding at the
same dtype: the speculation gain, the paper's Eq. 1 on this machine), ratio_vs_hf_generate and
ratio_vs_hf_prompt_lookup (the same against transformers), tau, drafted (share of rounds that drafted),
time_split (draft / verify / schedule / other, our loop only), tokens, seconds, n_prompts and, at T = 0,
same_as_plain / same_as_hf_generate (how many outputs equal plain decoding's at the same dtype / ``hf_generate``'s).
``BenchReport.memory_floor``: the machine's read bandwidth, measured once, and per dtype plain decoding's ms per
decoded token against the floor (bytes of the weights one forward reads ÷ bandwidth); with a ``probe``
(machine_info.ReadProbe) the bandwidth is also read just before each plain decode and the floor ratio is the median
of the per-prompt ratios, each against the bandwidth of its own moment (a shared host's read rate can double or
halve between minutes). The methods are in
``speed_methods``; the text and Markdown views in ``speed_report``; the command in ``cli.bench``.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..datasets.prompts import load_prompts
from ..settings import assets, bench_files
from .machine_info import READ_BUFFERS, floor_ms, last_level_cache_bytes, machine_info, peak_rss_mb, weight_bytes
from .speed_methods import BASELINE, METHODS, PLAIN, BenchSettings


# -- prompts ----------------------------------------------------------------------------------------
def default_prompt_files(bench_dir: str | None = None) -> list[Path]:
    """The benchmark prompt folder's files (--bench-dir / $DSPARK_BENCH_DIR), else the shipped eval suite."""
    return bench_files(bench_dir) or [assets("prompts", "eval.jsonl")]


def balanced_prompts(files, n_per_file: int) -> list[dict]:
    """n evenly spaced records (first turn) from each file, interleaved file by file."""
    if n_per_file < 1:
        raise ValueError(f"--n-prompts must be ≥ 1, got {n_per_file}")
    per_file = []
    for f in files:
        recs = load_prompts(f)
        if not recs:
            raise ValueError(f"{f} holds no prompts")
        k = min(n_per_file, len(recs))
        idx = sorted({round(i * (len(recs) - 1) / max(k - 1, 1)) for i in range(k)})
        per_file.append([{"prompt": recs[i]["turns"][0], "domain": recs[i]["domain"], "file": Path(f).name,
                          "index": i} for i in idx])
    out = []
    for i in range(max(map(len, per_file))):
        out += [p[i] for p in per_file if i < len(p)]
    return out


# -- run ---------------------------------------------------------------------------------------------
@dataclass
class BenchReport:
    """One run (one dtype or one mixed-dtype set, one temperature); ``to_dict`` is the bench JSON."""
    methods: dict[str, dict]            # run name (method or method@label) -> summary (module docstring)
    machine: dict                       # machine_info.machine_info, + dtype "a+b" and baseline when mixed
    settings: dict                      # BenchSettings as a dict
    prompts: list[dict]                 # [{file, index, domain}] in run order
    command: str = ""                   # the command line that produced it
    per_prompt: list[dict] = field(default_factory=list)   # one row per (prompt, run name)
    peak_rss_mb: float | None = None    # process peak resident memory after this run (all loaded models)
    memory_floor: dict = field(default_factory=dict)   # read bandwidth and plain decoding against its floor

    def to_dict(self) -> dict:
        return asdict(self)


def bench_methods(target, prompts: list[dict], methods: list[str], settings: BenchSettings,
                  warmup: bool = True, log=None, labels_of: dict[str, list[str]] | None = None,
                  bandwidth: float | None = None, probe=None) -> BenchReport:
    """Time `methods` on every prompt (order rotated per prompt) and summarise.

    ``target`` may be a dict {label: target} (e.g. {"fp32": …, "bf16": …}): every method then runs on each
    target as ``method@label``, all interleaved in one rotation, and ×hf_gen compares with the fastest
    ``hf_generate@label`` (the baseline's best dtype); =hf compares with the baseline of the same label.
    ``labels_of`` {method: [label, …]} runs a method on those targets only (default: on every one).
    ×hf_lookup compares in the same way with the fastest ``hf_prompt_lookup@label``; ×plain and =plain compare
    with ``plain@label``, our plain decoding at the same dtype. ``bandwidth`` (bytes/s, machine_info.read_bandwidth)
    adds plain decoding's memory floor; ``probe`` (() → bytes/s) reads the bandwidth again before each plain
    decode."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown bench method(s) {unknown}: choose from {', '.join(METHODS)}")
    targets = target if isinstance(target, dict) else {"": target}
    runs = [(f"{m}@{lab}" if lab else m, m, lab) for lab in targets for m in methods          # (name, method, label)
            if labels_of is None or lab in labels_of.get(m, targets)]
    first = next(iter(targets.values()))
    ids_list = [first.chat_ids(p["prompt"]) for p in prompts]
    if warmup:
        _warm_up(targets, runs, ids_list[0], settings)
    names = [n for n, _, _ in runs]
    rows = []
    for i, ids in enumerate(ids_list):
        res = _time_prompt(targets, runs, i, ids, settings, rows, probe if bandwidth else None)
        if log:
            log(f"prompt {i + 1}/{len(ids_list)} ({prompts[i]['domain']}): " + "  ".join(
                f"{n} {len(res[n].output_ids) / res[n].seconds:.1f}" for n in names) + " tok/s")
    speed = {n: statistics.median(r["tok_per_s"] for r in rows if r["method"] == n) for n in names}
    bases = [_base_of(lab) for lab in targets if _base_of(lab) in names]
    best_base = max(bases, key=speed.get) if bases else None
    lookups = [n for n, m, _ in runs if m == "hf_prompt_lookup"]
    best_lookup = max(lookups, key=speed.get) if lookups else None
    greedy = settings.temperature == 0
    summary = {n: _summarise(n, lab, rows, names, speed[n], best_base, best_lookup, greedy) for n, _, lab in runs}
    return BenchReport(summary, _machine(targets, best_base, best_lookup), asdict(settings),
                       [{k: p[k] for k in ("file", "index", "domain")} for p in prompts], per_prompt=rows,
                       peak_rss_mb=peak_rss_mb(), memory_floor=memory_floor(targets, rows, names, bandwidth))


def _base_of(lab: str) -> str:
    return f"{BASELINE}@{lab}" if lab else BASELINE


def _plain_of(lab: str) -> str:
    return f"{PLAIN}@{lab}" if lab else PLAIN


def _warm_up(targets: dict, runs: list[tuple], ids, settings: BenchSettings) -> None:
    """Every run once on the first prompt, at most 8 new tokens: first-call costs (allocator, lazy imports,
    kernels) stay out of the timings."""
    short = BenchSettings(**{**asdict(settings), "max_new_tokens": min(8, settings.max_new_tokens)})
    for _, m, lab in runs:
        METHODS[m](targets[lab], ids, short)


def _time_prompt(targets: dict, runs: list[tuple], i: int, ids, settings: BenchSettings, rows: list[dict],
                 probe=None) -> dict:
    """Prompt i through every run, the order rotated by i; one row per run appended to ``rows``. ``probe``:
    the read bandwidth is read right before each plain decode. → {run name: the method's result}."""
    order = runs[i % len(runs):] + runs[: i % len(runs)]
    res, read_at = {}, {}
    for n, m, lab in order:
        if probe is not None and m == PLAIN:
            read_at[n] = probe() / 1e9                                       # GB/s, right before this decode
        res[n] = METHODS[m](targets[lab], ids, settings)
    for n, m, lab in runs:
        r, b, pl = res[n], _base_of(lab), _plain_of(lab)
        k = len(r.output_ids)
        rows.append(dict(prompt=i, method=n, label=lab, tokens=k, seconds=r.seconds, tok_per_s=k / r.seconds,
                         tau=r.tau, time_split=r.time_split, drafted=r.drafted, decode_s=r.decode_s,
                         same_as_baseline=(r.output_ids == res[b].output_ids) if b in res else None,
                         same_as_plain=(r.output_ids == res[pl].output_ids) if pl in res else None,
                         read_GBps=read_at.get(n)))
    return res


def _median_ratio(mine: list[dict], rows: list[dict], ref_name: str | None) -> float | None:
    """Median over prompts of this run's tok/s ÷ run ``ref_name``'s on the same prompt (None without one)."""
    if ref_name is None:
        return None
    ref = {r["prompt"]: r["tok_per_s"] for r in rows if r["method"] == ref_name}
    return statistics.median(r["tok_per_s"] / ref[r["prompt"]] for r in mine)


def _summarise(n: str, lab: str, rows: list[dict], names: list[str], speed: float, best_base: str | None,
               best_lookup: str | None, greedy: bool) -> dict:
    """One run's summary (the module docstring's fields) from its per-prompt rows."""
    mine = [r for r in rows if r["method"] == n]
    has_plain = _plain_of(lab) in names
    drafted = [r["drafted"] for r in mine if r["drafted"] is not None]
    taus = [r["tau"] for r in mine if r["tau"] is not None]
    splits = [r["time_split"] for r in mine if r["time_split"]]
    return dict(
        tok_per_s=speed, ratio_vs_plain=_median_ratio(mine, rows, _plain_of(lab) if has_plain else None),
        ratio_vs_hf_generate=_median_ratio(mine, rows, best_base),
        ratio_vs_hf_prompt_lookup=_median_ratio(mine, rows, best_lookup),
        tau=statistics.mean(taus) if taus else None,
        drafted=statistics.mean(drafted) if drafted else None,
        time_split={k: statistics.mean(s[k] for s in splits) for k in splits[0]} if splits else None,
        tokens=sum(r["tokens"] for r in mine), seconds=sum(r["seconds"] for r in mine),
        same_as_hf_generate=(sum(bool(r["same_as_baseline"]) for r in mine)
                             if best_base is not None and greedy else None),
        same_as_plain=(sum(bool(r["same_as_plain"]) for r in mine) if has_plain and greedy else None),
        n_prompts=len(mine))


def _machine(targets: dict, best_base: str | None, best_lookup: str | None) -> dict:
    """machine_info of the first target, with each target's kernel paths and the baselines compared with."""
    info = machine_info(next(iter(targets.values())))
    info["paths"] = {lab or str(t.dtype).replace("torch.", ""): {"path_choice": t.paths.choice,
                                                               "size_paths": {str(n): p for n, p in
                                                                              sorted(t.paths.sizes.items())}}
                     for lab, t in targets.items()}
    info["lookup_baseline"] = best_lookup
    if len(targets) > 1:
        info["dtype"] = "+".join(str(t.dtype).replace("torch.", "") for t in targets.values())
        info["baseline"] = best_base
    return info


def memory_floor(targets: dict, rows: list[dict], names: list[str], bandwidth: float | None) -> dict:
    """The read bandwidth (GB/s) and, per dtype where plain decoding ran: the bytes of the weights one forward
    reads, the floor (those bytes ÷ bandwidth; read_buffers: the buffers it is the median of), plain decoding's
    median ms per decoded token (prefill left out) and
    whether those bytes fit the last-level cache (then the floor is not a bound: machine_info's docstring). Where the
    plain rows carry their own reading (``read_GBps``, bench_methods' probe): read_samples_GBps, the floor at their
    median and plain_over_floor as the median over prompts of each decode's ms per token ÷ its own moment's floor."""
    if not bandwidth:
        return {}
    llc = last_level_cache_bytes()
    out = {"read_GBps": bandwidth / 1e9, "read_buffers": READ_BUFFERS, "llc_MB": llc / 1e6 if llc else None,
           "by_dtype": {}}
    for lab, t in targets.items():
        n = f"{PLAIN}@{lab}" if lab else PLAIN
        per_tok = [r["decode_s"] / (r["tokens"] - 1) for r in rows
                   if r["method"] == n and r["decode_s"] is not None and r["tokens"] > 1]
        wb = weight_bytes(t)
        floor = floor_ms(wb, bandwidth)
        plain_ms = 1e3 * statistics.median(per_tok) if per_tok else None
        row = dict(weight_MB=wb / 1e6, floor_ms_per_token=floor, plain_ms_per_token=plain_ms,
                   plain_over_floor=plain_ms / floor if plain_ms is not None else None,
                   fits_llc=bool(llc and wb <= llc))
        paired = [(r["decode_s"] / (r["tokens"] - 1), r["read_GBps"]) for r in rows
                  if r["method"] == n and r["decode_s"] is not None and r["tokens"] > 1 and r.get("read_GBps")]
        if paired:                                   # each decode against the bandwidth of its own moment
            reads = [g for _, g in paired]
            row.update(read_samples_GBps=reads, floor_ms_per_token=floor_ms(wb, statistics.median(reads) * 1e9),
                       plain_over_floor=statistics.median(s / (wb / (g * 1e9)) for s, g in paired))
        out["by_dtype"][lab or str(t.dtype).replace("torch.", "")] = row
    return out


def best_per_method(rep: BenchReport) -> dict[str, str]:
    """In a mixed-dtype report: each method's fastest run name (by median tok/s), e.g. {"plain": "plain@bf16"}."""
    best: dict[str, str] = {}
    for n, s in rep.methods.items():
        m = n.split("@")[0]
        if m not in best or s["tok_per_s"] > rep.methods[best[m]]["tok_per_s"]:
            best[m] = n
    return best


def load_reports(path) -> list[BenchReport]:
    """The runs of a --json file (one report, or {"runs": [...]})."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"cannot read bench JSON {path}: {e}") from e
    runs = d["runs"] if isinstance(d, dict) and "runs" in d else [d]
    out = []
    for r in runs:
        try:
            out.append(BenchReport(**{k: r[k] for k in ("methods", "machine", "settings", "prompts")},
                                   command=r.get("command", ""), per_prompt=r.get("per_prompt", []),
                                   peak_rss_mb=r.get("peak_rss_mb"), memory_floor=r.get("memory_floor") or {}))
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path} is not a dspark-viz bench JSON: missing {e}") from e
    return out
