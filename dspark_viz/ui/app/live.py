"""The Live decode tab: one request decoded round by round (a stream of LiveUpdate) in the app's live engine,
beside R − 1 real background requests and every other page's, then plain decoding of the same prompt for a
tokens/s comparison.

Legend: R requests sharing the verification forward (engine load), γ block size, ℓ verification length,
m accepted drafts, τ committed tokens per round, T temperature, N max new tokens.

The request goes into the engine every session shares for its drafter and profile (``AppResources.engine``,
serving/engine.py): each round all live requests draft, Algorithm 1 allocates ℓ across all of them, one ragged
forward verifies every block. The load slider submits R − 1 background requests (prompts of the shipped
evaluation set, named on the page) that decode beside this one until it ends; other pages' requests join the
same forwards. Optionally each request decodes behind its own speculation gate (``gate.SpeculationGate``: plain
steps while drafting does not pay; on by default on a CPU). A target the ragged forward does not cover decodes
alone (``decode.generate_rounds``), the load then simulated by ``background.live_policy`` (R − 1 recorded
confidence rows). The default profile is the measured CPU curve on a CPU target (``AppResources.live_profile``).
The speed-up is against plain decoding of the same prompt on the same target and dtype, and the simulation
(serving/simulate.py) gives its prediction for the same R and profile beside the engine's throughput. This
module checks the settings, spends a bounded share of the time on drawing, and writes the status, the token
strip, the round chart and the stats.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ... import metrics
from ...background import live_policy
from ...decode import generate_rounds, plain_generate
from ...gate import SpeculationGate
from ...threads import gives_back
from ...trace import Trace
from ...viz import round_view, token_strip_html
from ..inputs import check_choice, clamp, prepare_prompt
from .resources import AppResources
from .text import chart_json, fmt_num, md_escape


@dataclass
class LiveUpdate:
    """One step of the stream: what changed on the page (None: leave that component as it is)."""
    status: str                                         # Markdown: progress, τ, notices, errors
    strip: str | None = None                            # token strip HTML (None: unchanged)
    chart: str | None = None                            # round view Vega-Lite JSON (None: unchanged)
    stats: str | None = None                            # Markdown: tok/s speculative vs plain
    trace: Trace | None = None                          # the finished trace (kept in the session state)
    file: str | None = None                             # the trace as a JSON file to download
    warning: str | None = None                          # shown as a toast too
    round_index: int | None = None                      # the round this update draws (None: not a round update)
    phase: str = "round"                                # start | round | done | plain | final | error


def model_seconds(trace: Trace) -> float:
    """Decode time spent in the library (prefill + draft + schedule + verify + bookkeeping), no drawing."""
    return trace.t_prefill + sum(r.t_draft + r.t_schedule + r.t_verify + r.t_other for r in trace.rounds)


@dataclass
class LiveSettings:
    """One run's checked settings and its prompt as token ids."""
    drafter: str
    profile: str
    T: float                                            # temperature
    N: int                                              # max new tokens
    R: int                                              # engine load
    seed: int
    ids: list[int]                                      # the prompt's chat ids
    text: str                                           # the prompt as the target reads it
    notes: list[str]                                    # clipped settings, a truncated prompt


def live_settings(res: AppResources, prompt: str, drafter: str, temperature, max_new_tokens, load,
                  profile: str | None, seed) -> LiveSettings:
    """The settings checked against ``res.limits`` (clipped with a note); ValueError for an unknown choice or
    a prompt that does not fit."""
    lim, notes = res.limits, []
    drafter = check_choice(drafter, res.drafters, "drafter")
    profile = check_choice(profile or res.live_profile, res.profiles, "profile")
    T = clamp(temperature, 0.0, lim.max_temperature, "temperature", notes)
    N = clamp(max_new_tokens, 1, min(lim.max_new_tokens, res.context_limit - 8), "max new tokens", notes,
              integer=True)
    R = clamp(load, 1, lim.max_live, "engine load R", notes, integer=True)
    seed = clamp(seed, 0, 2 ** 31 - 1, "seed", notes, integer=True)
    room = res.context_limit - getattr(res.drafters[drafter], "gamma", 0) - 1    # a last round's block fits too
    ids, text, notice = prepare_prompt(res.target, prompt, N, room)
    if notice:
        notes.append(notice)
    return LiveSettings(drafter, profile, T, N, R, seed, ids, text, notes)


