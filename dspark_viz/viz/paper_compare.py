"""The paper's numbers beside ours: Table 1 (τ per domain) and Fig. 2 (conditional acceptance per position).

The paper's values come from ``dspark_viz.paper`` (text values, and Fig. 2's curves read off the figure, drawn
dashed and marked ≈); ours from recorded traces through ``dspark_viz.metrics``. This module only arranges them.

Legend: τ accepted length per round (bonus included), k 1-based draft position, n rounds behind a rate.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from .. import metrics, paper, registry
from ..trace import Trace
from .style import DRAFTER_COLORS, series_scale

OURS_LABEL = "ours"
PAPER_TEXT = "paper, text value"
PAPER_READ = "paper, ≈ read off Fig. 2"


def _as_lists(traces_by_drafter: Mapping[str, Trace | Sequence[Trace]]) -> dict[str, list[Trace]]:
    return {str(k): [v] if isinstance(v, Trace) else list(v) for k, v in traces_by_drafter.items()}


def _by_domain(ts: list[Trace]) -> dict[str, list[Trace]]:
    out: dict[str, list[Trace]] = {}
    for t in ts:
        out.setdefault(t.meta.get("domain") or "mixed", []).append(t)
    return out


def _colour_key(paper_drafter: str) -> str:
    """The colour a paper drafter is drawn in: that of this package's drafter in the same role."""
    return registry.PAPER_ROLE[paper_drafter]


def _drafter_order(frame) -> list[str]:
    """The frame's drafters in the table's order (dspark_viz.registry), any others after them, sorted."""
    order = registry.names(lambda e: e.stem is not None)       # the shipped neural drafters
    return [d for d in order if d in set(frame.drafter)] + sorted(set(frame.drafter) - set(order))


# -- Table 1 -------------------------------------------------------------------------------------------------
def table1_compare_frame(traces_by_drafter: Mapping[str, Trace | Sequence[Trace]], target: str = "Qwen3-4B"):
    """Tidy DataFrame (source, drafter, name, domain, tau, rounds): the paper's Table 1 domain means for
    ``target`` (mean of each domain's three benchmarks, and of all nine) and ours per domain (and 'all').
    ``drafter`` is the colour key (this package's name for the role), ``name`` the name as printed."""
    import pandas as pd

    rows = []
    for d, by in paper.domain_means(target).items():
        for dom, tau in by.items():
            rows.append(dict(source=f"paper: {target}", drafter=_colour_key(d), name=paper.LABELS[d], domain=dom,
                             tau=tau, rounds=None))
    for name, ts in _as_lists(traces_by_drafter).items():
        for dom, v in metrics.per_domain(ts).items():
            rows.append(dict(source=OURS_LABEL, drafter=name, name=name, domain=dom, tau=v["tau"],
                             rounds=v["rounds"]))
        rows.append(dict(source=OURS_LABEL, drafter=name, name=name, domain="all", tau=metrics.tau(ts),
                         rounds=sum(len(t.rounds) for t in ts)))
    return pd.DataFrame(rows, columns=["source", "drafter", "name", "domain", "tau", "rounds"])


