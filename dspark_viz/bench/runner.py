"""Side-by-side decode speed: transformers' generate vs our plain loop vs speculative decoding.

Legend: n prompts, γ block size, τ mean committed tokens per round, T temperature.

Every method is one function ``(target, prompt_ids, settings) -> MethodResult`` registered in
``METHODS`` (add neural drafters or policies with ``register_method``). Methods run interleaved in
one process: for prompt i the method order is rotated by i, so slow drift of a shared machine hits
every method alike. Reported per method: median tok/s over prompts, the median of per-prompt speed
ratios against ``hf_generate``, τ, the time split (draft / verify / schedule / other, our loop only)
and, at T = 0, how many outputs equal ``hf_generate``'s.

    python -m dspark_viz.bench --n-prompts 4 --max-new-tokens 128 --json out.json
    dspark-viz bench --methods hf_generate,plain --n-prompts 1 --max-new-tokens 64

HF prompt lookup runs with ``prompt_lookup_num_tokens=10`` (the value of the transformers docs) and
its default 2-gram matching; our lookup drafter uses γ = 7 and 1–3-gram matching.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import torch
from ..settings import assets, bench_files

BASELINE = "hf_generate"


@dataclass
class BenchSettings:
    max_new_tokens: int = 128
    temperature: float = 0.0
    seed: int = 0
    gamma: int = 7                      # our lookup drafter's block
    hf_lookup_tokens: int = 10          # HF prompt_lookup_num_tokens


class MethodResult(NamedTuple):
    output_ids: list[int]               # new tokens (up to and including a stop token)
    seconds: float                      # wall time of the whole request (prefill included)
    tau: float | None                   # committed tokens per round (None when not measured)
    time_split: dict[str, float] | None  # draft / verify / schedule / other fractions (our loop)


Method = Callable[[object, list[int], BenchSettings], MethodResult]
METHODS: dict[str, Method] = {}
DEFAULT_METHODS: list[str] = []         # what `bench` runs without --methods (the list)


def register_method(name: str, fn: Method | None = None, default: bool = True):
    """Register a benchmark method (usable as a decorator); default=False: only on request (--methods)."""
    def deco(f: Method) -> Method:
        METHODS[name] = f
        if default and name not in DEFAULT_METHODS:
            DEFAULT_METHODS.append(name)
        return f
    return deco(fn) if fn is not None else deco


def _until_stop(ids: list[int], stop_ids) -> list[int]:
    for i, t in enumerate(ids):
        if t in stop_ids:
            return ids[: i + 1]
    return ids


def _hf(target, ids: list[int], s: BenchSettings, **extra) -> MethodResult:
    stop = sorted(target.stop_ids)
    x = torch.tensor([ids], device=target.device)                                  # (1, n)
    kw = dict(do_sample=False)
    if s.temperature > 0:
        kw = dict(do_sample=True, temperature=s.temperature, top_k=0, top_p=1.0)
        torch.manual_seed(s.seed)
    t0 = time.perf_counter()
    y = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=s.max_new_tokens,
                              eos_token_id=stop or None, pad_token_id=stop[0] if stop else None, **kw, **extra)
    dt = time.perf_counter() - t0
    return MethodResult(_until_stop(y[0, len(ids):].tolist(), target.stop_ids), dt, None, None)


@register_method("hf_generate")
def hf_generate(target, ids, s):
    return _hf(target, ids, s)


@register_method("hf_prompt_lookup")
def hf_prompt_lookup(target, ids, s):
    return _hf(target, ids, s, prompt_lookup_num_tokens=s.hf_lookup_tokens)


def _ours(target, drafter, ids, s, policy=None, sps=None) -> MethodResult:
    from ..decode import speculative_generate
    from ..metrics import tau, time_split

    t0 = time.perf_counter()
    tr = speculative_generate(target, drafter, prompt_ids=ids, temperature=s.temperature,
                              max_new_tokens=s.max_new_tokens, seed=s.seed, policy=policy, sps=sps)
    dt = time.perf_counter() - t0
    return MethodResult(tr.output_ids, dt, tau(tr), time_split(tr))


@register_method("plain")
def plain(target, ids, s):
    return _ours(target, None, ids, s)


@register_method("lookup")
def lookup(target, ids, s):
    from ..drafters import load_drafter

    return _ours(target, load_drafter("lookup", target, gamma=s.gamma), ids, s)


_LOADED: dict[tuple[int, str], object] = {}      # drafters loaded once per (target, name) in a bench run


def _drafter(target, name: str):
    from ..drafters import load_drafter, speed_only

    key = (id(target), name)
    if key not in _LOADED:
        _LOADED[key] = speed_only(load_drafter(name, target))
    return _LOADED[key]


def _cpu_profile(target=None):
    from ..serving.profile import profile_for

    return profile_for(target)


def _neural(name: str, scheduled: bool = False, ell: int | None = None):
    def run(target, ids, s):
        from ..scheduler import FixedLength, HardwareAware

        d = _drafter(target, name)
        if scheduled:
            return _ours(target, d, ids, s, policy=HardwareAware(), sps=_cpu_profile(target))
        return _ours(target, d, ids, s, policy=FixedLength(ell or d.gamma))
    return run


register_method("dflash", _neural("dflash"))
register_method("eagle", _neural("eagle"))
register_method("dspark_fixed", _neural("dspark"))
register_method("dspark_sched", _neural("dspark", scheduled=True))
register_method("dspark_lookup", _neural("dspark+lookup", scheduled=True))
for _ell in range(1, 7):    # DSpark at each shorter fixed ℓ: the "best fixed ℓ" check (--methods dspark_l1,…)
    register_method(f"dspark_l{_ell}", _neural("dspark", ell=_ell), default=False)
del _ell


# -- prompts ----------------------------------------------------------------------------------------
def default_prompt_files(bench_dir: str | None = None) -> list[Path]:
    """The benchmark prompt folder's files (--bench-dir / $DSPARK_BENCH_DIR), else the shipped eval suite."""
    return bench_files(bench_dir) or [assets("prompts", "eval.jsonl")]