def _error(e: Exception) -> LiveUpdate:
    return LiveUpdate(status=f"⚠️ **{md_escape(e)}**", warning=str(e), phase="error")


@gives_back
def live_decode(res: AppResources, prompt: str, drafter: str, temperature=0.0, max_new_tokens=96, load=1,
                profile: str | None = None, compare: bool = True, seed=0,
                show_pruned: bool = True, fallback: bool | None = None) -> Iterator[LiveUpdate]:
    """Decode one request round by round (a generator of LiveUpdate), then plain decoding for comparison.
    ``fallback``: the speculation gate on / off (None: ``res.fallback_default``, on for a CPU target)."""
    try:
        s = live_settings(res, prompt, drafter, temperature, max_new_tokens, load, profile, seed)
    except ValueError as e:
        yield _error(e)
        return
    warn = " · ".join(s.notes) or None                  # clipped settings, truncated prompt: also a toast
    head = "".join(f"\n\n⚠️ {md_escape(n)}" for n in s.notes)
    d = res.drafters[s.drafter]
    if not getattr(d, "has_confidence", False) and s.R > 1:
        head += (f"\n\n**Note:** {md_escape(res.label(s.drafter))} has no confidence head: it verifies all "
                 f"γ = {d.gamma} drafts (fixed length), so the engine load R = {s.R} does not change its ℓ.")
    gate_on = res.fallback_default if fallback is None else bool(fallback)
    eng = res.engine(s.drafter, s.profile)
    if eng is not None:
        yield from _engine_decode(res, eng, s, gate_on, head, warn, show_pruned, compare)
        return
    policy = live_policy(d, s.R, res.recorded.conf_rows)
    head += (f"\n\n**Note:** {md_escape(str(res.target.name))} is not on the live engine's ragged forward: "
             f"this request decodes alone and R − 1 = {s.R - 1} recorded requests stand in for the load.")
    try:
        gate = SpeculationGate(res.profiles[s.profile]) if gate_on else False
        rounds = generate_rounds(res.target, d, s.text, prompt_ids=s.ids, policy=policy, temperature=s.T,
                                 max_new_tokens=s.N, seed=s.seed, sps=res.profiles[s.profile], fallback=gate,
                                 meta={"load_R": s.R, "profile": s.profile, "app": "live"})
    except ValueError as e:
        yield _error(e)
        return
    yield LiveUpdate(status=f"Prefill of {len(s.ids)} prompt tokens…{head}", strip="", stats="", warning=warn,
                     phase="start")
    drawn = yield from _stream_rounds(res, rounds, policy, s, gate_on, head, show_pruned)
    if drawn is not None:
        yield from _finish(res, rounds.trace, drawn, policy, s, gate_on, head, show_pruned, compare)


class JobRounds:
    """A live-engine Job as ``_stream_rounds`` reads a decode: its Rounds as they come, and its Trace."""

    def __init__(self, job):
        self.job, self.trace = job, job.trace

    def __iter__(self):
        return self.job.rounds()


def background_prompts(res: AppResources, n: int, seed: int, own: str) -> list[tuple[str, str]]:
    """The n background requests' (domain, prompt): the shipped evaluation examples in turn from ``seed``,
    the user's own prompt left out."""
    pool = [e for e in res.examples if e[1] != own] or list(res.examples)
    return [pool[(seed + k) % len(pool)] for k in range(n)]


