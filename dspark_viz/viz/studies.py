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


def _drawn(df) -> list[str]:
    names = list(DRAFTERS)
    return [n for n in names if n in set(df["label"])] or names


def _color(alt, df):
    """Each drafter's colour from the one table, the legend listing only the drafters drawn."""
    names, drawn = list(DRAFTERS), _drawn(df)
    return alt.Color("label:N", title=None,
                     scale=alt.Scale(domain=drawn, range=[CATEGORICAL[names.index(n)] for n in drawn]))


def _tau_with_interval(alt, df, x: str, x_title: str):
    """τ against ``x``, one line per drafter; with the cells' per-prompt τ (``tau_prompts``, ``tau_lo``, ``tau_hi``)
    the mean over prompts and its 95 % interval as a bar, else the pooled τ alone."""
    has_iv = "tau_prompts" in df and df["tau_prompts"].notna().all()
    y = "tau_prompts" if has_iv else "tau"
    title = "τ, mean over prompts (bars: 95 % interval)" if has_iv else "τ (committed tokens per round)"
    base = alt.Chart(df).encode(x=alt.X(f"{x}:O", title=x_title), color=_color(alt, df))
    line = base.mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        y=alt.Y(f"{y}:Q", title=title, scale=alt.Scale(zero=False)),
        strokeDash=alt.StrokeDash("label:N", title=None, scale=alt.Scale(domain=_drawn(df))),
        tooltip=["label:N", f"{x}:O", alt.Tooltip("tau:Q", format=".3f", title="τ pooled"),
                 alt.Tooltip(f"{y}:Q", format=".3f"), alt.Tooltip("acc1:Q", format=".3f")])
    if not has_iv:
        return line
    return line + base.mark_rule(strokeWidth=2, opacity=0.6).encode(y="tau_lo:Q", y2="tau_hi:Q")


def depth_chart(df, subtitle: str = ""):
    """τ against the number of draft layers D, one line per drafter (Fig. 3's layout), with each point's interval
    over prompts. The paper's Fig. 3 prints no values; its claims go in the subtitle of the course's chart."""
    import altair as alt

    return _tau_with_interval(alt, df, "layers", "draft layers D").properties(
        width=260, height=200, title=alt.Title("τ against draft depth", subtitle=subtitle or ""))


def gamma_chart(df, latency: dict | None = None, subtitle: str = ""):
    """τ against block size γ, one line per drafter; beside it, when ``latency`` is given, the draft and verify
    milliseconds per γ on one path (Fig. 4's two panels)."""
    import altair as alt
    import pandas as pd

    left = _tau_with_interval(alt, df, "gamma", "block size γ").properties(width=240, height=200,
                                                                            title="τ against γ")
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
    return alt.hconcat(left, right).resolve_scale(color="independent", strokeDash="independent").properties(
        title=alt.Title("τ and latency against block size", subtitle=subtitle or ""))


def gain_chart(frame, subtitle: str = ""):
    """DSpark's τ ÷ DFlash's against γ: ours with its 95 % interval beside the gains the paper prints in Fig. 4
    (``study_report.gain_frame``); the rule at 1 is no gain."""
    import altair as alt

    sources = list(dict.fromkeys(frame["source"]))
    ours = [s for s in sources if s.startswith("here")]
    color = alt.Color("source:N", title=None, scale=alt.Scale(
        domain=sources, range=[CATEGORICAL[0] if s in ours else CATEGORICAL[3 + i % 3] for i, s in enumerate(sources)]))
    base = alt.Chart(frame).encode(x=alt.X("gamma:O", title="block size γ (the paper's draft length − 1)"),
                                   color=color)
    line = base.mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        y=alt.Y("gain:Q", title="τ, DSpark ÷ DFlash", scale=alt.Scale(zero=False)),
        strokeDash=alt.StrokeDash("source:N", title=None, scale=alt.Scale(domain=sources)),
        tooltip=["source:N", "gamma:O", alt.Tooltip("gain:Q", format=".3f"), alt.Tooltip("lo:Q", format=".3f"),
                 alt.Tooltip("hi:Q", format=".3f")])
    bars = base.transform_filter(alt.FieldOneOfPredicate(field="source", oneOf=ours)).mark_rule(
        strokeWidth=2, opacity=0.6).encode(y="lo:Q", y2="hi:Q")
    one = alt.Chart().mark_rule(color="#999999", strokeDash=[4, 3]).encode(y=alt.datum(1))
    return alt.layer(line, bars, one, data=frame).properties(
        width=300, height=210, title=alt.Title("DSpark's gain over DFlash against block size", subtitle=subtitle or ""))


def data_chart(df, subtitle: str = ""):
    """τ against the answer tokens the drafter trained on (log scale)."""
    import altair as alt

    return alt.Chart(df).mark_line(point=alt.OverlayMarkDef(size=60)).encode(
        x=alt.X("data_tokens:Q", title="answer tokens in the training corpus", scale=alt.Scale(type="log")),
        y=alt.Y("tau:Q", title="τ (committed tokens per round)", scale=alt.Scale(zero=False)),
        color=_color(alt, df),
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


__all__ = ["depth_chart", "gamma_chart", "gain_chart", "data_chart", "study_curves_chart"]
