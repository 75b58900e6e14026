"""Is the confidence head honest? Reliability diagrams before/after STS (paper Fig. 6), and the
accepted-vs-wasted verification trade-off of a static threshold (paper Fig. 5).

Legend: k 1-based position, a_k predicted prefix survival (raw), a'_k after Sequential Temperature
Scaling, m accepted drafts, ℓ verified length, θ survival threshold.
Binning, ECE and STS come from ``dspark_viz.calibration``; the sweep from ``dspark_viz.serving.simulate``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import calibration as cal
from .style import OUTCOME_COLORS, STAGE_COLORS, series_scale

STAGES = tuple(STAGE_COLORS)   # "before STS", "after STS"


def reliability_frame(conf, accepted, ell=None, calib: "cal.STSCalibration | None" = None, n_bins: int = 10):
    """Tidy DataFrame (position, stage, bin, lo, hi, mean_pred, mean_obs, count) over rows with ℓ ≥ k.

    ``stage`` is "before STS" (raw a_k) and, when ``calib`` is given, "after STS" (a'_k = calib.survival).
    Each (position, stage) block is ``calibration.reliability_bins`` of a_k against 1[m ≥ k].
    """
    import pandas as pd

    c = np.asarray(conf, dtype=float)                                    # (N, γ)
    obs, valid = cal._observed(c, accepted, ell)                         # (N, γ) each
    filled = np.nan_to_num(c, nan=0.0)
    stages = [(STAGES[0], cal.STSCalibration([1.0] * c.shape[1]).survival(filled))]   # T = 1: raw a_k
    if calib is not None:
        stages.append((STAGES[1], calib.survival(filled)))
    frames = []
    for k in range(c.shape[1]):
        v = valid[:, k]
        for name, a in stages:
            b = cal.reliability_bins(a[v, k], obs[v, k], n_bins)
            frames.append(b.assign(position=k + 1, stage=name))
    cols = ["position", "stage", "bin", "lo", "hi", "mean_pred", "mean_obs", "count"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def reliability_diagram(before, after=None, positions: Sequence[int] | None = None, report: dict | None = None,
                        size: int = 170, notes: dict[int, str] | None = None):
    """One panel per position k: observed P(m ≥ k) vs predicted a_k, per bin, before and after STS.

    ``before``: DataFrame of ``calibration.reliability_bins`` rows with a ``position`` column (and optionally
    a ``stage`` column holding both stages, as ``reliability_frame`` returns); ``after``: the same for the
    calibrated survival, or None. Point area = bin count, and a histogram of the counts sits under each panel.
    ``report`` (``calibration.calibration_report``)
    adds "ECE before → after" to each panel title; ``notes`` ({k: text}) puts a line under panel k's title
    (e.g. how many rounds survive to k, so a reader knows which panels rest on too few events).
    """
    import altair as alt
    import pandas as pd

    def staged(df, name):
        return df if "stage" in df.columns else df.assign(stage=name)

    df = staged(before, STAGES[0])
    if after is not None:
        df = pd.concat([df, staged(after, STAGES[1])], ignore_index=True)
    df = df[df["count"] > 0]
    all_pos = sorted(int(p) for p in df.position.unique())
    pos = [p for p in (positions if positions is not None else all_pos) if p in all_pos]
    stages = [s for s in list(STAGE_COLORS) + sorted(set(df.stage) - set(STAGE_COLORS)) if s in set(df.stage)]
    color = alt.Color("stage:N", title=None, scale=series_scale(stages, STAGE_COLORS),
                      legend=alt.Legend(orient="bottom"))
    axis_scale = alt.Scale(domain=[0, 1], nice=False)
    cmax = int(df["count"].max()) if len(df) else 1
    diag = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    panels = []
    for i, p in enumerate(pos):
        d = df[df.position == p]
        ref = alt.Chart(diag).mark_line(color="#888888", strokeDash=[4, 4]).encode(
            x=alt.X("x:Q", scale=axis_scale, title="predicted a_k"),
            y=alt.Y("y:Q", scale=axis_scale, title="observed P(m ≥ k)" if i == 0 else None))
        base = alt.Chart(d).encode(
            x=alt.X("mean_pred:Q", scale=axis_scale), y=alt.Y("mean_obs:Q", scale=axis_scale), color=color,
            tooltip=[alt.Tooltip("stage:N"), alt.Tooltip("lo:Q", format=".2f", title="bin from"),
                     alt.Tooltip("hi:Q", format=".2f", title="bin to"),
                     alt.Tooltip("mean_pred:Q", format=".3f", title="mean predicted"),
                     alt.Tooltip("mean_obs:Q", format=".3f", title="observed rate"), alt.Tooltip("count:Q")])
        layer = ref + base.mark_line(strokeWidth=1.5, opacity=0.8) + base.mark_point(filled=True, opacity=0.85).encode(
            size=alt.Size("count:Q", title="rounds in bin", scale=alt.Scale(domain=[0, cmax], range=[10, 300]),
                          legend=alt.Legend(orient="bottom") if i == 0 else None),
            shape=alt.Shape("stage:N", legend=None, scale=alt.Scale(domain=stages,
                                                                     range=["circle", "diamond", "square"][:len(stages)])))
        title = f"k = {p}"
        if report is not None and p - 1 < len(report.get("ece_before", [])):
            eb, ea = report["ece_before"][p - 1], report["ece_after"][p - 1]
            title += f" · ECE {eb:.3f}" + (f" → {ea:.3f}" if after is not None or len(stages) > 1 else "")
        # the rounds behind each point: a count histogram under the panel (paper Fig. 6)
        hist = alt.Chart(d).mark_bar(opacity=0.55, stroke="#333333", strokeWidth=0.3).encode(
            x=alt.X("lo:Q", scale=axis_scale, title=None), x2="hi:Q",
            y=alt.Y("count:Q", stack=None, title="rounds per bin" if i == 0 else None,
                    scale=alt.Scale(zero=True), axis=alt.Axis(tickCount=3, format="d")), y2=alt.datum(0),
            color=color,
            tooltip=[alt.Tooltip("stage:N"), alt.Tooltip("lo:Q", format=".2f", title="bin from"),
                     alt.Tooltip("hi:Q", format=".2f", title="bin to"), alt.Tooltip("count:Q")])
        note = (notes or {}).get(p)
        panels.append(alt.vconcat(layer.properties(width=size, height=size),
                                  hist.properties(width=size, height=max(40, size // 3)), spacing=4)
                      .properties(title=alt.Title(title, subtitle=note) if note else title))
    if not panels:
        return alt.Chart(pd.DataFrame({"msg": ["no verified rounds to bin"]})).mark_text().encode(text="msg:N")
    return alt.hconcat(*panels, spacing=12).properties(title=alt.Title(
        "Reliability of prefix survival per position",
        subtitle="on the dashed diagonal the confidence is honest; STS fits one temperature per position "
                 "(paper Fig. 6)"))


def threshold_sweep_chart(df, per_round: bool = True, width: int = 220, height: int = 180):
    """Stacked areas per domain: verified tokens that were accepted vs rejected as the survival threshold θ
    rises, with the acceptance rate of the verified tokens as a dashed line on its own axis (paper Fig. 5).
    ``df`` from ``serving.simulate.threshold_sweep``. One panel per domain, side by side (a layer with two
    y axes cannot be faceted)."""
    import altair as alt

    acc, rej = ("accepted_per_round", "rejected_per_round") if per_round else ("accepted", "rejected")
    domains = [d for d in dict.fromkeys(df.domain) if d != "all"] + (["all"] if "all" in set(df.domain) else [])
    outcomes = ["accepted", "wasted (not kept)"]
    ymax = float((df[acc] + df[rej]).max()) if len(df) else 1.0             # one token scale for every panel

    def panel(dom: str, first: bool, last: bool):
        d = df[df.domain == dom]
        areas = alt.Chart(d).transform_fold([acc, rej], as_=["series", "tokens"]).transform_calculate(
            outcome=f"datum.series == '{acc}' ? 'accepted' : 'wasted (not kept)'",
            order=f"datum.series == '{acc}' ? 0 : 1",
        ).mark_area(opacity=0.8, line={"color": "#333333", "strokeWidth": 0.8}).encode(
            x=alt.X("theta:Q", title="survival threshold θ (verify while a_k ≥ θ)"),
            y=alt.Y("tokens:Q", stack="zero", scale=alt.Scale(domain=[0, ymax]),
                    title=("verified tokens per round" if per_round else "verified tokens") if first else None),
            color=alt.Color("outcome:N", title="verified tokens",
                            scale=alt.Scale(domain=outcomes,
                                            range=[OUTCOME_COLORS["accepted"], OUTCOME_COLORS["rejected"]])),
            order=alt.Order("order:Q"),
            tooltip=[alt.Tooltip("domain:N"), alt.Tooltip("theta:Q", format=".2f", title="θ"),
                     alt.Tooltip("outcome:N"), alt.Tooltip("tokens:Q", format=".2f"),
                     alt.Tooltip("accept_rate:Q", format=".2f", title="accept rate")],
        )
        rate = alt.Chart(d).mark_line(color="#222222", strokeDash=[5, 3], strokeWidth=1.8,
                                      point=alt.OverlayMarkDef(color="#222222", size=18)).encode(
            x="theta:Q",
            y=alt.Y("accept_rate:Q", title="accepted share (dashed)" if last else None,
                    scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(orient="right", format=".0%")),
            tooltip=[alt.Tooltip("domain:N"), alt.Tooltip("theta:Q", format=".2f", title="θ"),
                     alt.Tooltip("accept_rate:Q", format=".1%", title="accept rate"),
                     alt.Tooltip("n_rounds:Q", title="rounds")],
        )
        n = int(d.n_rounds.iloc[0]) if len(d) else 0
        return alt.layer(areas, rate).resolve_scale(y="independent").properties(
            width=width, height=height, title=alt.Title(f"{dom} ({n:,} rounds)", fontSize=12))

    panels = [panel(dom, i == 0, i == len(domains) - 1) for i, dom in enumerate(domains)]
    return alt.hconcat(*panels, spacing=12).properties(
        title=alt.Title("Raising θ trades accepted tokens for less wasted verification",
                        subtitle=["lower band: verified and accepted; upper band: verified but not kept (wasted)",
                                  "dashed: share of verified tokens accepted (right axis) — paper Fig. 5"]))