def _engine_decode(res: AppResources, eng, s: LiveSettings, gate_on: bool, head: str, warn, show_pruned: bool,
                   compare: bool) -> Iterator[LiveUpdate]:
    """This request and R − 1 background ones in the shared live engine; the background ones are cancelled
    when this one ends, fails or its page goes away."""
    gate = SpeculationGate(res.profiles[s.profile]) if gate_on else None
    meta = {"load_R": s.R, "profile": s.profile, "app": "live"}
    try:
        job = eng.submit(s.text, prompt_ids=s.ids, max_new_tokens=s.N, seed=s.seed, temperature=s.T, gate=gate,
                         meta=meta)
    except ValueError as e:
        yield _error(e)
        return
    others = []
    try:
        bg = background_prompts(res, s.R - 1, s.seed, s.text)
        for k, (_dom, p) in enumerate(bg):
            others.append(eng.submit(p, max_new_tokens=s.N, seed=s.seed + 1 + k, temperature=s.T,
                                     meta={"app": "background"}, diagnostics=False))    # nobody charts them
        if bg:
            head += (f"\n\n**Load:** {len(bg)} background request{'s' if len(bg) > 1 else ''} from the evaluation "
                     "set decode beside yours: " + "; ".join(f"{dom}: *{md_escape(p.splitlines()[0][:48])}…*"
                                                            for dom, p in bg))
        waiting = eng.queued
        yield LiveUpdate(status=f"Prefill of {len(s.ids)} prompt tokens…"
                         + (f" ({waiting} requests wait for one of the engine's {eng.max_live} slots)"
                            if waiting > len(others) + 1 else "") + head,
                         strip="", stats="", warning=warn, phase="start")
        sim = _simulated(res, s, eng)
        drawn = yield from _stream_rounds(res, JobRounds(job), eng.spec.policy, s, gate_on, head, show_pruned,
                                          load=lambda: _load_md(job, s, sim))
    finally:
        for o in others:
            eng.cancel(o)
        if not job.done.is_set():
            eng.cancel(job)                              # the page went away mid-decode
    if drawn is not None:
        spent = (job.t_end or time.perf_counter()) - job.submitted
        yield from _finish(res, job.trace, drawn, eng.spec.policy, s, gate_on, head, show_pruned, compare,
                           spec_s=spent, engine=_load_md(job, s, sim))


def _simulated(res: AppResources, s: LiveSettings, eng) -> float | None:
    """The simulation's engine throughput (tokens/s) at this R and profile, from the recorded traces (memoised);
    None without a confidence head or recorded data."""
    if not getattr(eng.drafter, "has_confidence", False) or res.recorded.synthetic:
        return None
    from ...serving.engine_bench import simulated
    try:
        return res.memo(("live-sim", s.profile, s.R, s.drafter), lambda: simulated(
            res.target, res.recorded.traces, [s.R], s.drafter, n_rounds=100, profile=res.profiles[s.profile])[s.R])
    except ValueError:
        return None


def _load_md(job, s: LiveSettings, sim: float | None) -> str:
    """One line: the live R, this request's and the engine's tokens/s, the simulation's prediction."""
    if not job.loads:
        return ""
    now = job.t_end or time.perf_counter()
    own = job.trace.n_generated / max(now - job.submitted, 1e-9)
    mean_R = sum(job.loads) / len(job.loads)
    line = (f"**Engine:** R = {job.loads[-1]} live now (mean {fmt_num(mean_R, 1)}, max {max(job.loads)} over your "
            f"rounds) · yours {fmt_num(own, 1)} tokens/s · engine {fmt_num(job.engine_throughput(), 1)} tokens/s")
    if sim is not None:
        line += f" · simulated at R = {s.R}: {fmt_num(sim, 1)} tokens/s"
    return line


