"""The Gradio app's callbacks as plain functions: no gradio import, testable without a server.

Legend: R concurrent requests (engine load), γ block size, ℓ verification length, m accepted drafts,
k 1-based draft position, c_k confidence, a_k prefix survival, τ committed tokens per round, Θ throughput.

No algorithm lives here. Decoding is ``decode.generate_rounds``, scheduling ``scheduler.HardwareAware`` (through
``widgets.LoadedPolicy`` for one live request under load R), serving ``engine.sweep``, calibration
``calibration.fit_sts`` / ``calibration_report``, pictures ``dspark_viz.viz``. This module picks inputs, checks
them, and turns results into HTML, Markdown and Vega-Lite JSON.

State: ``AppResources`` is built once per app (model, drafters, profiles, recorded data — shared read-only by
every session; its only mutable part is a locked memo of pure, instant views). Everything per user (the last
trace, the trace being replayed, the serving sweeps) is passed in and returned, and the app keeps it in gr.State.
"""
from __future__ import annotations

import html
import math
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from . import metrics
from .engine import SPSProfile, gpu_like, jagged, named_profile
from .scheduler import FixedLength, HardwareAware, Policy
from .trace import Trace

DRAFTER_LABELS = {"dspark": "DSpark-Markov", "dspark-rnn": "DSpark-RNN", "dflash": "DFlash-style",
                  "eagle": "EAGLE-style", "lookup": "prompt lookup", "random": "random (toy)",
                  "dspark+lookup": "DSpark + lookup"}
DRAFTER_ORDER = ("dspark", "dspark-rnn", "dflash", "eagle", "lookup", "dspark+lookup")
PROFILE_LABELS = {"gpu-like": "gpu-like (smooth, synthetic)", "jagged": "jagged (CUDA-graph buckets, synthetic)",
                  "cpu": "cpu (measured on this machine)"}
DEFAULT_EXAMPLES = (                                   # from assets/prompts/eval.jsonl, two per domain
    ("math", "Chloe puts $25 in a jar each week. How much will she have after 26 weeks?"),
    ("math", "Explain step by step how to find the median of a list of numbers."),
    ("code", "Refactor this function to be shorter and easier to read:\n\n```python\ndef check(temps):\n"
             "    ok = True\n    for i in range(len(temps)):\n        if temps[i] > 18:\n            ok = False\n"
             "    if ok == True:\n        return True\n    else:\n        return False\n```"),
    ("code", "Write a Python function that returns the n-th Fibonacci number."),
    ("chat", "How do vaccines help the body fight disease?"),
    ("chat", "Write a warm thank-you note to my aunt for the birthday scarf."),
)
TRACE_DIR = Path(__file__).resolve().parent.parent / "assets" / "traces"
SWEEP_RS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
MAX_TRACE_BYTES = 20 * 2 ** 20


@dataclass(frozen=True)
class Limits:
    max_new_tokens: int = 512          # slider maximum
    max_load: int = 256                # R slider maximum
    max_temperature: float = 2.0
    max_prompt_tokens: int = 1536      # context used = min(model's, this + max_new_tokens): long prompts are cut
    chart_budget: float = 0.25         # live round chart: drawing takes at most this fraction of decode time …
    chart_ms_per_round: float = 35.0   # … and at most this many ms per round on average (first round always drawn)
    stream_rounds: int = 120           # token strip while streaming: the last rounds only (all at the end)
    sweep_rounds: int = 40             # engine.sweep steps per (policy, R)


# -- resources (built once, shared read-only) ------------------------------------------------------------
@dataclass
class Recorded:
    """Request data for the model-free tabs: recorded traces with confidences, or synthetic ones."""
    traces: list[Trace]
    synthetic: bool
    note: str                                           # one line for the UI: where the numbers come from
    conf_rows: list[list[float]]                        # c_1..c_γ per round (calibrated when recorded so)
    gamma: int


@dataclass
class CalibrationData:
    conf: np.ndarray                                    # (N, γ) held-out rounds shown in the diagram
    accepted: np.ndarray                                # (N,) m
    ell: np.ndarray                                     # (N,) ℓ
    calib: Any                                          # STSCalibration fitted on the other rounds
    report: dict
    frame: Any                                          # viz.reliability_frame (both stages)
    note: str