def _tau_panel(df, title: str, subtitle: str, drafters: list[str], width: int, height: int):
    import altair as alt

    domains = [d for d in ("math", "code", "chat", "all") if d in set(df.domain)]
    top = float(df.tau.max()) if len(df) else 2.0
    y_scale = alt.Scale(domain=[1.0, 1.0 + (top - 1.0) * 1.12], nice=False, zero=False)
    return alt.Chart(df).mark_bar(stroke="#333333", strokeWidth=0.5).encode(
        x=alt.X("domain:N", sort=domains, title=None, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("drafter:N", sort=[d for d in drafters if d in set(df.drafter)]),
        y=alt.Y("tau:Q", scale=y_scale, title="τ (tokens committed per round)"), y2=alt.datum(1.0),
        color=alt.Color("drafter:N", scale=series_scale(drafters, DRAFTER_COLORS),
                        title="drafter (colour = role)"),
        tooltip=[alt.Tooltip("source:N"), alt.Tooltip("name:N", title="drafter"), alt.Tooltip("domain:N"),
                 alt.Tooltip("tau:Q", format=".2f", title="τ"), alt.Tooltip("rounds:Q")],
    ).properties(width=width, height=height, title=alt.Title(title, subtitle=subtitle, fontSize=12))


def table1_compare_chart(frame, width: int = 250, height: int = 220):
    """Two panels of bars rising from τ = 1 (plain decoding commits one token per round): the paper's Table 1
    (domain means) and ours, each on its own axis. No value labels on the bars (the tooltip and the table beside
    the chart carry the numbers)."""
    import altair as alt

    drafters = _drafter_order(frame)
    src_paper = [s for s in dict.fromkeys(frame.source) if s != OURS_LABEL]
    panels = []
    for s in src_paper:
        roles = registry.PAPER_ROLE
        names = ", ".join(f"{paper.LABELS[k]} as {roles[k]}" for k in paper.LABELS if k in roles)
        panels.append(_tau_panel(frame[frame.source == s], s.replace("paper: ", "paper's Table 1: "),
                                 f"mean of each domain's 3 benchmarks; colours: {names}", drafters, width, height))
    ours = frame[frame.source == OURS_LABEL]
    if len(ours):
        panels.append(_tau_panel(ours, "ours: SmolLM2-135M target", "recorded runs, 30 prompts per domain",
                                 drafters, width, height))
    return alt.hconcat(*panels).resolve_scale(y="independent").properties(title=alt.Title(
        "τ per domain at T = 1, fixed block of 7: the paper beside ours",
        subtitle="bars start at τ = 1, plain decoding's one token per round; each panel has its own axis"))


# -- Fig. 2 --------------------------------------------------------------------------------------------------
FIG2_COLUMNS = ["source", "drafter", "name", "domain", "k", "k_drawn", "value", "n", "lo", "hi", "where"]


def fig2_compare_frame(traces_by_drafter: Mapping[str, Trace | Sequence[Trace]], gamma: int | None = None,
                       min_n: int = 30):
    """Tidy DataFrame of conditional acceptance per (domain, k): ours with the rounds at risk n and the 95 %
    Wilson interval (positions with n < ``min_n`` are left out: too few rounds to draw as a value), the paper's
    text values (k None where the text names no position; ``k_drawn`` places them, ``paper.placed_k``) and its
    curves read off Fig. 2."""
    import pandas as pd

    rows = []
    for name, ts in _as_lists(traces_by_drafter).items():
        for dom, group in _by_domain(ts).items():
            c = metrics.acceptance_counts(group, gamma)
            for k, (x, n) in enumerate(zip(c["accepted"], c["at_risk"]), start=1):
                if n < max(min_n, 1):
                    continue
                lo, hi = metrics.wilson_interval(x, n)
                rows.append(dict(source=OURS_LABEL, drafter=name, name=name, domain=dom, k=k, k_drawn=k, value=x / n,
                                 n=n, lo=lo, hi=hi, where=None))
    for r in paper.fig2_read_rows():
        rows.append(dict(source=PAPER_READ, drafter=_colour_key(r["drafter"]), name=r["label"], domain=r["domain"],
                         k=r["k"], k_drawn=r["k"], value=r["value"], n=None, lo=None, hi=None,
                         where="read off the figure"))
    for r in paper.fig2_text_rows():
        rows.append(dict(source=PAPER_TEXT, drafter=_colour_key(r["drafter"]), name=r["label"], domain=r["domain"],
                         k=r["k"], k_drawn=r["k_placed"], value=r["value"], n=None, lo=None, hi=None,
                         where=r["where"]))
    return pd.DataFrame(rows, columns=FIG2_COLUMNS)


def fig2_compare_chart(frame, width: int = 210, height: int = 210):
    """Per domain: our conditional acceptance (solid, 95 % bars), the paper's curves read off its Fig. 2 (dashed,
    ≈) and the paper's text values at the position they name (diamonds; a value the text gives without a position is
    drawn hollow where the curve read off the figure comes closest). One y axis from 0 to 1 so both scales show."""
    import altair as alt

    drafters = _drafter_order(frame)
    df = frame.copy()
    kmax = int(df.k_drawn.max()) if len(df) else 7
    df["position"] = df.k.map(lambda k: "stated" if k == k and k is not None else "not stated")
    domains = [d for d in ("math", "code", "chat") if d in set(df.domain)]
    color = alt.Color("drafter:N", scale=series_scale(drafters, DRAFTER_COLORS), title="drafter (colour = role)")
    x = alt.X("k_drawn:Q", title="draft position k", scale=alt.Scale(domain=[0.7, kmax + 0.3], nice=False),
              axis=alt.Axis(values=list(range(1, kmax + 1)), format="d"))
    y = alt.Y("value:Q", title="P(x_k ok | x_<k ok)", scale=alt.Scale(domain=[0, 1]))
    tip = [alt.Tooltip("source:N"), alt.Tooltip("name:N", title="drafter"), alt.Tooltip("domain:N"),
           alt.Tooltip("k:Q"), alt.Tooltip("value:Q", format=".3f"), alt.Tooltip("n:Q", title="rounds at risk"),
           alt.Tooltip("where:N")]
    base = alt.Chart(df).encode(x=x, y=y, color=color, tooltip=tip)
    read = base.transform_filter(alt.datum.source == PAPER_READ).mark_line(strokeDash=[5, 3], strokeWidth=1.5,
                                                                           opacity=0.8)
    ours = base.transform_filter(alt.datum.source == OURS_LABEL)
    text = base.transform_filter(alt.datum.source == PAPER_TEXT)
    stated = text.transform_filter(alt.datum.position == "stated").mark_point(shape="diamond", size=110,
                                                                             filled=True, opacity=0.9)
    unstated = text.transform_filter(alt.datum.position != "stated").mark_point(shape="diamond", size=110,
                                                                               filled=False, strokeWidth=2)
    layers = [read,
              ours.mark_rule(strokeWidth=1.5, opacity=0.55).encode(y="lo:Q", y2="hi:Q"),
              ours.mark_line(strokeWidth=2.2, point=alt.OverlayMarkDef(filled=True, size=40)),
              stated, unstated]
    return alt.layer(*layers).properties(width=width, height=height).facet(
        column=alt.Column("domain:N", sort=domains, title=None,
                          header=alt.Header(labelFontSize=12, labelFontWeight="bold")),
    ).properties(title=alt.Title(
        "Conditional acceptance by position at T = 1: the paper's Fig. 2 (Qwen3-4B) beside ours",
        subtitle=["solid: ours with 95 % bars (positions with too few rounds at risk left out); "
                  "dashed: the paper's curves, ≈ read off Fig. 2",
                  "diamonds: values the paper's text states (hollow: no position stated; drawn where the dashed "
                  "curve comes closest)"]))


__all__ = ["table1_compare_frame", "table1_compare_chart", "fig2_compare_frame", "fig2_compare_chart",
           "OURS_LABEL", "PAPER_TEXT", "PAPER_READ"]
