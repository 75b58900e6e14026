"""``dspark-viz bench``: the decode-speed comparison's arguments and the run they ask for.

Legend: T temperature, γ block size (our lookup drafter), ℓ verification length.

    dspark-viz bench --methods hf_generate,plain --n-prompts 1 --max-new-tokens 64
    dspark-viz bench --temperatures 0,1 --mixed-dtypes fp32,bf16 --json out.json --markdown docs/benchmarks.md

One report per (dtype, temperature), its table printed as it finishes; ``--mixed-dtypes`` makes one
interleaved report per temperature instead (methods named method@dtype). The machine's read bandwidth is measured
once at the start, at the decode's thread count, and again just before each plain decode (one kept 1 GiB buffer):
plain decoding's memory floor under each table compares each decode with the bandwidth of its own moment.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..decode import check_settings
from ..evaluation import dtype_choice
from ..evaluation.machine_info import READ_BUFFERS, ReadProbe, read_bandwidth
from ..evaluation import speed_runner as runner
from ..evaluation.speed_methods import DEFAULT_METHODS, METHODS, BenchSettings, unload_drafters
from ..evaluation.speed_report import format_table, markdown_report
from ..model import target as model_target  # looked up per call: tests substitute load_target
from .common import set_threads


def add_bench(ap: argparse.ArgumentParser) -> None:
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
    ap.add_argument("--dtype", default=None, choices=["fp32", "bf16"],
                    help="every method at this dtype (default: HF's methods at fp32 and bf16, ours at this "
                         "machine's chosen CPU dtype, all interleaved in one run)")
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
                    help="also put the runs of an earlier --json file in the Markdown")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--json", default=None, metavar="OUT.json", help="write the report as JSON")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--no-bandwidth", action="store_true",
                    help="skip the read-bandwidth measurement (1 GiB; no memory floor under the tables)")


def _float_list(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise ValueError(f"{what} must be comma-separated numbers, got {text!r}") from e


def command_line(words: list[str], bench_dir: str | None) -> str:
    """The command as recorded in the JSON and the page: the prompt folder by its role (BENCH_DIR), not this
    machine's path, in the ``--bench-dir DIR`` and ``--bench-dir=DIR`` forms alike."""
    if bench_dir:
        words = ["BENCH_DIR" if w == bench_dir else "--bench-dir=BENCH_DIR" if w == f"--bench-dir={bench_dir}"
                 else w for w in words]
    return " ".join(["dspark-viz", "bench"] + words)


def run_bench(a: argparse.Namespace) -> int:
    """Run every (dtype, temperature) asked for, print each table, write --json / --markdown."""
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if not methods or unknown:
        raise ValueError(f"unknown bench method(s) {unknown or a.methods!r}: choose from {', '.join(METHODS)}")
    temps = _float_list(a.temperatures, "--temperatures") if a.temperatures else [a.temperature]
    mixed = getattr(a, "mixed_dtypes", None)
    spec = mixed or a.dtypes
    auto = not spec and a.dtype is None and not str(a.device or model_target.default_device()).startswith("cuda")
    if auto:                                     # HF at both dtypes, ours at the machine's choice
        mixed = spec = "fp32,bf16"
    dtypes = [d.strip() for d in spec.split(",") if d.strip()] if spec else [a.dtype or "bf16"]
    bad = [d for d in dtypes if d not in ("fp32", "bf16")]
    if bad or not dtypes or not temps or len(set(dtypes)) != len(dtypes):
        raise ValueError(f"--dtypes / --mixed-dtypes must list fp32 and/or bf16 once each, got {spec!r}")
    if mixed and a.dtypes:
        raise ValueError("give --dtypes (one run per dtype) or --mixed-dtypes (one interleaved run), not both")
    for t in temps:
        check_settings(a.max_new_tokens, t)
    if a.gamma < 1 or a.hf_lookup_tokens < 1:
        raise ValueError("--gamma and --hf-lookup-tokens must be ≥ 1")
    set_threads(a.threads)
    files = [Path(p) for p in a.prompts] if a.prompts else runner.default_prompt_files(a.bench_dir)
    prompts = runner.balanced_prompts(files, a.n_prompts)
    argv = getattr(a, "_argv", None)
    command = command_line(list(argv if argv is not None else sys.argv[1:]), a.bench_dir)
    log = lambda s: print(s, file=sys.stderr, flush=True)                       # noqa: E731
    labels_of = None
    if auto:
        ours = {"float32": "fp32", "bfloat16": "bf16"}[dtype_choice.choose_default_dtype(log=log, target=a.target)]
        labels_of = {m: (["fp32", "bf16"] if m.startswith("hf_") or m == "plain" else [ours]) for m in methods}
    bandwidth = None if getattr(a, "no_bandwidth", False) else read_bandwidth()
    if bandwidth:
        log(f"read bandwidth: {bandwidth / 1e9:.1f} GB/s (median of {READ_BUFFERS} 1 GiB buffers, best of 5 reads "
            "each); read again just before each plain decode")
    probe = ReadProbe() if bandwidth else None
    reports = []
    groups = [dtypes] if mixed else [[d] for d in dtypes]
    for group in groups:
        load = model_target.load_target
        target = {d: load(a.target, device=a.device, dtype=d) for d in group} if mixed else \
            load(a.target, device=a.device, dtype=group[0])
        for t in temps:
            settings = BenchSettings(a.max_new_tokens, t, a.seed, a.gamma, a.hf_lookup_tokens)
            rep = runner.bench_methods(target, prompts, methods, settings, warmup=not a.no_warmup, log=log,
                                       labels_of=labels_of, bandwidth=bandwidth, probe=probe)
            rep.command = command
            print(format_table(rep) + "\n", flush=True)
            reports.append(rep)
        unload_drafters()
        del target
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        payload = reports[0].to_dict() if len(reports) == 1 else {"command": command,
                                                                  "runs": [r.to_dict() for r in reports]}
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
        print(f"wrote {a.json}", file=sys.stderr)
    if a.markdown:
        extra = [r for p in (a.include_json or []) for r in runner.load_reports(p)]
        Path(a.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(a.markdown).write_text(markdown_report(reports + extra), encoding="utf-8")
        print(f"wrote {a.markdown}", file=sys.stderr)
    return 0
