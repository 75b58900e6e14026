"""A bench report as text: the plain-text table the command prints and the Markdown page for docs.

Legend: n prompts, γ block size, τ mean committed tokens per round, T temperature, ℓ verification length.
Columns: tok/s (median over prompts), ×plain (median per-prompt speed ratio to our plain decoding at the same
dtype: the speculation gain), ×hf_gen / ×hf_look (the same against ``hf_generate`` / ``hf_prompt_lookup``), τ,
drafted (share of rounds that drafted), the time split of our loop (draft / verify / sched / other), =plain and
=hf (outputs identical to plain decoding's at the same dtype / to ``hf_generate``'s, greedy only); — where a
method does not measure a column. Under the table: plain decoding's ms per token against the memory floor.
"""
from __future__ import annotations

from .machine_info import kernel_note
from .speed_methods import LABELS
from .speed_runner import BenchReport, best_per_method


def _num(v, fmt: str) -> str:
    return format(v, fmt) if v is not None else "—"


def _buffers(n: int) -> str:
    return "one buffer" if n == 1 else f"median of {n} buffers"


def floor_lines(rep: BenchReport) -> list[str]:
    """Plain decoding against the memory floor, one line per dtype (none when the run measured no bandwidth)."""
    mf = rep.memory_floor or {}
    if not mf.get("read_GBps"):
        return []
    out = []
    for lab, f in (mf.get("by_dtype") or {}).items():
        plain, reads = f.get("plain_ms_per_token"), f.get("read_samples_GBps")
        if reads:
            bw = (f"{f['weight_MB'] / f['floor_ms_per_token']:.1f} GB/s read bandwidth, the median of {len(reads)} "
                  f"reads each taken just before a plain decode (range {min(reads):.1f}–{max(reads):.1f} GB/s; "
                  f"{mf['read_GBps']:.1f} at the start)")
            ratio = (f" ({f['plain_over_floor']:.2f}× the floor, the median of each decode against its own read)"
                     if f.get("plain_over_floor") else "")
        else:
            bw = f"{mf['read_GBps']:.1f} GB/s read bandwidth, {_buffers(mf.get('read_buffers', 1))}"
            ratio = f" ({f['plain_over_floor']:.2f}× the floor)" if f.get("plain_over_floor") else ""
        out.append(f"memory floor at {lab}: plain decoding {_num(plain, '.1f')} ms/token against "
                   f"{f['floor_ms_per_token']:.1f} ms = {f['weight_MB']:.0f} MB of weights per forward ÷ {bw}{ratio}"
                   + (f"; the weights fit this CPU's {mf['llc_MB']:.0f} MB last-level cache, so a step need not "
                      f"read them from memory" if f.get("fits_llc") and mf.get("llc_MB") else ""))
    return out