def balanced_prompts(files, n_per_file: int) -> list[dict]:
    """n evenly spaced records (first turn) from each file, interleaved file by file."""
    from ..train.prompts import load_prompts

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


# -- machine ------------------------------------------------------------------------------------------
def machine_info(target=None) -> dict:
    import transformers

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = dict(cpu=cpu, cores=os.cpu_count(), torch_threads=torch.get_num_threads(), torch=torch.__version__,
                transformers=transformers.__version__, python=platform.python_version(),
                platform=platform.platform())
    if target is not None:
        info.update(target=target.name, device=str(target.device), dtype=str(target.dtype).replace("torch.", ""),
                    matmul=getattr(target, "matmul_path", "stock"), attention=getattr(target, "attention_path", "sdpa"),
                    layers=getattr(target, "layer_path", "stock"))
        info["draft_diagnostics"] = "off"              # see _drafter (recorded from session 8's later runs on)
        if info["layers"] == "lean":                    # fused native layers (recorded from session 8 on)
            from ..fast.lean import fused
            info["layers"] = "lean+fused" if fused(target.model) else "lean"
        if str(target.device) == "cpu":                 # kernels.wide_bf16 in force (recorded from session 6 on)
            from ..fast.kernels import native_bf16_gemm
            info["bf16_gemm"] = "native" if native_bf16_gemm() else "widened"
            if info["matmul"] == "skinny-kernel":       # which kernel layout (recorded from session 7 on)
                from ..fast.kernels import LAYOUT
                info["kernel"] = LAYOUT
        if str(target.device).startswith("cuda"):
            info["gpu"] = torch.cuda.get_device_name(target.device)
    return info


# -- run ---------------------------------------------------------------------------------------------
@dataclass
class BenchReport:
    methods: dict[str, dict]
    machine: dict
    settings: dict
    prompts: list[dict]
    command: str = ""
    per_prompt: list[dict] = field(default_factory=list)
    peak_rss_mb: float | None = None    # process peak resident memory after this run (all loaded models)

    def to_dict(self) -> dict:
        return asdict(self)