@dataclass
class AppResources:
    target: Any
    drafters: dict[str, Any]                            # name → Drafter, in display order
    missing: dict[str, str]                             # name → why it is not offered
    profiles: dict[str, SPSProfile]
    recorded: Recorded
    examples: list[tuple[str, str]]
    limits: Limits = field(default_factory=Limits)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dspark_app_")))
    _calibration: CalibrationData | None = None
    _memo: "OrderedDict[tuple, Any]" = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _calib_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def context_limit(self) -> int:
        return int(min(self.target.max_context, self.limits.max_prompt_tokens + self.limits.max_new_tokens))

    def label(self, name: str) -> str:
        return DRAFTER_LABELS.get(name, name)

    def drafter_choices(self) -> list[tuple[str, str]]:
        return [(self.label(n) + ("" if getattr(d, "has_confidence", False) else " (no confidence head)"), n)
                for n, d in self.drafters.items()]

    def profile_choices(self) -> list[tuple[str, str]]:
        return [(PROFILE_LABELS.get(n, n), n) for n in self.profiles]

    @property
    def calibration(self) -> CalibrationData:
        if self._calibration is None:
            with self._calib_lock:                      # fitted once, on first use
                if self._calibration is None:
                    self._calibration = build_calibration(self.recorded)
        return self._calibration

    def memo(self, key: tuple, make, size: int = 512):
        """Pure-view cache (same key → same output for every user)."""
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = make()
        with self._lock:
            self._memo[key] = value
            while len(self._memo) > size:
                self._memo.popitem(last=False)
        return value


def available_drafters(target, names: Sequence[str] = DRAFTER_ORDER) -> tuple[dict[str, Any], dict[str, str]]:
    """Every drafter that loads for this target; the others with the reason (not shipped yet, mismatch…)."""
    from .drafters import load_drafter

    ok, missing = {}, {}
    for n in names:
        try:
            ok[n] = load_drafter(n, target)
        except FileNotFoundError:
            missing[n] = "not trained / shipped yet"
        except (ValueError, RuntimeError, OSError, KeyError) as e:
            missing[n] = f"does not load: {e}"
    return ok, missing


def available_profiles() -> dict[str, SPSProfile]:
    out = {"gpu-like": gpu_like(), "jagged": jagged()}
    try:
        out["cpu"] = named_profile("cpu")
    except (FileNotFoundError, ValueError):
        pass                                            # no measured profile yet: the synthetic ones only
    return out


def _has_conf(t: Trace) -> bool:
    return any(r.drafts and all(d.confidence is not None for d in r.drafts) for r in t.rounds)


