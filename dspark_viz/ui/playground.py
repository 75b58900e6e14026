"""The Scheduler playground tab: Algorithm 1 on R recorded requests, no model.

Legend: R concurrent requests (engine load), γ block size, ℓ_r verification length of request r, B tokens in the
verify forward, Θ expected throughput, SPS(B) engine steps per second.

The R requests are the recorded confidence rows tiled by ``serving.background.tile_requests``; the schedule is
``scheduler.HardwareAware``. Views are pure (same inputs → same output for every user), so they are memoised in
``AppResources``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..scheduler import HardwareAware, Schedule
from ..serving.background import tile_requests
from ..viz import admission_path_chart, chosen_lengths_chart, sps_chart
from .inputs import check_choice, clamp
from .resources import AppResources
from .text import chart_json, md_escape


@dataclass
class PlaygroundView:
    summary: str                                        # Markdown
    lengths_html: str                                   # ℓ per request as text (also read by the browser test)
    lengths_chart: str                                  # Vega-Lite JSON
    lengths: list[int]


def _playground_inputs(res: AppResources, load, profile: str, notes: list[str]) -> tuple[int, str]:
    R = clamp(load, 1, res.limits.max_load, "engine load R", notes, integer=True)
    return R, check_choice(profile, res.profiles, "profile")


def playground_schedule(res: AppResources, R: int, profile: str, early_stop: bool = True) -> Schedule:
    """Algorithm 1 (or its retrospective variant) on R recorded requests, tiled (milliseconds: not memoised)."""
    conf = tile_requests(res.recorded.conf_rows, R)     # (R, γ)
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
    R, profile = _playground_inputs(res, load, profile, [])
    return res.memo(("path", R, profile, bool(early_stop)),
                    lambda: chart_json(admission_path_chart(playground_schedule(res, R, profile, early_stop))))


def _playground(res: AppResources, R: int, profile: str, early_stop: bool) -> PlaygroundView:
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
    """Vega-Lite JSON of every profile's SPS(B) curve (the engine cost model the scheduler uses)."""
    return res.memo(("sps",), lambda: chart_json(sps_chart(list(res.profiles.values()), bmax=512)))


__all__ = ["PlaygroundView", "admission_view", "playground_schedule", "playground_view", "sps_chart_json"]
