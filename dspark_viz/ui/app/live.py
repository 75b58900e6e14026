"""The Live decode tab: one request decoded round by round (a stream of LiveUpdate), then plain decoding
of the same prompt for a tokens/s comparison.

Legend: R concurrent requests (engine load), γ block size, ℓ verification length, m accepted drafts,
τ committed tokens per round, T temperature, N max new tokens.

Decoding is ``decode.generate_rounds`` / ``plain_generate``; the policy is ``background.live_policy``
(Algorithm 1 on this request plus R − 1 recorded background requests), optionally behind the speculation gate
(``gate.SpeculationGate``: plain steps while drafting does not pay; on by default on a CPU). The default profile is
the measured CPU curve on a CPU target (``AppResources.live_profile``). The speed-up is against plain decoding of the
same prompt on the same target, engine and dtype. This module checks the settings, spends a bounded share of the
time on drawing, and writes the status, the token strip, the round chart and the stats.
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
    R = clamp(load, 1, lim.max_load, "engine load R", notes, integer=True)
    seed = clamp(seed, 0, 2 ** 31 - 1, "seed", notes, integer=True)
    ids, text, notice = prepare_prompt(res.target, prompt, N, res.context_limit)
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
    policy = live_policy(d, s.R, res.recorded.conf_rows)
    if not getattr(d, "has_confidence", False) and s.R > 1:
        head += (f"\n\n**Note:** {md_escape(res.label(s.drafter))} has no confidence head: it verifies all "
                 f"γ = {d.gamma} drafts (fixed length), so the engine load R = {s.R} does not change its ℓ.")
    gate_on = res.fallback_default if fallback is None else bool(fallback)
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


def _stream_rounds(res: AppResources, rounds, policy, s: LiveSettings, gate_on: bool, head: str,
                   show_pruned: bool):
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
            yield LiveUpdate(status=_live_status(res, tr, r, policy, s.profile, s.drafter, gate_on) + head,
                             strip=token_strip_html(tr, show_pruned=bool(show_pruned), legend=False,
                                                    max_rounds=lim.stream_rounds),
                             chart=chart, round_index=r.index)
    except Exception as e:                              # noqa: BLE001 — show it, keep the app up
        yield LiveUpdate(status=f"⚠️ **decoding failed: {md_escape(e)}**", warning=f"decoding failed: {e}",
                         phase="error")
        return None
    return latest, latest_i


def _finish(res: AppResources, tr: Trace, drawn: tuple, policy, s: LiveSettings, gate_on: bool, head: str,
            show_pruned: bool, compare: bool) -> Iterator[LiveUpdate]:
    """The finished trace saved as a file, the whole strip and the last round's chart; then plain decoding of
    the same prompt for the tokens/s comparison."""
    latest, latest_i = drawn
    path = res.workdir / f"trace-{s.drafter}-{uuid.uuid4().hex[:8]}.json"
    tr.to_json(str(path))
    _prune(res.workdir, keep=256)
    spec_s = model_seconds(tr)
    if tr.rounds and latest_i != tr.rounds[-1].index:
        latest = chart_json(round_view(tr, -1))         # the last round is always drawn
    strip = token_strip_html(tr, show_pruned=bool(show_pruned), legend=False)
    done = (f"✓ **Finished**: {tr.n_generated} tokens in {len(tr.rounds)} rounds · "
            f"τ = {fmt_num(metrics.tau(tr))} · {_drafted_md(tr)} · {md_escape(res.label(s.drafter))}, "
            f"policy `{getattr(policy, 'name', '?')}`{' + fallback' if gate_on else ''}, profile `{s.profile}`")
    # every closing update carries the whole result, so an API client's final value is complete
    final = dict(strip=strip, chart=latest, trace=tr, file=str(path))
    yield LiveUpdate(status=done + (" · running plain decoding for comparison…" if compare else "") + head,
                     stats=_stats_md(res, tr, spec_s, None, s.T, s.drafter, policy, compare), phase="done", **final)
    if not compare:
        return
    try:
        plain = plain_generate(res.target, s.text, prompt_ids=s.ids, temperature=s.T, max_new_tokens=s.N,
                               seed=s.seed)
    except Exception as e:                              # noqa: BLE001
        yield LiveUpdate(status=done + f" · plain decoding failed: {md_escape(e)}" + head, phase="final", **final)
        return
    yield LiveUpdate(status=done + " · plain decoding done" + head,
                     stats=_stats_md(res, tr, spec_s, plain, s.T, s.drafter, policy, compare), phase="final",
                     **final)


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
              compare: bool = True) -> str:
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
        lines.append(f"Speed-up: **×{fmt_num(gain)}** tokens/s over plain decoding on the same engine "
                     f"({md_escape(str(res.target.name))}, {res.target.device}, {dtype}): the speculation gain."
                     + ("" if gain >= 1 else " Below 1: on this machine these drafts cost more time than they save."))
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
    lines.append(f"<small>Speculative: {md_escape(res.label(drafter))} drafts, policy "
                 f"`{getattr(policy, 'name', '?')}`{' + fallback' if tr.meta.get('fallback') else ''}. "
                 "Plain: the target alone, one token per forward, same prompt and settings. Forwards = target passes "
                 "incl. the prefill. Seconds = decode time measured inside the library (drawing the page excluded); "
                 "both runs share the CPU with every other user of this app.</small>")
    return "\n".join(rows) + "\n\n" + "\n\n".join(lines)


def strip_view(tr: Trace | None, show_pruned: bool = True) -> str:
    """The whole token strip of a trace (empty string without one)."""
    return token_strip_html(tr, show_pruned=bool(show_pruned), legend=False) if tr is not None else ""


__all__ = ["LiveSettings", "LiveUpdate", "live_decode", "live_settings", "model_seconds", "strip_view"]
