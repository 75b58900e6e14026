"""The Scheduler playground tab: Algorithm 1 on R recorded requests, no model.

Legend: R concurrent requests (engine load), γ block size, ℓ_r verification length of request r, B tokens in the
verify forward, Θ expected throughput, SPS(B) engine steps per second.

The R requests are the recorded confidence rows, request 0 replaced by the user's own row when one is typed, and the
schedule is ui/schedule.py's (the notebook panel's too). The profile ``KNEE_PROFILE`` is ``gpu_like`` with its knee
(where extra verified tokens stop being free) set by a slider. Views are pure (same inputs → same output for every
user), so they are memoised in ``AppResources``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...cost import SPSProfile
from ...scheduler import Schedule
from ...viz import admission_path_chart, chosen_lengths_chart, sps_chart
from ..inputs import check_choice, clamp, parse_confidences
from ..schedule import knee_profile
from ..schedule import playground_schedule as schedule_requests
from .resources import AppResources
from .text import chart_json, md_escape


@dataclass
class PlaygroundView:
    summary: str                                        # Markdown
    lengths_html: str                                   # ℓ per request as text (also read by the browser test)
    lengths_chart: str                                  # Vega-Lite JSON
    lengths: list[int]


KNEE_PROFILE = "gpu-like-knee"                           # gpu_like with its knee on the slider
KNEE_LABEL = "GPU-like, knee on the slider (synthetic)"


@dataclass(frozen=True)
class PlaygroundInputs:
    R: int
    profile: str
    early_stop: bool
    mine: tuple[float, ...] | None                      # the user's request 0, or None: recorded rows only
    knee: int


def playground_inputs(res: AppResources, load, profile: str, early_stop=True, mine="", knee=96,
                      notes: list[str] | None = None) -> PlaygroundInputs:
    """The checked settings; a bad confidence row is dropped with a note (the rest still runs)."""
    notes = notes if notes is not None else []
    R = clamp(load, 1, res.limits.max_load, "engine load R", notes, integer=True)
    profile = check_choice(profile, {**res.profiles, KNEE_PROFILE: None}, "profile")
    k = clamp(knee, 4, 512, "SPS knee", notes, integer=True)
    try:
        row = parse_confidences(mine)
    except ValueError as e:
        notes.append(f"your confidences: {e} — using the recorded rows only")
        row = None
    return PlaygroundInputs(R, profile, bool(early_stop), tuple(row) if row else None, k)


def _sps(res: AppResources, p: PlaygroundInputs) -> SPSProfile:
    return knee_profile(p.knee) if p.profile == KNEE_PROFILE else res.profiles[p.profile]


def playground_schedule(res: AppResources, p: PlaygroundInputs) -> Schedule:
    """Algorithm 1 (or its retrospective variant) on R recorded requests, tiled (milliseconds: not memoised)."""
    return schedule_requests(res.recorded.conf_rows, p.R, _sps(res, p), p.mine, p.early_stop)


def playground_view(res: AppResources, load, profile: str, early_stop: bool = True, mine="",
                    knee=96) -> PlaygroundView:
    """The scheduler's answer for load R, no model: ℓ per request, as text and as a bar chart."""
    notes: list[str] = []
    p = playground_inputs(res, load, profile, early_stop, mine, knee, notes)
    view = res.memo(("playground", p), lambda: _playground(res, p))
    if notes:
        view = replace(view, summary="⚠️ " + md_escape("; ".join(notes)) + "\n\n" + view.summary)
    return view


def admission_view(res: AppResources, load, profile: str, early_stop: bool = True, mine="", knee=96) -> str:
    """Vega-Lite JSON of the admission path (Θ per admitted candidate and the stop point) for load R."""
    p = playground_inputs(res, load, profile, early_stop, mine, knee)
    return res.memo(("path", p), lambda: chart_json(admission_path_chart(playground_schedule(res, p))))


def _playground(res: AppResources, p: PlaygroundInputs) -> PlaygroundView:
    s = playground_schedule(res, p)
    gamma = max(res.recorded.gamma, len(p.mine or ()))
    mean = sum(s.lengths) / len(s.lengths)
    stop = (f"stopped at candidate {s.stop_at + 1} of {len(s.path)} (the first that did not raise Θ)"
            if s.stop_at is not None else f"all {len(s.path)} candidates admitted")
    kind = "Algorithm 1 (early stop, lossless)" if p.early_stop else "retrospective argmax of Θ (NOT lossless)"
    prof = _sps(res, p).name
    yours = f" · **your request: ℓ = {s.lengths[0]}**" if p.mine is not None else ""
    summary = (f"**R = {p.R}** requests · {kind} · profile `{prof}` · **mean ℓ = {mean:.2f}** of γ = {gamma}{yours} · "
               f"B = {s.B} tokens in the verify forward · expected Θ = {s.theta_best:,.0f} tokens/s "
               f"(start Θ0 = R·SPS(R) = {s.info.get('theta0', float('nan')):,.0f}) · {stop}")
    shown = " ".join(str(e) for e in s.lengths[:64]) + (" …" if p.R > 64 else "")
    lengths_html = (f'<div id="pg-lengths-text" data-r="{p.R}" data-mean="{mean:.4f}" data-mine="{s.lengths[0]}" '
                    f'style="font-family:ui-monospace,monospace;font-size:13px">ℓ per request: '
                    f'<span class="pg-lengths">{shown}</span></div>')
    return PlaygroundView(summary, lengths_html, chart_json(chosen_lengths_chart(s, gamma=gamma)), list(s.lengths))


def sps_chart_json(res: AppResources) -> str:
    """Vega-Lite JSON of every profile's SPS(B) curve (the engine cost model the scheduler uses)."""
    return res.memo(("sps",), lambda: chart_json(sps_chart(list(res.profiles.values()), bmax=512)))


__all__ = ["KNEE_LABEL", "KNEE_PROFILE", "PlaygroundInputs", "PlaygroundView", "admission_view", "playground_inputs",
           "playground_schedule", "playground_view", "sps_chart_json"]
