"""The scaling studies as pictures: τ against depth (the paper's Fig. 3), against block size with the latency panel
(Fig. 4), against corpus size, and the held-out curves behind them.

Input: frames of evaluation.study_report (``study_frame``, ``curves_frame``, ``load_latency``): one row per trained
cell (label, layers, gamma, data_tokens, tau, acc1, …); nothing is computed here.
"""
from __future__ import annotations

from .. import registry
from .style import CATEGORICAL

# the studied (shipped neural) drafters' labels, in the table's order (dspark_viz.registry)
DRAFTERS = registry.LiveNames(lambda: tuple(e.label for e in registry.entries(lambda e: e.stem is not None)))


def _color(alt):
    names = list(DRAFTERS)
    return alt.Color("label:N", title=None, scale=alt.Scale(domain=names, range=CATEGORICAL[:len(names)]))


def depth_chart(df, subtitle: str = ""):
    """τ against the number of draft layers D, one line per drafter (Fig. 3's layout)."""
    import altair as alt

    return alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        x=alt.X("layers:O", title="draft layers D"),
        y=alt.Y("tau:Q", title="τ (committed tokens per round)", scale=alt.Scale(zero=False)),
        color=_color(alt), strokeDash=alt.StrokeDash("label:N", title=None),
        tooltip=["label:N", "layers:O", alt.Tooltip("tau:Q", format=".3f"), alt.Tooltip("acc1:Q", format=".3f")],
    ).properties(width=260, height=200, title=alt.Title("τ against draft depth", subtitle=subtitle or ""))


def gamma_chart(df, latency: dict | None = None, subtitle: str = ""):
    """τ against block size γ, one line per drafter; beside it, when ``latency`` is given, the draft and verify
    milliseconds per γ on one path (Fig. 4's two panels)."""
    import altair as alt
    import pandas as pd

    left = alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        x=alt.X("gamma:O", title="block size γ"),
        y=alt.Y("tau:Q", title="τ (committed tokens per round)", scale=alt.Scale(zero=False)),
        color=_color(alt), strokeDash=alt.StrokeDash("label:N", title=None),
        tooltip=["label:N", "gamma:O", alt.Tooltip("tau:Q", format=".3f"), alt.Tooltip("acc1:Q", format=".3f")],
    ).properties(width=240, height=200, title="τ against γ")
    if not latency or not latency.get("rows"):
        return left.properties(title=alt.Title("τ against block size", subtitle=subtitle or ""))
    rows = [dict(gamma=r["gamma"], part=f"draft ({registry.label(r['algo'])})", ms=r["t_draft"] * 1e3)
            for r in latency["rows"]]
    by_g = {r["gamma"]: r["t_verify_full"] * 1e3 for r in latency["rows"]}
    rows += [dict(gamma=g, part="verify γ + 1 tokens (target)", ms=v) for g, v in sorted(by_g.items())]
    lat = pd.DataFrame(rows)
    right = alt.Chart(lat).mark_line(point=True).encode(
        x=alt.X("gamma:O", title="block size γ"), y=alt.Y("ms:Q", title="milliseconds"),
        color=alt.Color("part:N", title=None), tooltip=["part:N", "gamma:O", alt.Tooltip("ms:Q", format=".1f")],
    ).properties(width=240, height=200, title=f"latency ({latency.get('path', '').split(' (')[0]} path)")
    return alt.hconcat(left, right).resolve_scale(color="independent").properties(
        title=alt.Title("τ and latency against block size", subtitle=subtitle or ""))


def data_chart(df, subtitle: str = ""):
    """τ against the answer tokens the drafter trained on (log scale)."""
    import altair as alt

    return alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        x=alt.X("data_tokens:Q", title="answer tokens in the training corpus", scale=alt.Scale(type="log")),
        y=alt.Y("tau:Q", title="τ (committed tokens per round)", scale=alt.Scale(zero=False)),
        color=_color(alt),
        tooltip=["label:N", alt.Tooltip("data_tokens:Q", format=",.0f"), alt.Tooltip("tau:Q", format=".3f")],
    ).properties(width=260, height=200, title=alt.Title("τ against corpus size", subtitle=subtitle or ""))


def study_curves_chart(curves, by: str = "layers", subtitle: str = ""):
    """Held-out τ_est against optimiser step, one panel per drafter, one line per value of ``by``."""
    import altair as alt

    return alt.Chart(curves).mark_line(point=True).encode(
        x=alt.X("step:Q", title="optimiser step"),
        y=alt.Y("tau_est:Q", title="held-out τ estimate", scale=alt.Scale(zero=False)),
        color=alt.Color(f"{by}:O", title={"layers": "D", "gamma": "γ", "max_seqs": "sequences"}.get(by, by)),
        tooltip=["label:N", f"{by}:O", "step:Q", alt.Tooltip("tau_est:Q", format=".3f")],
    ).properties(width=200, height=160).facet(column=alt.Column("label:N", title=None)).properties(
        title=alt.Title("Validation curves", subtitle=subtitle or ""))


__all__ = ["depth_chart", "gamma_chart", "data_chart", "study_curves_chart"]
