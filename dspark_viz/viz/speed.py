"""Pictures of the paper's Eq. 1 on a machine: what a round costs and what it buys, per verified length ℓ.

Legend: ℓ verified drafts, E[n | ℓ] expected committed tokens of a round, t_plain one plain decoding step,
gain(ℓ) = E[n | ℓ] · t_plain / (t_draft + t_verify(ℓ)) the speculation gain (1 = plain decoding's speed).
Both charts read the tidy frame of ``evaluation.speculation_gain.gain_frame`` (one row per machine, acceptance
source and ℓ), one panel per machine.
"""
from __future__ import annotations

from .style import OKABE_ITO, series_scale

PART_COLORS = {"draft": OKABE_ITO["orange"], "verify (ℓ + 1 tokens)": OKABE_ITO["blue"]}


def _machines(df) -> list[str]:
    return list(dict.fromkeys(df.machine))


def round_cost_chart(df, width: int = 260, height: int = 220, subtitle: str | list[str] | None = None):
    """Per machine: a drafted round's time in plain steps (t_draft and t_verify(ℓ) over t_plain, stacked) against
    ℓ, with the rule at one plain step. A round pays when it commits more tokens than the plain steps it costs."""
    import altair as alt
    import pandas as pd

    one = df.drop_duplicates(["machine", "ell"])
    rows = [dict(machine=r.machine, ell=int(r.ell), part=part, steps=ms / r.plain_ms, ms=ms, order=i)
            for r in one.itertuples() for i, (part, ms) in enumerate(
                (("draft", r.draft_ms), ("verify (ℓ + 1 tokens)", r.verify_ms)))]
    parts = pd.DataFrame(rows)
    parts["one"] = 1.0
    bars = alt.Chart().mark_bar(width={"band": 0.7}).encode(
        x=alt.X("ell:O", title="verified drafts ℓ", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("steps:Q", stack="zero", title="round time ÷ one plain step"),
        color=alt.Color("part:N", scale=series_scale(list(PART_COLORS), PART_COLORS), title="part of the round",
                        sort=list(PART_COLORS)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("machine:N"), alt.Tooltip("ell:O", title="ℓ"), alt.Tooltip("part:N"),
                 alt.Tooltip("ms:Q", format=".2f", title="ms"), alt.Tooltip("steps:Q", format=".2f",
                                                                           title="plain steps")])
    rule = alt.Chart().mark_rule(color=OKABE_ITO["black"], strokeDash=[4, 3]).encode(y="mean(one):Q")
    return alt.layer(bars, rule, data=parts).properties(width=width, height=height).facet(
        column=alt.Column("machine:N", title=None, sort=_machines(df),
                          header=alt.Header(labelFontSize=12, labelFontWeight="bold")),
    ).properties(title=alt.Title("What a drafted round costs, in plain decoding steps",
                                 subtitle=subtitle or "dashed: one plain step (the cost of one token without a "
                                                      "draft)"))


def speculation_gain_chart(df, width: int = 260, height: int = 220, subtitle: str | list[str] | None = None):
    """Per machine: gain(ℓ) against ℓ on a log scale (×2 and ×½ equally far from 1), one line per acceptance
    source, the rule at 1 (plain decoding) and each line's best ℓ drawn as a large point."""
    import altair as alt

    sources = list(dict.fromkeys(df.acceptance))
    data = df.assign(one=1.0, point=df.best.map({True: "best ℓ of the line", False: "other ℓ"}))
    lo, hi = min(float(df.gain.min()), 1.0), max(float(df.gain.max()), 1.0)
    color = alt.Color("acceptance:N", scale=series_scale(sources), title="acceptance from",
                      legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=420))
    base = alt.Chart().encode(
        x=alt.X("ell:Q", title="verified drafts ℓ", axis=alt.Axis(values=sorted(set(df.ell)), format="d")),
        y=alt.Y("gain:Q", title="speculation gain (× plain decoding, log scale)",
                scale=alt.Scale(type="log", domain=[lo / 1.1, hi * 1.1], nice=False)),
        color=color,
        tooltip=[alt.Tooltip("machine:N"), alt.Tooltip("acceptance:N"), alt.Tooltip("ell:Q", title="ℓ"),
                 alt.Tooltip("expected_committed:Q", format=".3f", title="E[n | ℓ]"),
                 alt.Tooltip("round_ms:Q", format=".2f", title="round ms"),
                 alt.Tooltip("plain_ms:Q", format=".2f", title="plain step ms"),
                 alt.Tooltip("gain:Q", format=".3f", title="gain")])
    line = base.mark_line(strokeWidth=2)
    points = base.mark_point(filled=True).encode(
        size=alt.Size("point:N", scale=alt.Scale(domain=["other ℓ", "best ℓ of the line"], range=[30, 170]),
                      title=None, legend=alt.Legend(orient="bottom", direction="vertical")))
    rule = alt.Chart().mark_rule(color=OKABE_ITO["black"], strokeDash=[4, 3]).encode(y="mean(one):Q")
    return alt.layer(rule, line, points, data=data).properties(width=width, height=height).facet(
        column=alt.Column("machine:N", title=None, sort=_machines(df),
                          header=alt.Header(labelFontSize=12, labelFontWeight="bold")),
    ).properties(title=alt.Title("Speculation gain per verified length (paper Eq. 1)",
                                 subtitle=subtitle or "dashed: plain decoding (×1); above it speculating pays"))


__all__ = ["round_cost_chart", "speculation_gain_chart"]