def run_bench(target, prompts: list[dict], methods: list[str], settings: BenchSettings,
              warmup: bool = True, log=None) -> BenchReport:
    """Time `methods` on every prompt (order rotated per prompt) and summarise.

    ``target`` may be a dict {label: target} (e.g. {"fp32": …, "bf16": …}): every method then runs on each
    target as ``method@label``, all interleaved in one rotation, and ×hf_gen compares with the fastest
    ``hf_generate@label`` (the baseline's best dtype); =hf compares with the baseline of the same label."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown bench method(s) {unknown}: choose from {', '.join(METHODS)}")
    targets = target if isinstance(target, dict) else {"": target}
    runs = [(f"{m}@{lab}" if lab else m, m, lab) for lab in targets for m in methods]   # (name, method, label)
    first = next(iter(targets.values()))
    ids_list = [first.chat_ids(p["prompt"]) for p in prompts]
    if warmup:                                       # first-call costs (allocator, lazy imports, kernels)
        short = BenchSettings(**{**asdict(settings), "max_new_tokens": min(8, settings.max_new_tokens)})
        for _, m, lab in runs:
            METHODS[m](targets[lab], ids_list[0], short)
    base_of = lambda lab: f"{BASELINE}@{lab}" if lab else BASELINE                # noqa: E731
    names = [n for n, _, _ in runs]
    rows = []
    for i, ids in enumerate(ids_list):
        order = runs[i % len(runs):] + runs[: i % len(runs)]
        res = {n: METHODS[m](targets[lab], ids, settings) for n, m, lab in order}
        for n, m, lab in runs:
            r, b = res[n], base_of(lab)
            k = len(r.output_ids)
            rows.append(dict(prompt=i, method=n, tokens=k, seconds=r.seconds, tok_per_s=k / r.seconds,
                             tau=r.tau, time_split=r.time_split,
                             same_as_baseline=(r.output_ids == res[b].output_ids) if b in res else None))
        if log:
            log(f"prompt {i + 1}/{len(ids_list)} ({prompts[i]['domain']}): " + "  ".join(
                f"{n} {len(res[n].output_ids) / res[n].seconds:.1f}" for n in names) + " tok/s")
    speed = {n: statistics.median(r["tok_per_s"] for r in rows if r["method"] == n) for n in names}
    bases = [base_of(lab) for lab in targets if base_of(lab) in names]
    best_base = max(bases, key=speed.get) if bases else None
    summary = {}
    for n in names:
        mine = [r for r in rows if r["method"] == n]
        ratios = None
        if best_base is not None:
            base = {r["prompt"]: r["tok_per_s"] for r in rows if r["method"] == best_base}
            ratios = statistics.median(r["tok_per_s"] / base[r["prompt"]] for r in mine)
        taus = [r["tau"] for r in mine if r["tau"] is not None]
        splits = [r["time_split"] for r in mine if r["time_split"]]
        summary[n] = dict(
            tok_per_s=speed[n], ratio_vs_hf_generate=ratios,
            tau=statistics.mean(taus) if taus else None,
            time_split={k: statistics.mean(s[k] for s in splits) for k in splits[0]} if splits else None,
            tokens=sum(r["tokens"] for r in mine), seconds=sum(r["seconds"] for r in mine),
            same_as_hf_generate=(sum(bool(r["same_as_baseline"]) for r in mine)
                                 if best_base is not None and settings.temperature == 0 else None),
            n_prompts=len(mine))
    info = machine_info(first)
    if len(targets) > 1:
        info["dtype"] = "+".join(str(t.dtype).replace("torch.", "") for t in targets.values())
        info["baseline"] = best_base
    return BenchReport(summary, info, asdict(settings),
                       [{k: p[k] for k in ("file", "index", "domain")} for p in prompts], per_prompt=rows,
                       peak_rss_mb=peak_rss_mb())


def best_per_method(rep: BenchReport) -> dict[str, str]:
    """In a mixed-dtype report: each method's fastest run name (by median tok/s), e.g. {"plain": "plain@bf16"}."""
    best: dict[str, str] = {}
    for n, s in rep.methods.items():
        m = n.split("@")[0]
        if m not in best or s["tok_per_s"] > rep.methods[best[m]]["tok_per_s"]:
            best[m] = n
    return best