def format_table(rep: BenchReport) -> str:
    """One run's table, with its settings, machine and peak memory under it."""
    n = len(rep.prompts)
    w = max([18] + [len(m) + 2 for m in rep.methods])
    head = (f"{'method':<{w}}{'tok/s':>8}{'×plain':>8}{'×hf_gen':>9}{'×hf_look':>9}{'τ':>7}{'drafted':>8}   "
            f"{'draft':>6}{'verify':>7}{'sched':>6}{'other':>6}{'=plain':>7}{'=hf':>6}")
    lines = [head, "-" * len(head)]
    for m, s in rep.methods.items():
        ts = s["time_split"]
        split = (f"{ts['draft']:6.1%}{ts['verify']:7.1%}{ts['schedule']:6.1%}{ts['other']:6.1%}" if ts
                 else f"{'—':>6}{'—':>7}{'—':>6}{'—':>6}")
        same_p, same_h = s.get("same_as_plain"), s["same_as_hf_generate"]
        lines.append(f"{m:<{w}}{s['tok_per_s']:8.2f}{_num(s.get('ratio_vs_plain'), '.3f'):>8}"
                     f"{_num(s['ratio_vs_hf_generate'], '.3f'):>9}{_num(s.get('ratio_vs_hf_prompt_lookup'), '.3f'):>9}"
                     f"{_num(s['tau'], '.2f'):>7}{_num(s.get('drafted'), '.0%'):>8}   {split}"
                     f"{f'{same_p}/{n}' if same_p is not None else '—':>7}{f'{same_h}/{n}' if same_h is not None else '—':>6}")
    used = [m.split("@")[0] for m in rep.methods]
    legend = [f"{m} = {LABELS[m]}" for m in dict.fromkeys(used) if m in LABELS]
    mi = rep.machine
    st = rep.settings
    if mi.get("baseline"):                          # mixed dtypes: the baseline's best dtype, each method's best
        best = best_per_method(rep)
        lines += ["", f"×hf_gen against {mi['baseline']} (hf_generate's fastest dtype in this run); "
                      f"=hf against hf_generate at the same dtype", "best dtype per method: " + ", ".join(
                      f"{b} {rep.methods[b]['ratio_vs_hf_generate']:.3f}" for b in best.values()
                      if rep.methods[b]["ratio_vs_hf_generate"] is not None)]
    lines += ["", f"median tok/s over {n} prompts; ×plain = median per-prompt speed ratio against our plain decoding "
                  f"at the same dtype (the speculation gain); ×hf_gen / ×hf_look = the same against "
                  f"hf_generate / hf_prompt_lookup (at their fastest dtype in a mixed run); drafted = share of rounds "
                  f"that drafted; =plain / =hf: outputs identical to plain decoding at the same dtype / to "
                  f"hf_generate (T = 0)", "methods: " + "; ".join(legend),
              f"T = {st['temperature']}, max_new_tokens = {st['max_new_tokens']}, lookup γ = {st['gamma']}, "
              f"HF prompt_lookup_num_tokens = {st['hf_lookup_tokens']}",
              f"machine: {mi['cpu']} · {mi['cores']} cores · torch threads {mi['torch_threads']} · "
              + (f"OpenMP spin {mi['omp_spincount']} · " if mi.get("omp_spincount") else "") +
              f"torch {mi['torch']} · transformers {mi['transformers']} · {mi.get('target', '')} "
              f"{mi.get('device', '')} {mi.get('dtype', '')} · matmuls {mi.get('matmul', 'stock')} · "
              f"attention {mi.get('attention', 'sdpa')} · layers {mi.get('layers', 'stock')}",
              f"CPU flags: {' '.join(mi.get('cpu_flags') or []) or '—'} · default CPU dtype: "
              f"{mi.get('default_dtype') or 'not chosen'}"]
    for lab, p in (mi.get("paths") or {}).items():
        if p.get("path_choice"):
            lines.append(f"paths at {lab}: {p['path_choice']}")
    lines += floor_lines(rep)
    if rep.peak_rss_mb is not None:
        lines.append(f"peak resident memory of the process (target + every loaded drafter): {rep.peak_rss_mb:.0f} MB")
    return "\n".join(lines)


_HOW = ("Methods run interleaved in one process on the same prompts (order rotated per prompt); a "
        "mixed-dtype run (`--mixed-dtypes fp32,bf16`) loads the target at both dtypes and interleaves every "
        "method@dtype. tok/s: median over prompts; ×plain: median per-prompt ratio to our own plain decoding on the "
        "same engine at the same dtype — the speculation gain (the paper's Eq. 1 on this machine), the column to "
        "read first; ×hf_gen / ×hf_look: the same ratio to transformers' `generate` / prompt lookup at the same "
        "temperature (in a mixed run: their fastest dtype), which mixes the engine's speed with speculation's; τ: "
        "committed tokens per verification round; drafted: the share of rounds that drafted (the speculation gate, "
        "`+ fallback`, decodes the others plainly); the split is our loop's wall time in draft / verify (target "
        "forward + acceptance) / schedule / other; =plain: outputs identical to plain decoding's at the same dtype, "
        "=hf: to `generate`'s (greedy only). Under each table: plain decoding's ms per decoded token against the "
        "memory floor, the bytes of the weights one forward reads (a tied LM head once) ÷ the machine's read "
        "bandwidth (a 1 GiB buffer summed at the decode's thread count; a shared VM's read rate can double or "
        "halve from one minute to the next, so runs that say so read it again just before each plain decode and "
        "give the median of each decode's ratio to the floor of its own moment; older runs took the median over "
        "five buffers at the start, or one buffer); where the weights fit "
        "the CPU's last-level cache (machine.llc_MiB), a step reads them from there and may beat that floor. Neural "
        "drafters skip the per-slot top-k diagnostics only the charts read (`NeuralDrafter.diagnostics`); the JSON's "
        "machine.draft_diagnostics says so, and a run without that field drafted with them on. Measure on a quiet "
        "machine: another busy process slows every method, and 2-thread runs far more where OpenMP threads spin "
        "long at each barrier (dspark_viz picks `GOMP_SPINCOUNT` before torch loads: 10,000 on a quiet machine, "
        "1,000 when another process holds a core; `dspark_viz.settings.openmp_defaults`).")