def _stream_rounds(res: AppResources, rounds, policy, s: LiveSettings, gate_on: bool, head: str,
                   show_pruned: bool, load=None):
    """One LiveUpdate per decoded round; the round chart is drawn within a bounded share of the decode time
    (``Limits.chart_budget``, ``chart_ms_per_round``). → (newest chart drawn, its round), or None when decoding
    failed (said in an error update)."""
    lim, tr = res.limits, rounds.trace
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
            extra = load() if load is not None else ""
            yield LiveUpdate(status=_live_status(res, tr, r, policy, s.profile, s.drafter, gate_on)
                             + (f"\n\n{extra}" if extra else "") + head,
                             strip=token_strip_html(tr, show_pruned=bool(show_pruned), legend=False,
                                                    max_rounds=lim.stream_rounds),
                             chart=chart, round_index=r.index)
    except Exception as e:                              # noqa: BLE001 — show it, keep the app up
        yield LiveUpdate(status=f"⚠️ **decoding failed: {md_escape(e)}**", warning=f"decoding failed: {e}",
                         phase="error")
        return None
    return latest, latest_i


def _finish(res: AppResources, tr: Trace, drawn: tuple, policy, s: LiveSettings, gate_on: bool, head: str,
            show_pruned: bool, compare: bool, spec_s: float | None = None, engine: str = "") -> Iterator[LiveUpdate]:
    """The finished trace saved as a file, the whole strip and the last round's chart; then plain decoding of
    the same prompt for the tokens/s comparison. ``spec_s``: the decode's seconds (default: measured inside the
    library); ``engine``: the live engine's line."""
    latest, latest_i = drawn
    path = res.workdir / f"trace-{s.drafter}-{uuid.uuid4().hex[:8]}.json"
    tr.to_json(str(path))
    _prune(res.workdir, keep=256)
    shared = spec_s is not None
    spec_s = model_seconds(tr) if spec_s is None else spec_s
    if tr.rounds and latest_i != tr.rounds[-1].index:
        latest = chart_json(round_view(tr, -1))         # the last round is always drawn
    strip = token_strip_html(tr, show_pruned=bool(show_pruned), legend=False)
    done = (f"✓ **Finished**: {tr.n_generated} tokens in {len(tr.rounds)} rounds · "
            f"τ = {fmt_num(metrics.tau(tr))} · {_drafted_md(tr)} · {md_escape(res.label(s.drafter))}, "
            f"policy `{getattr(policy, 'name', '?')}`{' + fallback' if gate_on else ''}, profile `{s.profile}`")
    # every closing update carries the whole result, so an API client's final value is complete
    final = dict(strip=strip, chart=latest, trace=tr, file=str(path))
    stats = lambda plain: _stats_md(res, tr, spec_s, plain, s.T, s.drafter, policy, compare, shared, engine)  # noqa: E731
    yield LiveUpdate(status=done + (" · running plain decoding for comparison…" if compare else "") + head,
                     stats=stats(None), phase="done", **final)
    if not compare:
        return
    try:
        plain = plain_generate(res.target, s.text, prompt_ids=s.ids, temperature=s.T, max_new_tokens=s.N,
                               seed=s.seed)
    except Exception as e:                              # noqa: BLE001
        yield LiveUpdate(status=done + f" · plain decoding failed: {md_escape(e)}" + head, phase="final", **final)
        return
    yield LiveUpdate(status=done + " · plain decoding done" + head, stats=stats(plain), phase="final", **final)


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


def _drafted_md(tr: Trace) -> str:
    """"drafted in k/n rounds" (the other rounds were plain steps)."""
    return f"drafted in {sum(bool(r.drafts) for r in tr.rounds)}/{len(tr.rounds)} rounds"


def _live_status(res: AppResources, tr: Trace, r, policy, profile: str, drafter: str, gate_on: bool = False) -> str:
    if r.skipped:
        this = f"this round: a plain step (fallback: {md_escape((r.gate or {}).get('reason', 'skip'))})"
    else:
        this = (f"this round: drafted {len(r.drafts)}, verified ℓ = {r.ell}, accepted m = {r.accepted}"
                f"{' + bonus' if r.bonus is not None else ''}")
    return (f"**Round {r.index + 1}** · {tr.n_generated} tokens · "
            f"running τ = {fmt_num(metrics.tau(tr))} tokens/round · {_drafted_md(tr)} · {this} · "
            f"{md_escape(res.label(drafter))}, policy `{getattr(policy, 'name', '?')}`"
            f"{' + fallback' if gate_on else ''}, profile `{profile}`")