def load_recorded(traces: Sequence[Trace] | None = None, trace_dir: Path | None = TRACE_DIR,
                  max_files: int = 48, max_rows: int = 256) -> Recorded:
    """Traces with confidences (given, or the first ``max_files`` of assets/traces/*.json), else synthetic."""
    from .synthetic import synthetic_traces

    src = ""
    if traces is None and trace_dir is not None and Path(trace_dir).is_dir():
        files = sorted(Path(trace_dir).glob("*.json"))
        first = [p for p in files if p.name.startswith("dspark")]      # drafters with a confidence head first
        step = max(1, len(first) // max_files)                           # spread over prompts (and domains)
        picked = first[::step]
        order = picked + sorted(set(files) - set(picked))
        traces = []
        for p in order[: 3 * max_files]:                                 # bounded start-up cost
            if len(traces) >= max_files:
                break
            try:
                t = Trace.from_json(str(p))
            except (ValueError, OSError):
                continue
            if _has_conf(t):
                traces.append(t)
        src = f" from {Path(trace_dir).name}/"
    traces = [t for t in (traces or []) if _has_conf(t)]
    synthetic = not traces
    if synthetic:
        traces = synthetic_traces(n=24, n_rounds=40, gamma=7, seed=0, overconfidence=1.6)
        drafters = "synthetic"
        note = ("**synthetic** requests (`dspark_viz.synthetic`: made-up confidences with a known acceptance law "
                "and an over-confident head; no model involved) — no recorded traces with confidences yet")
    else:
        drafters = ", ".join(sorted({str(t.meta.get("drafter", "?")) for t in traces}))
        note = f"**recorded** traces: {len(traces)} requests of drafter {drafters}{src}"
    rows, rounds = [], [r for t in traces for r in t.rounds if r.drafts]
    step = max(1, len(rounds) // max_rows)
    for r in rounds[::step][:max_rows]:
        ds = sorted(r.drafts, key=lambda d: d.k)
        if all(d.confidence is not None for d in ds):
            cal = all(d.confidence_cal is not None for d in ds)
            rows.append([float(d.confidence_cal if cal else d.confidence) for d in ds])
    gamma = max((len(c) for c in rows), default=7)
    return Recorded(list(traces), synthetic, note, rows, gamma)


def build_calibration(rec: Recorded) -> CalibrationData:
    """STS fitted on half of the requests, reliability shown on the other half (out of sample)."""
    from .calibration import calibration_report, fit_sts, rollouts_from_traces
    from .viz import reliability_frame

    fit_t, eval_t = rec.traces[0::2], rec.traces[1::2]
    held_out = bool(fit_t and eval_t)
    if not held_out:
        fit_t = eval_t = rec.traces
    cf, af, ef = rollouts_from_traces(fit_t)
    conf, acc, ell = rollouts_from_traces(eval_t)
    g = max(cf.shape[1], conf.shape[1])
    cf, conf = _pad(cf, g), _pad(conf, g)
    calib = fit_sts(cf, af, ef)
    report = calibration_report(conf, acc, ell, calib=calib)
    frame = reliability_frame(conf, acc, ell, calib=calib)
    how = (f"STS fitted on {len(fit_t)} requests ({len(af)} rounds), shown on {len(eval_t)} other requests "
           f"({len(acc)} rounds): out of sample" if held_out else
           f"STS fitted and shown on the same {len(acc)} rounds (in sample: too few requests to hold some out)")
    return CalibrationData(conf, acc, ell, calib, report, frame, f"Data: {rec.note}. {how}.")


def _pad(c: np.ndarray, g: int) -> np.ndarray:
    if c.shape[1] == g:
        return c
    out = np.full((c.shape[0], g), np.nan)
    out[:, : c.shape[1]] = c
    return out


def load_resources(target=None, drafters: Mapping[str, Any] | None = None, *, profiles=None,
                   traces: Sequence[Trace] | None = None, trace_dir: Path | None = TRACE_DIR,
                   examples: Sequence[tuple[str, str]] | None = None, limits: Limits | None = None,
                   target_path: str | None = None) -> AppResources:
    """Load (or take) everything the app shares: target, drafters, SPS profiles, recorded or synthetic data."""
    if target is None:
        from .target import load_target

        target = load_target(target_path)
    missing: dict[str, str] = {}
    if drafters is None:
        drafters, missing = available_drafters(target)
    if not drafters:
        raise ValueError("no drafter loads for this target (prompt lookup always should: check the target)")
    order = [n for n in DRAFTER_ORDER if n in drafters] + [n for n in drafters if n not in DRAFTER_ORDER]
    if isinstance(profiles, SPSProfile):
        profiles = {profiles.name: profiles}
    profs = dict(profiles) if profiles is not None else available_profiles()
    if not profs:
        raise ValueError("give at least one SPS profile")
    return AppResources(target=target, drafters={n: drafters[n] for n in order}, missing=missing,
                        profiles=profs, recorded=load_recorded(traces, trace_dir),
                        examples=list(examples or DEFAULT_EXAMPLES), limits=limits or Limits())


# -- input checks ---------------------------------------------------------------------------------------
def _num(x, name: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {x!r}")
    return v


def clamp(x, lo: float, hi: float, name: str, notes: list[str], integer: bool = False):
    """x clipped into [lo, hi] (rounded if integer); a note says so when it had to clip."""
    v = _num(x, name)
    v = round(v) if integer else v
    c = min(max(v, lo), hi)
    if c != v:
        notes.append(f"{name} {x} is out of range {lo:g}–{hi:g}: using {c:g}")
    return int(c) if integer else float(c)


def check_choice(value: str, options: Mapping[str, Any], what: str) -> str:
    if value not in options:
        raise ValueError(f"unknown {what} {value!r}: choose one of {', '.join(options)}")
    return value


def prepare_prompt(target, text: str, max_new_tokens: int, context_limit: int) -> tuple[list[int], str, str | None]:
    """Chat-template ids of the prompt; if prompt + answer would not fit, keep the *end* of the prompt.

    → (ids, prompt text used, notice or None). Raises ValueError for an empty prompt.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("The prompt is empty: type a question or pick an example.")
    room = context_limit - max_new_tokens
    if room < 8:
        raise ValueError(f"max new tokens {max_new_tokens} leaves no room for a prompt in a "
                         f"{context_limit}-token context")
    ids = list(target.chat_ids(text))
    if len(ids) <= room:
        return ids, text, None
    toks = list(target.encode(text))
    overhead = max(0, len(ids) - len(toks))             # chat-template tokens around the user text
    keep, used = room - overhead, ""
    while keep > 0:
        used = target.decode(toks[-keep:])
        ids = list(target.chat_ids(used)) if used.strip() else []
        if ids and len(ids) <= room:
            break
        keep -= max(1, len(ids) - room)                 # re-tokenisation at the cut can add a token or two
    if keep <= 0:
        raise ValueError(f"the prompt does not fit the {context_limit}-token context even when truncated")
    notice = (f"The prompt had {len(toks)} tokens; with {max_new_tokens} new tokens only {room} fit the "
              f"{context_limit}-token context, so it was truncated to its last {keep} tokens.")
    return ids, used, notice


def live_policy(drafter, R: int, background: Sequence[Sequence[float]]) -> Policy:
    """Algorithm 1 on this request + R−1 background requests; FixedLength(γ) without a confidence head."""
    from .widgets import LoadedPolicy, SYNTHETIC_BACKGROUND

    if getattr(drafter, "has_confidence", False):
        return LoadedPolicy(R, background or SYNTHETIC_BACKGROUND, inner=HardwareAware())
    return FixedLength(getattr(drafter, "gamma", 1))


def chart_json(chart) -> str:
    """Vega-Lite JSON of an altair chart (charts are schema-validated in tests/test_viz.py)."""
    return chart.to_json(validate=False, indent=None)


def model_seconds(trace: Trace) -> float:
    """Decode time spent in the library (prefill + draft + schedule + verify + bookkeeping), no drawing."""
    return trace.t_prefill + sum(r.t_draft + r.t_schedule + r.t_verify + r.t_other for r in trace.rounds)


def md_escape(s: str) -> str:
    """Escape text for inline Markdown."""
    return html.escape(str(s), quote=False).replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")


# -- live decoding ----------------------------------------------------------------------------------------
@dataclass
class LiveUpdate:
    status: str                                         # Markdown: progress, τ, notices, errors
    strip: str | None = None                            # token strip HTML (None: unchanged)
    chart: str | None = None                            # round view Vega-Lite JSON (None: unchanged)
    stats: str | None = None                            # Markdown: tok/s speculative vs plain
    trace: Trace | None = None                          # the finished trace (kept in the session state)
    file: str | None = None                             # the trace as a JSON file to download
    warning: str | None = None                          # shown as a toast too
    round_index: int | None = None                      # the round this update draws (None: not a round update)
    phase: str = "round"                                # start | round | done | plain | final | error


def live_decode(res: AppResources, prompt: str, drafter: str, temperature=0.0, max_new_tokens=96, load=1,
                profile: str | None = None, compare: bool = True, seed=0,
                show_pruned: bool = True) -> Iterator[LiveUpdate]:
    """Decode one request round by round (a generator of LiveUpdate), then plain decoding for comparison."""
    lim, notes = res.limits, []
    try:
        drafter = check_choice(drafter, res.drafters, "drafter")
        profile = check_choice(profile or next(iter(res.profiles)), res.profiles, "profile")
        T = clamp(temperature, 0.0, lim.max_temperature, "temperature", notes)
        N = clamp(max_new_tokens, 1, min(lim.max_new_tokens, res.context_limit - 8), "max new tokens", notes,
                  integer=True)
        R = clamp(load, 1, lim.max_load, "engine load R", notes, integer=True)
        seed = clamp(seed, 0, 2 ** 31 - 1, "seed", notes, integer=True)
        ids, text, notice = prepare_prompt(res.target, prompt, N, res.context_limit)
    except ValueError as e:
        yield LiveUpdate(status=f"⚠️ **{md_escape(e)}**", warning=str(e), phase="error")
        return
    if notice:
        notes.append(notice)
    warn = " · ".join(notes) or None                    # clipped settings, truncated prompt: also a toast
    head = "".join(f"\n\n⚠️ {md_escape(n)}" for n in notes)
    d = res.drafters[drafter]
    policy = live_policy(d, R, res.recorded.conf_rows)
    if not getattr(d, "has_confidence", False) and R > 1:
        head += (f"\n\n**Note:** {md_escape(res.label(drafter))} has no confidence head: it verifies all "
                 f"γ = {d.gamma} drafts (fixed length), so the engine load R = {R} does not change its ℓ.")
    from .decode import generate_rounds, plain_generate
    from .viz import round_view, token_strip_html

    try:
        rounds = generate_rounds(res.target, d, text, prompt_ids=ids, policy=policy, temperature=T,
                                 max_new_tokens=N, seed=seed, sps=res.profiles[profile],
                                 meta={"load_R": R, "profile": profile, "app": "live"})
    except ValueError as e:
        yield LiveUpdate(status=f"⚠️ **{md_escape(e)}**", warning=str(e), phase="error")
        return
    tr = rounds.trace
    yield LiveUpdate(status=f"Prefill of {len(ids)} prompt tokens…{head}", strip="", stats="", warning=warn,
                     phase="start")
    t_chart = t_model = 0.0
    latest, latest_i = None, -1                         # the newest round chart drawn, and its round
    try:
        for r in rounds:
            t_model += r.t_draft + r.t_schedule + r.t_verify + r.t_other + (tr.t_prefill if r.index == 0 else 0)
            chart = None
            if r.index == 0 or (t_chart <= lim.chart_budget * t_model                 # drawing budget (Limits)
                                and t_chart <= lim.chart_ms_per_round / 1000 * (r.index + 1)):
                t0 = time.perf_counter()
                chart = latest = chart_json(round_view(tr, -1))
                t_chart += time.perf_counter() - t0
                latest_i = r.index
            yield LiveUpdate(status=_live_status(res, tr, r, policy, profile, drafter) + head,
                             strip=token_strip_html(tr, show_pruned=bool(show_pruned), legend=False,
                                                    max_rounds=lim.stream_rounds),
                             chart=chart, round_index=r.index)
    except Exception as e:                              # noqa: BLE001 — show it, keep the app up
        yield LiveUpdate(status=f"⚠️ **decoding failed: {md_escape(e)}**", warning=f"decoding failed: {e}",
                         phase="error")
        return
    path = res.workdir / f"trace-{drafter}-{uuid.uuid4().hex[:8]}.json"
    tr.to_json(str(path))
    _prune(res.workdir, keep=256)
    spec_s = model_seconds(tr)
    if tr.rounds and latest_i != tr.rounds[-1].index:
        latest = chart_json(round_view(tr, -1))         # the last round is always drawn
    strip = token_strip_html(tr, show_pruned=bool(show_pruned), legend=False)
    done = (f"✓ **Finished**: {tr.n_generated} tokens in {len(tr.rounds)} rounds · τ = {_f(metrics.tau(tr))} · "
            f"{md_escape(res.label(drafter))}, policy `{getattr(policy, 'name', '?')}`, profile `{profile}`")
    # every closing update carries the whole result, so an API client's final value is complete
    final = dict(strip=strip, chart=latest, trace=tr, file=str(path))
    yield LiveUpdate(status=done + (" · running plain decoding for comparison…" if compare else "") + head,
                     stats=_stats_md(res, tr, spec_s, None, T, drafter, policy, compare), phase="done", **final)
    if not compare:
        return
    try:
        plain = plain_generate(res.target, text, prompt_ids=ids, temperature=T, max_new_tokens=N, seed=seed)
    except Exception as e:                              # noqa: BLE001
        yield LiveUpdate(status=done + f" · plain decoding failed: {md_escape(e)}" + head, phase="final", **final)
        return
    yield LiveUpdate(status=done + " · plain decoding done" + head,
                     stats=_stats_md(res, tr, spec_s, plain, T, drafter, policy, compare), phase="final", **final)


def _prune(folder: Path, keep: int) -> None:
    """Keep the newest ``keep`` trace files of this app (downloads of older runs expire)."""
    files = []
    for p in folder.glob("trace-*.json"):
        try:
            files.append((p.stat().st_mtime, str(p)))
        except OSError:                                 # pruned by a concurrent session meanwhile
            pass
    for _, p in sorted(files)[:-keep]:
        Path(p).unlink(missing_ok=True)


def _f(x, d: int = 2) -> str:
    return "—" if x is None or x != x else f"{x:.{d}f}"


def _live_status(res, tr: Trace, r, policy, profile: str, drafter: str) -> str:
    return (f"**Round {r.index + 1}** · {tr.n_generated} tokens · running τ = {_f(metrics.tau(tr))} tokens/round · "
            f"this round: drafted {len(r.drafts)}, verified ℓ = {r.ell}, accepted m = {r.accepted}"
            f"{' + bonus' if r.bonus is not None else ''} · {md_escape(res.label(drafter))}, policy "
            f"`{getattr(policy, 'name', '?')}`, profile `{profile}`")


def _stats_md(res, tr: Trace, spec_s: float, plain: Trace | None, T: float, drafter: str, policy,
              compare: bool = True) -> str:
    rows = ["| | tokens | forwards | seconds | tokens/s |", "|---|---:|---:|---:|---:|"]
    spec_tps = tr.n_generated / spec_s if spec_s > 0 else float("nan")
    rows.append(f"| **speculative** | {tr.n_generated} | {len(tr.rounds) + 1} | {spec_s:.2f} | "
                f"**{_f(spec_tps, 1)}** |")
    lines = []
    if plain is not None:
        ps = model_seconds(plain)
        p_tps = plain.n_generated / ps if ps > 0 else float("nan")
        rows.append(f"| **plain** | {plain.n_generated} | {len(plain.rounds) + 1} | {ps:.2f} | **{_f(p_tps, 1)}** |")
        lines.append(f"Speed-up: **×{_f(spec_tps / p_tps)}** tokens/s over plain decoding.")
        if T == 0:
            same = plain.output_ids == tr.output_ids
            lines.append("Same text as plain decoding: " + ("✓ yes — greedy speculative decoding is lossless."
                                                            if same else "✗ no (unexpected at temperature 0)."))
        else:
            lines.append("At temperature > 0 both texts are samples from the same distribution; they need not match.")
    elif compare:
        lines.append("Plain decoding of the same prompt follows…")
    lines.append(f"<small>Speculative: {md_escape(res.label(drafter))} drafts, policy "
                 f"`{getattr(policy, 'name', '?')}`. "
                 "Plain: the target alone, one token per forward, same prompt and settings. Forwards = target passes "
                 "incl. the prefill. Seconds = decode time measured inside the library (drawing the page excluded); "
                 "both runs share the CPU with every other user of this app.</small>")
    return "\n".join(rows) + "\n\n" + "\n\n".join(lines)


# -- scheduler playground ------------------------------------------------------------------------------------
@dataclass
class PlaygroundView:
    summary: str                                        # Markdown
    lengths_html: str                                   # ℓ per request as text (also read by the browser test)
    lengths_chart: str                                  # Vega-Lite JSON
    lengths: list[int]


def _playground_inputs(res: AppResources, load, profile: str, notes: list[str]) -> tuple[int, str]:
    R = clamp(load, 1, res.limits.max_load, "engine load R", notes, integer=True)
    return R, check_choice(profile, res.profiles, "profile")


def playground_schedule(res: AppResources, R: int, profile: str, early_stop: bool = True):
    """Algorithm 1 (or its retrospective variant) on R recorded requests, tiled (milliseconds: not memoised)."""
    from .widgets import tile_requests

    conf = tile_requests(res.recorded.conf_rows, R)
    return HardwareAware(early_stop=early_stop).choose(conf, res.profiles[profile])


def playground_view(res: AppResources, load, profile: str, early_stop: bool = True) -> PlaygroundView:
    """The scheduler's answer for load R, no model: ℓ per request, as text and as a bar chart."""
    notes: list[str] = []
    R, profile = _playground_inputs(res, load, profile, notes)
    view = res.memo(("playground", R, profile, bool(early_stop)),
                    lambda: _playground(res, R, profile, bool(early_stop)))
    if notes:
        view = replace(view, summary="⚠️ " + md_escape("; ".join(notes)) + "\n\n" + view.summary)
    return view


def admission_view(res: AppResources, load, profile: str, early_stop: bool = True) -> str:
    """Vega-Lite JSON of the admission path (Θ per admitted candidate and the stop point) for load R."""
    from .viz import admission_path_chart

    R, profile = _playground_inputs(res, load, profile, [])
    return res.memo(("path", R, profile, bool(early_stop)),
                    lambda: chart_json(admission_path_chart(playground_schedule(res, R, profile, early_stop))))


def _playground(res: AppResources, R: int, profile: str, early_stop: bool) -> PlaygroundView:
    from .viz import chosen_lengths_chart

    s = playground_schedule(res, R, profile, early_stop)
    gamma = res.recorded.gamma
    mean = sum(s.lengths) / len(s.lengths)
    stop = (f"stopped at candidate {s.stop_at + 1} of {len(s.path)} (the first that did not raise Θ)"
            if s.stop_at is not None else f"all {len(s.path)} candidates admitted")
    kind = "Algorithm 1 (early stop, lossless)" if early_stop else "retrospective argmax of Θ (NOT lossless)"
    summary = (f"**R = {R}** requests · {kind} · profile `{profile}` · **mean ℓ = {mean:.2f}** of γ = {gamma} · "
               f"B = {s.B} tokens in the verify forward · expected Θ = {s.theta_best:,.0f} tokens/s "
               f"(start Θ0 = R·SPS(R) = {s.info.get('theta0', float('nan')):,.0f}) · {stop}")
    shown = " ".join(str(e) for e in s.lengths[:64]) + (" …" if R > 64 else "")
    lengths_html = (f'<div id="pg-lengths-text" data-r="{R}" data-mean="{mean:.4f}" '
                    f'style="font-family:ui-monospace,monospace;font-size:13px">ℓ per request: '
                    f'<span class="pg-lengths">{shown}</span></div>')
    return PlaygroundView(summary, lengths_html, chart_json(chosen_lengths_chart(s, gamma=gamma)), list(s.lengths))


def sps_chart_json(res: AppResources) -> str:
    from .viz import sps_chart

    return res.memo(("sps",), lambda: chart_json(sps_chart(list(res.profiles.values()), bmax=512)))


# -- calibration --------------------------------------------------------------------------------------------
def calibration_view(res: AppResources, position=0, after: bool = True) -> tuple[str, str]:
    """(reliability diagram JSON, per-position table Markdown) for position k (0: all) before / after STS."""
    cd = res.calibration
    g = cd.conf.shape[1]
    k = int(clamp(position or 0, 0, g, "position", [], integer=True))

    def make():
        from .viz import reliability_diagram

        df = cd.frame if after else cd.frame[cd.frame.stage == "before STS"]
        return chart_json(reliability_diagram(df, positions=[k] if k else None, report=cd.report,
                                              size=300 if k else 105))
    return res.memo(("calib", k, bool(after)), make), _calibration_table(cd, bool(after))


def _calibration_table(cd: CalibrationData, after: bool) -> str:
    rep = cd.report
    head = ["k", "rounds", "observed P(m≥k)", "mean a_k raw", "ECE raw"]
    if after:
        head += ["T_k", "mean a'_k", "ECE after STS"]
    head += ["AUROC"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for i in range(len(rep["n"])):
        cells = [str(i + 1), str(rep["n"][i]), _f(rep["rate"][i], 3), _f(rep["mean_before"][i], 3),
                 _f(rep["ece_before"][i], 3)]
        if after:
            cells += [_f(rep["temperatures"][i]), _f(rep["mean_after"][i], 3), f"**{_f(rep['ece_after'][i], 3)}**"]
        cells.append(_f(rep["auroc"][i], 3))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


# -- serving frontier ------------------------------------------------------------------------------------------
def frontier_policies(gamma: int) -> list[str]:
    fixed = sorted({1, min(3, gamma), gamma})
    return [f"fixed-{e}" for e in fixed] + ["hardware-aware", "hardware-aware+floor", "async-global"]


def frontier_view(res: AppResources, profile: str, cache: dict | None) -> tuple[str, str, str, dict]:
    """engine.sweep of every policy on the recorded (or synthetic) requests, cached per profile in ``cache``
    (the session's state). → (frontier JSON, budget JSON, summary Markdown, cache)."""
    import pandas as pd

    from .engine import headline, sweep
    from .viz import budget_chart, frontier_chart

    profile = check_choice(profile, res.profiles, "profile")
    cache = dict(cache or {})
    if profile not in cache:
        t0 = time.perf_counter()
        df = sweep(res.recorded.traces, frontier_policies(res.recorded.gamma), res.profiles[profile],
                   Rs=SWEEP_RS, n_rounds=res.limits.sweep_rounds, seed=0)
        cache[profile] = {"rows": df.to_dict("records"), "seconds": time.perf_counter() - t0}
    df = pd.DataFrame(cache[profile]["rows"])
    try:
        h = headline(df, policy="hardware-aware", baseline="fixed-1", sla_R=32)
        head = (f"At the per-user speed fixed-1 reaches with R = 32 ({h['sla_per_user']:,.0f} tok/s per user), "
                f"the hardware-aware scheduler serves **×{_f(h['throughput_gain_at_sla'])}** the total throughput "
                f"of fixed-1{' (lower bound)' if h['policy_at_sla_is_lower_bound'] else ''}; at fixed-1's "
                f"throughput it is **×{_f(h['per_user_speedup_at_matched_throughput'])}** faster per user; its "
                f"worst ratio to the best fixed length is **×{_f(h['min_ratio_vs_best_fixed'])}** "
                f"(at R = {h['argmin_R_vs_best_fixed']}).")
    except (ValueError, KeyError, ZeroDivisionError) as e:
        head = f"(headline numbers unavailable: {md_escape(e)})"
    summary = (f"{head}\n\nSimulated with `engine.sweep` on {res.recorded.note}; profile `{profile}`, "
               f"{res.limits.sweep_rounds} engine steps per point, R ∈ {{{', '.join(map(str, SWEEP_RS))}}} "
               f"(computed in {cache[profile]['seconds']:.1f} s, kept for this session).")
    return chart_json(frontier_chart(df)), chart_json(budget_chart(df)), summary, cache


# -- replay --------------------------------------------------------------------------------------------------
def load_trace_file(path) -> Trace:
    """A Trace from an uploaded JSON file; ValueError with a readable reason for anything else."""
    if not path:
        raise ValueError("no file: upload a Trace JSON saved by this app, the notebooks or `dspark-viz`")
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise ValueError(f"the file is {size / 2 ** 20:.1f} MB; traces above "
                             f"{MAX_TRACE_BYTES // 2 ** 20} MB are refused")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{p.name} is not a text file (not UTF-8): not a Trace JSON") from None
    except OSError as e:
        raise ValueError(f"cannot read the uploaded file: {e}") from None
    if not text.lstrip().startswith("{"):
        raise ValueError(f"{p.name} is not a dspark_viz Trace (expected a JSON object)")
    tr = Trace.from_json(text)
    try:                                               # types are not checked by the dataclasses: draw once
        if not isinstance(tr.rounds, list) or not isinstance(tr.meta, dict):
            raise TypeError("rounds must be a list and meta an object")
        if tr.rounds:
            _replay_draw(tr, len(tr.rounds) - 1)
    except Exception as e:                             # noqa: BLE001
        raise ValueError(f"{p.name} is not a valid dspark_viz Trace ({type(e).__name__}: {e})") from None
    return tr


def strip_view(tr: Trace | None, show_pruned: bool = True) -> str:
    """The whole token strip of a trace (empty string without one)."""
    from .viz import token_strip_html

    return token_strip_html(tr, show_pruned=bool(show_pruned), legend=False) if tr is not None else ""


def _replay_draw(tr: Trace, i: int, show_pruned: bool = True) -> tuple[str, str, str | None]:
    from .viz import admission_path_chart, round_view, token_strip_html

    upto = replace(tr, rounds=tr.rounds[: i + 1])
    strip = token_strip_html(upto, show_pruned=bool(show_pruned), legend=False)
    sched = tr.rounds[i].schedule
    path = chart_json(admission_path_chart(sched)) if sched and sched.get("path") else None
    return strip, chart_json(round_view(tr, i)), path


def replay_view(tr: Trace | None, index, show_pruned: bool = True) -> tuple[str, str, str | None, str | None]:
    """(status Markdown, strip HTML, round view JSON, admission path JSON or None) up to round ``index``."""
    if tr is None:
        return "Upload a Trace JSON (or press **Use my last live run**) to browse it round by round.", "", None, None
    n = len(tr.rounds)
    if n == 0:
        return "This trace has no rounds (the answer ended at the prefill token).", "", None, None
    notes: list[str] = []
    i = clamp(index if index is not None else n - 1, 0, n - 1, "round", notes, integer=True)
    strip, rv, path = _replay_draw(tr, i, show_pruned)
    if path is None:
        notes.append("no admission path in this round: its policy did not sort candidates (fixed length, "
                     "or a drafter without confidences)")
    m = tr.meta
    upto = replace(tr, rounds=tr.rounds[: i + 1])
    prompt = str(m.get("prompt") or "")
    status = (f"**Round {i + 1} of {n}** · drafter `{md_escape(m.get('drafter', '?'))}` · policy "
              f"`{md_escape(m.get('policy', '?'))}` · temperature {md_escape(m.get('temperature', '?'))} · "
              f"{upto.n_generated} tokens so far · τ so far = {_f(metrics.tau(upto))}"
              + (f"\n\nPrompt: {md_escape(_one_line(prompt, 300))}" if prompt else "")
              + ("".join(f"\n\n**Note:** {md_escape(x)}" for x in notes)))
    return status, strip, rv, path


def _one_line(text: str, n: int) -> str:
    t = " ↵ ".join(x.strip() for x in str(text).splitlines() if x.strip())
    return t if len(t) <= n else t[: n - 1] + "…"


def drafters_md(res: AppResources) -> str:
    have = ", ".join(f"**{md_escape(res.label(n))}**"
                     + ("" if getattr(d, "has_confidence", False) else " (no confidence)")
                     for n, d in res.drafters.items())
    miss = "; ".join(f"{md_escape(res.label(n))}: {md_escape(why)}" for n, why in res.missing.items())
    return f"Drafters: {have}." + (f" Not available: {miss}." if miss else "")


__all__ = ["AppResources", "Limits", "LiveUpdate", "PlaygroundView", "Recorded", "load_resources", "live_decode",
           "playground_view", "admission_view", "calibration_view", "frontier_view", "load_trace_file", "replay_view",
           "prepare_prompt", "clamp", "chart_json", "model_seconds", "DEFAULT_EXAMPLES", "DRAFTER_LABELS"]