_MATMULS = ("Matmuls: `skinny-kernel` = forwards of 1–64 tokens on CPU (decode steps, verification blocks, "
            "several requests' rows in one forward; fp32 or bf16) go through dspark_viz's compiled kernel "
            "(dspark_viz/fast/kernels.py), installed on the one target every method shares — HF `generate`'s "
            "one-token steps and HF prompt lookup's verification forwards take it too. The heading's `kernel` "
            "names its form: `packed` = the outer-product form, each weight repacked once into blocks of 16 "
            "outputs (bf16 with AVX512-BF16: csrc/packed_bf16.h; fp32 with AVX-512F: csrc/packed_avx512.h) or 8 "
            "(fp32, and bf16 without AVX512-BF16: csrc/packed_avx2.h) and read once for up to 64 rows; `rows` = "
            "the dot-product form, each weight row read once per 8 rows (fp32 in the AVX-512 variant, in runs "
            "made before its packed form); `tiles` and `dot-product` = earlier bf16 forms, in runs made before the "
            "packed form (`benchmarks/bench_matmul.py --what kernel` times the packed form "
            "against the row form). One arithmetic for every width: within a kernel variant each output is summed "
            "in an order fixed by the inner size alone, each output is one thread's whole sum, and the fused "
            "layers' norms and attention run per row the same way, so a token's logits and layer outputs are "
            "bit-identical whether it is decoded alone or verified in a block of up to 64, at any thread count "
            "(tests/test_width_invariance.py); the machine's choice (fast/tune.py) is one variant per dtype for "
            "every width. Greedy speculative decoding therefore commits exactly what greedy decoding commits, at "
            "bf16 too. Torch's stock path (`DSPARK_SKINNY=0`, `DSPARK_FUSED_LAYERS=0`, or a target outside the "
            "Llama family) makes no such promise: torch picks its kernel, and so its summation order, by the "
            "number of rows, so there a token may round differently inside a block than alone and greedy equality "
            "is likely, not guaranteed. In bf16 on a CPU without bf16 matrix instructions (AVX512-BF16, AMX; "
            "machine.bf16_gemm = widened) torch's bf16 GEMM is several times slower than fp32, so every product "
            "of more than 64 rows (prefill, for every method, `generate` included) runs as an fp32 product of the "
            "exactly widened bf16 operands, rounded back to bf16 (kernels.wide_bf16). `lm-head-wxt` = only the "
            "LM head as W·xᵀ (the fallback); `stock` = torch as shipped (`DSPARK_SKINNY=0`). The scheduler plans "
            "with the measured profile of the same setup (assets/profiles/cpu.json, cpu-bf16.json, …; "
            "cost.profile_for). Each method is lossless with respect to the forward that verifies it. Tables "
            "below record the paths of their own run (the `paths at` lines).")

_ATTENTION = ("Attention: `packed-gqa` = forwards of 1–8 tokens on CPU attend with the query heads that share a "
              "key/value head folded into the query axis (dspark_viz/fast/attention.py) instead of transformers' "
              "repeat_kv copy of the cache in every layer (a one-token step arrives without a mask: every cached "
              "key is visible); `sdpa` = transformers as shipped (`DSPARK_PACKED_GQA=0`).")