def _stats_md(res: AppResources, tr: Trace, spec_s: float, plain: Trace | None, T: float, drafter: str, policy,
              compare: bool = True, shared: bool = False, engine: str = "") -> str:
    rows = ["| | tokens | forwards | seconds | tokens/s |", "|---|---:|---:|---:|---:|"]
    spec_tps = tr.n_generated / spec_s if spec_s > 0 else float("nan")
    rows.append(f"| **speculative** | {tr.n_generated} | {len(tr.rounds) + 1} | {spec_s:.2f} | "
                f"**{fmt_num(spec_tps, 1)}** |")
    lines = []
    if plain is not None:
        ps = model_seconds(plain)
        p_tps = plain.n_generated / ps if ps > 0 else float("nan")
        rows.append(f"| **plain** | {plain.n_generated} | {len(plain.rounds) + 1} | {ps:.2f} | "
                    f"**{fmt_num(p_tps, 1)}** |")
        gain = spec_tps / p_tps
        dtype = str(getattr(res.target, "dtype", "")).replace("torch.", "")
        if shared:
            lines.append(f"Your tokens/s against plain decoding of the same prompt alone: **×{fmt_num(gain)}** "
                         f"({md_escape(str(res.target.name))}, {res.target.device}, {dtype}). Beside other requests "
                         "this is one user's speed in a shared engine, not the speculation gain alone: the engine's "
                         "throughput for everyone is on the **Engine** line.")
        else:
            lines.append(f"Speed-up: **×{fmt_num(gain)}** tokens/s over plain decoding on the same engine "
                         f"({md_escape(str(res.target.name))}, {res.target.device}, {dtype}): the speculation gain."
                         + ("" if gain >= 1 else
                            " Below 1: on this machine these drafts cost more time than they save."))
        if T == 0:
            same = plain.output_ids == tr.output_ids
            lines.append("Same text as plain decoding: " + ("✓ yes — greedy speculative decoding is lossless."
                                                            if same else "✗ no (unexpected at temperature 0)."))
        else:
            lines.append("At temperature > 0 both texts are samples from the same distribution; they need not match.")
    elif compare:
        lines.append("Plain decoding of the same prompt follows…")
    skipped = sum(r.skipped for r in tr.rounds)
    lines.append(f"Rounds that drafted: {_drafted_md(tr).removeprefix('drafted in ')}"
                 + (f" ({skipped} plain steps chosen by the fallback)." if tr.meta.get("fallback") else
                    " (fallback off)."))
    if engine:
        lines.append(engine)
    seconds = ("Speculative seconds = wall time in the shared engine from submission to the last token (its "
               "rounds also verified the other requests' blocks); plain seconds = decode time measured inside the "
               "library" if shared else
               "Seconds = decode time measured inside the library")
    lines.append(f"<small>Speculative: {md_escape(res.label(drafter))} drafts, policy "
                 f"`{getattr(policy, 'name', '?')}`{' + fallback' if tr.meta.get('fallback') else ''}. "
                 "Plain: the target alone, one token per forward, same prompt and settings. Forwards = target passes "
                 f"incl. the prefill. {seconds} (drawing the page excluded); "
                 "both runs share the CPU with every other user of this app.</small>")
    return "\n".join(rows) + "\n\n" + "\n\n".join(lines)


def strip_view(tr: Trace | None, show_pruned: bool = True) -> str:
    """The whole token strip of a trace (empty string without one)."""
    return token_strip_html(tr, show_pruned=bool(show_pruned), legend=False) if tr is not None else ""


__all__ = ["JobRounds", "LiveSettings", "LiveUpdate", "background_prompts", "live_decode", "live_settings", "model_seconds", "strip_view"]
