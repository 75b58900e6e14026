"""How far drafts survive: conditional acceptance and prefix survival per position (paper Fig. 2), and τ
per domain per drafter (paper Table 1).

Legend: k 1-based position, τ mean committed tokens per round (bonus included).
The numbers come from ``dspark_viz.metrics``; this module only arranges them into tidy frames and charts.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from .. import metrics
from ..trace import Trace
from .style import DRAFTER_COLORS, series_scale

METRIC_NAMES = {"conditional": "conditional acceptance P(x_k ok | x_<k ok)",
                "survival": "prefix survival P(m ≥ k)"}


def _as_lists(traces_by_drafter: Mapping[str, Trace | Sequence[Trace]]) -> dict[str, list[Trace]]:
    return {str(k): [v] if isinstance(v, Trace) else list(v) for k, v in traces_by_drafter.items()}


FRAME_COLUMNS = ["drafter", "k", "metric", "value", "n", "lo", "hi"]


def acceptance_frame(traces_by_drafter: Mapping[str, Trace | Sequence[Trace]], gamma: int | None = None):
    """Tidy DataFrame (drafter, k, metric, value, n, lo, hi) from metrics.conditional_acceptance /
    metrics.survival: n is the number of rounds behind the value, lo–hi its 95 % Wilson interval."""
    import pandas as pd

    rows = []
    for name, ts in _as_lists(traces_by_drafter).items():
        c = metrics.acceptance_counts(ts, gamma)
        # conditional: accepted among the rounds at risk at k; survival: accepted among all rounds that drafted
        for key, den in (("conditional", c["at_risk"]), ("survival", c["rounds"])):
            for k, (x, n) in enumerate(zip(c["accepted"], den), start=1):
                lo, hi = metrics.wilson_interval(x, n)
                rows.append(dict(drafter=name, k=k, metric=METRIC_NAMES[key], value=x / n if n else float("nan"),
                                 n=n, lo=lo, hi=hi))
    return pd.DataFrame(rows, columns=FRAME_COLUMNS)


def acceptance_chart(data, gamma: int | None = None, width: int = 300, height: int = 220):
    """Two panels: conditional acceptance and prefix survival vs position, one line per drafter.

    ``data``: dict drafter → Trace | list[Trace], or the DataFrame from ``acceptance_frame``.
    """
    import altair as alt

    df = data if hasattr(data, "columns") else acceptance_frame(data, gamma)
    df = df.dropna(subset=["value"])
    drafters = list(dict.fromkeys(df.drafter))
    kmax = int(df.k.max()) if len(df) else 1
    color = alt.Color("drafter:N", scale=series_scale(drafters, DRAFTER_COLORS), title="drafter",
                      legend=alt.Legend(orient="right"))
    base = alt.Chart(df).encode(
        x=alt.X("k:Q", title="draft position k", scale=alt.Scale(domain=[1, kmax]),
                axis=alt.Axis(values=list(range(1, kmax + 1)), format="d")),
        y=alt.Y("value:Q", title="probability", scale=alt.Scale(domain=[0, 1])),
        color=color,
        tooltip=[alt.Tooltip("drafter:N"), alt.Tooltip("metric:N"), alt.Tooltip("k:Q"),
                 alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("n:Q", title="rounds"),
                 alt.Tooltip("lo:Q", format=".3f", title="95 % low"), alt.Tooltip("hi:Q", format=".3f",
                                                                                 title="95 % high")],
    )
    parts = [base.mark_line(strokeWidth=2)]
    if {"lo", "hi"} <= set(df.columns) and df.lo.notna().any():   # 95 % interval of each value: a vertical bar
        parts.insert(0, base.mark_rule(strokeWidth=1.5, opacity=0.55).encode(y="lo:Q", y2="hi:Q"))
    layered = alt.layer(*parts,
                        base.mark_point(filled=True, size=45).encode(
                            # same field, title and domain as the colour: one merged legend
                            shape=alt.Shape("drafter:N", title="drafter", scale=alt.Scale(domain=drafters))))
    return layered.properties(width=width, height=height).facet(
        column=alt.Column("metric:N", title=None, sort=list(METRIC_NAMES.values()),
                          header=alt.Header(labelFontSize=12, labelFontWeight="bold")),
    ).properties(title=alt.Title("Acceptance by draft position (paper Fig. 2)",
                                 subtitle=["left: given all earlier drafts survived; right: the whole prefix survives",
                                           "bars: 95 % intervals (the hover shows the rounds behind each point)"]))


def tau_frame(traces_by_drafter: Mapping[str, Trace | Sequence[Trace]], include_all: bool = True):
    """Tidy DataFrame (drafter, domain, tau, rounds, requests) from metrics.per_domain (+ domain 'all')."""
    import pandas as pd

    rows = []
    for name, ts in _as_lists(traces_by_drafter).items():
        for dom, d in metrics.per_domain(ts).items():
            rows.append(dict(drafter=name, domain=dom, tau=d["tau"], rounds=d["rounds"], requests=d["requests"]))
        if include_all:
            rows.append(dict(drafter=name, domain="all", tau=metrics.tau(ts),
                             rounds=sum(len(t.rounds) for t in ts), requests=len(ts)))
    return pd.DataFrame(rows, columns=["drafter", "domain", "tau", "rounds", "requests"])


def tau_table_chart(df, width: int = 420, height: int = 240):
    """Grouped bars: τ (mean committed tokens per round) per domain, one bar per drafter (Table 1 style).

    ``df``: columns drafter, domain, tau (``tau_frame``), or a dict drafter → traces.
    """
    import altair as alt

    if not hasattr(df, "columns"):
        df = tau_frame(df)
    drafters = list(dict.fromkeys(df.drafter))
    domains = list(dict.fromkeys(df.domain))
    if "all" in domains:
        domains = [d for d in domains if d != "all"] + ["all"]
    base = alt.Chart(df).encode(
        x=alt.X("domain:N", sort=domains, title="domain", axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("drafter:N", sort=drafters),
        y=alt.Y("tau:Q", title="τ (committed tokens / round)", scale=alt.Scale(zero=True)),
        color=alt.Color("drafter:N", scale=series_scale(drafters, DRAFTER_COLORS), title="drafter"),
        tooltip=[alt.Tooltip("drafter:N"), alt.Tooltip("domain:N"), alt.Tooltip("tau:Q", format=".2f", title="τ")]
        + ([alt.Tooltip("rounds:Q")] if "rounds" in df.columns else []),
    )
    bars = base.mark_bar(stroke="#333333", strokeWidth=0.5)
    labels = base.mark_text(dy=-6, fontSize=10).encode(text=alt.Text("tau:Q", format=".2f"), color=alt.value("#222"))
    return (bars + labels).properties(width=width, height=height, title=alt.Title(
        "Mean accepted length τ per domain", subtitle="τ counts the bonus token; higher = fewer target forwards"))