def peak_rss_mb() -> float | None:
    """Peak resident memory of this process so far (MB), or None where the OS does not say."""
    try:
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return round(kb / 1024 if sys.platform != "darwin" else kb / 2 ** 20, 1)
    except (ImportError, OSError):
        return None


def format_table(rep: BenchReport) -> str:
    n = len(rep.prompts)
    w = max([18] + [len(m) + 2 for m in rep.methods])
    head = (f"{'method':<{w}}{'tok/s':>8}{'×hf_gen':>9}{'τ':>7}   {'draft':>6}{'verify':>7}{'sched':>6}"
            f"{'other':>6}{'=hf':>6}")
    lines = [head, "-" * len(head)]
    for m, s in rep.methods.items():
        ts = s["time_split"]
        split = (f"{ts['draft']:6.1%}{ts['verify']:7.1%}{ts['schedule']:6.1%}{ts['other']:6.1%}" if ts
                 else f"{'—':>6}{'—':>7}{'—':>6}{'—':>6}")
        ratio = f"{s['ratio_vs_hf_generate']:.3f}" if s["ratio_vs_hf_generate"] is not None else "—"
        tau = f"{s['tau']:.2f}" if s["tau"] is not None else "—"
        same = f"{s['same_as_hf_generate']}/{n}" if s["same_as_hf_generate"] is not None else "—"
        lines.append(f"{m:<{w}}{s['tok_per_s']:8.2f}{ratio:>9}{tau:>7}   {split}{same:>6}")
    mi = rep.machine
    st = rep.settings
    if mi.get("baseline"):                          # mixed dtypes: the baseline's best dtype, each method's best
        best = best_per_method(rep)
        lines += ["", f"×hf_gen against {mi['baseline']} (hf_generate's fastest dtype in this run); "
                      f"=hf against hf_generate at the same dtype", "best dtype per method: " + ", ".join(
                      f"{b} {rep.methods[b]['ratio_vs_hf_generate']:.3f}" for b in best.values()
                      if rep.methods[b]["ratio_vs_hf_generate"] is not None)]
    lines += ["", f"median tok/s over {n} prompts; ×hf_gen = median per-prompt speed ratio; "
                  f"=hf: outputs identical to hf_generate (T = 0)",
              f"T = {st['temperature']}, max_new_tokens = {st['max_new_tokens']}, lookup γ = {st['gamma']}, "
              f"HF prompt_lookup_num_tokens = {st['hf_lookup_tokens']}",
              f"machine: {mi['cpu']} · {mi['cores']} cores · torch threads {mi['torch_threads']} · "
              f"torch {mi['torch']} · transformers {mi['transformers']} · {mi.get('target', '')} "
              f"{mi.get('device', '')} {mi.get('dtype', '')} · matmuls {mi.get('matmul', 'stock')} · "
              f"attention {mi.get('attention', 'sdpa')} · layers {mi.get('layers', 'stock')}"]
    if rep.peak_rss_mb is not None:
        lines.append(f"peak resident memory of the process (target + every loaded drafter): {rep.peak_rss_mb:.0f} MB")
    return "\n".join(lines)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--prompts", action="append", default=None, metavar="FILE.jsonl",
                    help="a {\"turns\": [...]} JSONL file (repeatable); default: every *.jsonl of --bench-dir, "
                         "else the shipped evaluation prompts (math / code / chat)")
    ap.add_argument("--bench-dir", default=None, metavar="DIR",
                    help="a folder of benchmark prompt files (default: $DSPARK_BENCH_DIR)")
    ap.add_argument("--n-prompts", type=int, default=4, help="prompts per file, evenly spaced (default 4)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="0 = greedy; T > 0: HF samples with top_k=0, top_p=1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gamma", type=int, default=7, help="our lookup drafter's block size")
    ap.add_argument("--hf-lookup-tokens", type=int, default=10, help="HF prompt_lookup_num_tokens")
    ap.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                    help=f"comma-separated, from {', '.join(METHODS)} (default: all but dspark_l1…l6, "
                         f"DSpark at shorter fixed ℓ)")
    ap.add_argument("--target", default=None, help="local HF folder or .gguf (default: embedded SmolLM2)")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--temperatures", default=None, metavar="T1,T2",
                    help="run the whole comparison at each temperature (overrides --temperature)")
    ap.add_argument("--dtypes", default=None, metavar="fp32,bf16",
                    help="run the whole comparison at each dtype (every method at the same dtype)")
    ap.add_argument("--mixed-dtypes", default=None, metavar="fp32,bf16",
                    help="load the target at each dtype and run every method on each as method@dtype, all "
                         "interleaved in one run; ×hf_gen then compares with hf_generate's fastest dtype")
    ap.add_argument("--markdown", default=None, metavar="OUT.md",
                    help="write the tables, machine, versions and command as Markdown (docs/benchmarks.md)")
    ap.add_argument("--include-json", action="append", default=None, metavar="RUN.json",
                    help="also put the runs of an earlier --json file in the Markdown (e.g. a shorter bf16 run)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--json", default=None, metavar="OUT.json", help="write the report as JSON")
    ap.add_argument("--no-warmup", action="store_true")