_LAYERS = ("Decoder layers: `lean` = in forwards of 1–8 tokens each Llama decoder layer runs as "
           "straight-line code (dspark_viz/fast/lean.py: the same operations in the same order, bit-identical "
           "logits, without eight module calls per layer); `lean+fused` = for one sequence each layer as two "
           "native calls around the kernel (dspark_viz/fast/csrc/decoder_layer.h: norm, q/k/v, rotary; then "
           "causal attention over the cache, o-projection, norm, SiLU-gated MLP) with transformers' rounding "
           "points, for one sequence of 1–64 tokens — logits within the dtype's rounding of the stock layers, "
           "and the same bits for a token at every width 1–64 (`DSPARK_FUSED_LAYERS=0` keeps `lean`, which is "
           "not width-invariant); `stock` = transformers' layer forward (`DSPARK_LEAN_LAYERS=0`). Around the "
           "layers, a one-sequence forward of 1–64 tokens after a non-empty cache skips transformers' model-level wrappers (dspark_viz/fast/stack.py: "
           "embedding, rotary rows from a table, then every fused layer, the final norm (in the fused layers' norm "
           "arithmetic) and the LM head in one native call that appends the new keys and values to the cache's "
           "buffers itself — bit-identical to `model(...)`, tests/test_stack.py); "
           "`python benchmarks/bench_stack.py --dtype bf16|fp32` times the two interleaved. A run whose JSON lacks "
           "`machine.stack` called transformers' model forward around the layers.")


def _llc(machine: dict) -> str:
    """", N MiB last-level cache" where the run recorded it, else ""."""
    return f", {machine['llc_MiB']} MiB last-level cache" if machine.get("llc_MiB") else ""


def markdown_report(reports: list[BenchReport], notes: list[str] | None = None) -> str:
    """docs/benchmarks.md: how it was run, on what, and every table (figures as measured); ``notes``: paragraphs
    set under the first command (what a reader must know about the runs that their JSON does not say)."""
    r0 = reports[0]
    mi = r0.machine
    lines = ["# Decode speed benchmarks", "",
             "Written by `dspark-viz bench --markdown docs/benchmarks.md` (dspark_viz/bench), or merged from "
             "several `--json` runs by `python benchmarks/bench_markdown.py`; every figure below is from the run "
             "whose command heads it (the first one here, or the one named above its table). Rerun to refresh.", "",
             "```", r0.command, "```", ""] + [x for n in (notes or []) for x in (n, "")] + [
             "| | |", "|---|---|",
             f"| CPU | {mi['cpu']} ({mi['cores']} cores{_llc(mi)}) |",
             f"| torch threads | {mi['torch_threads']}"
             + (f" (OpenMP spin {mi['omp_spincount']})" if mi.get("omp_spincount") else "") + " |",
             f"| versions | torch {mi['torch']}, transformers {mi['transformers']}, Python {mi['python']} |",
             f"| platform | {mi['platform']} |",
             f"| target | {mi.get('target', '')} on {mi.get('device', '')} |",
             f"| prompts | {len(r0.prompts)} from ({', '.join(sorted({p['file'] for p in r0.prompts}))}) |",
             f"| new tokens | {r0.settings['max_new_tokens']} per prompt |",
             f"| matmuls | {mi.get('matmul', 'stock')} (see below) |",
             f"| attention | {mi.get('attention', 'sdpa')} (see below) |",
             f"| decoder layers | {mi.get('layers', 'stock')} (see below) |", "",
             _HOW, "", _MATMULS, "", _ATTENTION, "", _LAYERS, ""]
    several_cpus = len({(r.machine.get("cpu"), r.machine.get("llc_MiB")) for r in reports}) > 1
    for rep in reports:
        st = rep.settings
        where = f"{rep.machine.get('cpu', '')}{_llc(rep.machine)} — " if several_cpus else ""
        bf16_note = ("" if "bfloat16" not in str(rep.machine.get("dtype", "")) or "bf16_gemm" in rep.machine
                     else "; bf16 prefill on torch's stock GEMM")
        lines += [f"## {where}{rep.machine.get('dtype', '')}, T = {st['temperature']:g} "
                  f"(attention {rep.machine.get('attention', 'sdpa')}, layers {rep.machine.get('layers', 'stock')}"
                  f"{kernel_note(rep.machine)}{bf16_note})", ""]
        if rep.command != r0.command:
            lines += [f"From a separate run: `{rep.command}`", ""]
        lines += ["```", format_table(rep), "```", ""]
    mems = [r.peak_rss_mb for r in reports if r.peak_rss_mb is not None]
    if mems:
        lines += ["## Memory", "",
                  f"Peak resident memory of the benchmark process after the first run (the target and every "
                  f"drafter it loaded, transformers included): **{mems[0]:.0f} MB**" +
                  (f"; after all runs (several dtypes loaded in turn): {max(mems):.0f} MB." if len(mems) > 1 else "."),
                  ""]
    return "\n".join(lines)