def _float_list(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise ValueError(f"{what} must be comma-separated numbers, got {text!r}") from e


def run_from_args(a: argparse.Namespace, argv_for_record: list[str] | None = None):
    """One BenchReport (one dtype, one temperature) or a list of them (--dtypes / --temperatures)."""
    from ..decode import check_settings
    from ..model.target import load_target

    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if not methods or unknown:
        raise ValueError(f"unknown bench method(s) {unknown or a.methods!r}: choose from {', '.join(METHODS)}")
    temps = _float_list(a.temperatures, "--temperatures") if a.temperatures else [a.temperature]
    mixed = getattr(a, "mixed_dtypes", None)
    spec = mixed or a.dtypes
    dtypes = [d.strip() for d in spec.split(",") if d.strip()] if spec else [a.dtype]
    bad = [d for d in dtypes if d not in ("fp32", "bf16")]
    if bad or not dtypes or not temps or len(set(dtypes)) != len(dtypes):
        raise ValueError(f"--dtypes / --mixed-dtypes must list fp32 and/or bf16 once each, got {spec!r}")
    if mixed and a.dtypes:
        raise ValueError("give --dtypes (one run per dtype) or --mixed-dtypes (one interleaved run), not both")
    for t in temps:
        check_settings(a.max_new_tokens, t)
    if a.gamma < 1 or a.hf_lookup_tokens < 1:
        raise ValueError("--gamma and --hf-lookup-tokens must be ≥ 1")
    if a.threads is not None:
        if a.threads < 1:
            raise ValueError(f"--threads must be ≥ 1, got {a.threads}")
        torch.set_num_threads(a.threads)
    files = [Path(p) for p in a.prompts] if a.prompts else default_prompt_files(a.bench_dir)
    prompts = balanced_prompts(files, a.n_prompts)
    command = " ".join(["dspark-viz", "bench"] + list(argv_for_record if argv_for_record is not None
                                                      else sys.argv[1:]))
    log = lambda s: print(s, file=sys.stderr, flush=True)                       # noqa: E731
    reports = []
    groups = [dtypes] if mixed else [[d] for d in dtypes]
    for group in groups:
        target = {d: load_target(a.target, device=a.device, dtype=d) for d in group} if mixed else \
            load_target(a.target, device=a.device, dtype=group[0])
        for t in temps:
            settings = BenchSettings(a.max_new_tokens, t, a.seed, a.gamma, a.hf_lookup_tokens)
            rep = run_bench(target, prompts, methods, settings, warmup=not a.no_warmup, log=log)
            rep.command = command
            print(format_table(rep) + "\n", flush=True)
            reports.append(rep)
        _LOADED.clear()
        del target
    out = reports[0] if len(reports) == 1 else reports
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        payload = out.to_dict() if len(reports) == 1 else {"command": command,
                                                           "runs": [r.to_dict() for r in reports]}
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
        print(f"wrote {a.json}", file=sys.stderr)
    if a.markdown:
        extra = [r for p in (a.include_json or []) for r in load_reports(p)]
        Path(a.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(a.markdown).write_text(markdown_report(reports + extra), encoding="utf-8")
        print(f"wrote {a.markdown}", file=sys.stderr)
    return out


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
                                   peak_rss_mb=r.get("peak_rss_mb")))
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path} is not a dspark-viz bench JSON: missing {e}") from e
    return out


def markdown_report(reports: list[BenchReport]) -> str:
    """docs/benchmarks.md: how it was run, on what, and every table (figures as measured)."""
    r0 = reports[0]
    mi = r0.machine
    lines = ["# Decode speed benchmarks", "",
             "Written by `dspark-viz bench --markdown docs/benchmarks.md` (dspark_viz/bench.py), or merged from "
             "several `--json` runs by `python benchmarks/bench_markdown.py`; every figure below is from the run "
             "whose command heads it (the first one here, or the one named above its table). Rerun to refresh.", "",
             "```", r0.command, "```", "",
             "| | |", "|---|---|",
             f"| CPU | {mi['cpu']} ({mi['cores']} cores) |",
             f"| torch threads | {mi['torch_threads']} |",
             f"| versions | torch {mi['torch']}, transformers {mi['transformers']}, Python {mi['python']} |",
             f"| platform | {mi['platform']} |",
             f"| target | {mi.get('target', '')} on {mi.get('device', '')} |",
             f"| prompts | {len(r0.prompts)} from ({', '.join(sorted({p['file'] for p in r0.prompts}))}) |",
             f"| new tokens | {r0.settings['max_new_tokens']} per prompt |",
             f"| matmuls | {mi.get('matmul', 'stock')} (see below) |",
             f"| attention | {mi.get('attention', 'sdpa')} (see below) |",
             f"| decoder layers | {mi.get('layers', 'stock')} (see below) |", "",
             "Methods run interleaved in one process on the same prompts (order rotated per prompt); a "
             "mixed-dtype run (`--mixed-dtypes fp32,bf16`) loads the target at both dtypes and interleaves every "
             "method@dtype. tok/s: median over prompts; ×hf_gen: median per-prompt ratio to transformers' `generate` "
             "at the same temperature and the same dtype (in a mixed run: `generate`'s fastest dtype); τ: committed tokens per verification round; the split is "
             "our loop's wall time in draft / verify (target forward + acceptance) / schedule / other; "
             "=hf: outputs identical to `generate`'s (greedy only). Neural drafters skip the per-slot top-k "
             "diagnostics only the charts read (`NeuralDrafter.diagnostics`, off in the bench from session 8's last "
             "two runs on; every earlier run drafted with them on; the JSON's machine.draft_diagnostics records it).", "",
             "Matmuls: `skinny-kernel` = forwards of 2–8 tokens (fp32 or bf16, CPU) go through dspark_viz's compiled "
             "few-row kernel (dspark_viz/kernels.py), installed on the one target every method shares (`kernel rows`: "
             "each weight row is read once and applied to every token; `kernel tiles`, bf16 from session 7 on: "
             "register tiles of 2–4 weight rows × up to 4 tokens with software prefetch; whole 2–8-token forwards "
             "0.54–0.93 of the row layout's time, `benchmarks/bench_matmul.py --what kernel --dtype bf16`) — HF "
             "prompt lookup's verification forwards of 2–8 tokens take it too; one-token steps (HF `generate`, "
             "plain decoding) keep torch's stock path, and so does fp32 prefill. In bf16 on a CPU without bf16 matrix "
             "instructions (AVX512-BF16, AMX; this one has AVX2 only) torch's bf16 GEMM is ~7× slower than fp32, so "
             "every product of more than 8 rows (prefill and HF prompt lookup's 11-token forwards, for every method, "
             "`generate` included) runs through the kernel in blocks of ≤ 8 rows (up to 64 rows) or as an fp32 "
             "product of the exactly widened bf16 operands (more rows), rounded back to bf16 (kernels.wide_bf16). `lm-head-wxt` = only the LM head as W·xᵀ "
             "(the fallback); `stock` = torch as shipped (`DSPARK_SKINNY=0`). The scheduler plans with the measured "
             "profile of the same setup (assets/profiles/cpu.json, cpu-bf16.json, …; engine.profile_for). In bf16 "
             "a multi-token forward rounds differently from a one-token one, so =hf counts fall there for every "
             "multi-token method, HF prompt lookup included; each method is lossless with respect to the forward "
             "that verifies it.", "",
             "Attention: `packed-gqa` = forwards of 2–8 tokens on CPU attend with the query heads that share a "
             "key/value head folded into the query axis (dspark_viz/attention.py) instead of transformers' "
             "repeat_kv copy of the cache in every layer; `sdpa` = transformers as shipped (`DSPARK_PACKED_GQA=0`, "
             "and every run recorded before it existed). One-token steps keep transformers' own path.", "",
             "Decoder layers: `lean` = in the same 2–8-token forwards each Llama decoder layer runs as straight-line "
             "code (dspark_viz/lean.py: the same operations in the same order, bit-identical logits, without eight "
             "module calls per layer); `lean+fused` (session 8 on) = for one sequence each layer as two native calls "
             "around the kernel (dspark_viz/csrc/decoder_layer.h: norm, q/k/v, rotary; then causal attention over the "
             "cache, o-projection, norm, SiLU-gated MLP) with transformers' rounding points — fp32 logits within 1e-6 "
             "relative of the stock layers, bf16 within a few bf16 steps (`DSPARK_FUSED_LAYERS=0` keeps `lean`); "
             "`stock` = transformers' layer forward (`DSPARK_LEAN_LAYERS=0`, and every run recorded before session "
             "6's lean layers).", ""]
    for rep in reports:
        st = rep.settings
        bf16_note = ("" if "bfloat16" not in str(rep.machine.get("dtype", "")) or "bf16_gemm" in rep.machine
                     else "; bf16 prefill on torch's stock GEMM")
        lines += [f"## {rep.machine.get('dtype', '')}, T = {st['temperature']:g} "
                  f"(attention {rep.machine.get('attention', 'sdpa')}, layers {rep.machine.get('layers', 'stock')}"
                  f"{kernel_note(rep.machine)}{bf16_note})", ""]
        if rep.command != r0.command:
            lines += [f"From a separate run: `{rep.command}`", ""]
        lines += ["```", format_table(rep), "```", ""]
    mems = [r.peak_rss_mb for r in reports if r.peak_rss_mb is not None]
    if mems:
        lines += ["## Memory", "",
                  f"Peak resident memory of the benchmark process after the first run (embedded target and every "
                  f"drafter it loaded, transformers included): **{mems[0]:.0f} MB**" +
                  (f"; after all runs (several dtypes loaded in turn): {max(mems):.0f} MB." if len(mems) > 1 else "."),
                  ""]
    return "\n".join(lines)


def kernel_note(machine: dict) -> str:
    """', kernel tiles' etc. for a run on the few-row kernel; runs recorded before session 7 ran the row layout."""
    if machine.get("matmul") != "skinny-kernel":
        return ""
    return f", kernel {machine.get('kernel', 'rows')}"


def main(argv: list[str] | None = None, prog: str = "python -m dspark_viz.bench") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    add_arguments(ap)
    a = ap.parse_args(argv)
    try:
        run_from_args(a, argv if argv is not None else sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        print(f"bench: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
