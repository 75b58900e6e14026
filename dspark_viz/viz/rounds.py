"""One round under the microscope: per-position confidence, prefix survival, ℓ and m.

Legend: γ block size, k 1-based position, c_k conditional confidence, a_k = Π_{i≤k} c_i prefix survival,
ℓ verification length chosen by the policy, m accepted drafts.
"""
from __future__ import annotations

from ..scheduler import survival as prefix_survival
from ..trace import Trace
from .style import CHART_LABELS, OKABE_ITO, STATUS_ORDER, display_token, status_encodings


def round_frame(trace: Trace, round_index: int):
    """One row per drafted slot of the round: k, token text, status, c_k (raw / calibrated), a_k."""
    import pandas as pd

    r = _get_round(trace, round_index)
    ds = sorted(r.drafts, key=lambda d: d.k)
    raw = [d.confidence for d in ds]
    a_raw = (prefix_survival(raw).tolist() if ds and all(c is not None for c in raw) else [None] * len(ds))
    rows = [dict(k=d.k, text=display_token(d.text, 10), status=d.status, label=CHART_LABELS[d.status],
                 confidence=d.confidence, confidence_cal=d.confidence_cal,
                 c_used=d.confidence_cal if d.confidence_cal is not None else d.confidence,
                 survival=d.survival, survival_raw=a, p_draft=d.p_draft, p_target=d.p_target)
            for d, a in zip(ds, a_raw)]
    return pd.DataFrame(rows, columns=["k", "text", "status", "label", "confidence", "confidence_cal", "c_used",
                                       "survival", "survival_raw", "p_draft", "p_target"])


def _get_round(trace: Trace, i: int):
    if not trace.rounds:
        raise ValueError("the trace has no rounds yet")
    try:
        return trace.rounds[i]
    except IndexError:
        raise IndexError(f"round {i} out of range (the trace has {len(trace.rounds)} rounds)") from None


def round_view(trace: Trace, round_index: int = -1, width: int = 420, height: int = 240):
    """Bars: c_k per position (calibrated if STS was applied, raw shown as a tick), coloured and dashed by
    status; line: prefix survival a_k; shaded band: the m accepted drafts; red rule: the chosen ℓ."""
    import altair as alt
    import pandas as pd

    r = _get_round(trace, round_index)
    df = round_frame(trace, round_index)
    title = alt.Title(f"Round {r.index}: drafted {len(df)}, verified ℓ = {r.ell}, accepted m = {r.accepted}",
                      subtitle=_subtitle(df, r))
    if df.empty:
        return alt.Chart(pd.DataFrame({"msg": ["plain decoding: nothing was drafted in this round"]})) \
            .mark_text(fontSize=13).encode(text="msg:N").properties(width=width, height=60, title=title)
    has_conf = df.c_used.notna().all()
    calibrated = df.confidence_cal.notna().all()
    gamma = int(df.k.max())
    x_scale = alt.Scale(domain=[0.5, gamma + 0.5], nice=False, zero=False)
    y_scale = alt.Scale(domain=[0, 1.18], nice=False)
    x_axis = alt.Axis(title="draft position k", values=list(range(1, gamma + 1)), format="d", grid=False)
    y_axis = alt.Axis(values=[0, 0.25, 0.5, 0.75, 1.0], format=".2~f", title="probability")   # 0.25, not 0.3
    statuses = [s for s in STATUS_ORDER if s in set(df.status)]
    value = "c_used" if has_conf else "p_target"
    bar_title = ("c_k calibrated" if calibrated else "c_k confidence") if has_conf else "p_target(x_k)"

    layers = []
    if r.accepted > 0:                                   # the accepted prefix
        band = pd.DataFrame({"x0": [0.5], "x1": [r.accepted + 0.5], "label": [f"m = {r.accepted} accepted"]})
        layers.append(alt.Chart(band).mark_rect(color=OKABE_ITO["green"], opacity=0.08).encode(
            x=alt.X("x0:Q", scale=x_scale, axis=x_axis), x2="x1:Q"))
    layers.append(alt.Chart(df).transform_calculate(x0="datum.k - 0.34", x1="datum.k + 0.34").mark_bar(
        stroke="#222222").encode(
        x=alt.X("x0:Q", scale=x_scale, axis=x_axis), x2="x1:Q",
        y=alt.Y(f"{value}:Q", scale=y_scale, axis=y_axis), y2=alt.datum(0),
        **status_encodings("label", f"bars: {bar_title}", statuses),
        tooltip=[alt.Tooltip("k:Q"), alt.Tooltip("text:N", title="token"), alt.Tooltip("status:N"),
                 alt.Tooltip("confidence:Q", format=".3f", title="c_k raw"),
                 alt.Tooltip("confidence_cal:Q", format=".3f", title="c_k calibrated"),
                 alt.Tooltip("survival:Q", format=".3f", title="a_k"),
                 alt.Tooltip("p_draft:Q", format=".3f"), alt.Tooltip("p_target:Q", format=".3f")]))
    if has_conf:
        if calibrated:                                   # raw c_k as a tick on the calibrated bar
            layers.append(alt.Chart(df).mark_tick(color="#222222", thickness=2.5, size=30, orient="horizontal").encode(
                x=alt.X("k:Q", scale=x_scale), y=alt.Y("confidence:Q", scale=y_scale),
                tooltip=[alt.Tooltip("confidence:Q", format=".3f", title="c_k raw (before STS)")]))
        lines = [("survival", "a_k prefix survival" + (" (calibrated)" if calibrated else ""))]
        if calibrated:
            lines.append(("survival_raw", "a_k raw (before STS)"))
        long = pd.concat([df[["k", col]].rename(columns={col: "value"}).assign(series=name)
                          for col, name in lines], ignore_index=True)
        names = [n for _, n in lines]
        enc = dict(x=alt.X("k:Q", scale=x_scale), y=alt.Y("value:Q", scale=y_scale),
                   strokeDash=alt.StrokeDash("series:N", title="line",
                                             scale=alt.Scale(domain=names, range=[[1, 0], [5, 3]][:len(names)])),
                   tooltip=[alt.Tooltip("series:N"), alt.Tooltip("k:Q"), alt.Tooltip("value:Q", format=".3f")])
        line = alt.Chart(long).encode(**enc)
        layers.append(line.mark_line(color="#222222", strokeWidth=2, point=alt.OverlayMarkDef(
            filled=True, size=40, color="#222222")))
    rule = pd.DataFrame({"x": [r.ell + 0.5], "label": [f"ℓ = {r.ell}: verified up to here"]})
    rbase = alt.Chart(rule).encode(x=alt.X("x:Q", scale=x_scale))
    left = r.ell > gamma / 2                             # label on the roomier side of the rule
    layers += [rbase.mark_rule(color="#222222", strokeWidth=2.5, strokeDash=[6, 2]),
               rbase.mark_text(align="right" if left else "left", dx=-5 if left else 5, dy=-4, fontSize=11,
                               color="#222222",
                               fontWeight="bold").encode(y=alt.datum(1.02), text="label:N")]
    if r.accepted > 0:
        layers.append(alt.Chart(pd.DataFrame({"x": [0.55], "label": [f"m = {r.accepted} accepted"]}))
                      .mark_text(align="left", fontSize=11, color="#00694d", fontWeight="bold")
                      .encode(x=alt.X("x:Q", scale=x_scale), y=alt.datum(1.09), text="label:N"))
    layers.append(alt.Chart(df).mark_text(fontSize=12, font="monospace", dy=-6).encode(
        x=alt.X("k:Q", scale=x_scale), y=alt.datum(1.16), text="text:N"))
    return alt.layer(*layers).resolve_scale(color="independent", strokeDash="independent",
                                            strokeWidth="independent", opacity="independent").properties(
        width=width, height=height, title=title)


def _subtitle(df, r) -> str:
    if df.empty:
        return ""
    if df.c_used.isna().any():
        return f"no confidence head ({r.source} drafts): bars show p_target of each verified draft"
    tail = " (STS-calibrated)" if df.confidence_cal.notna().all() else ""
    ticks = "; ticks: raw c_k before STS" if tail else ""
    return f"bars: conditional confidence c_k{tail}{ticks}; line: prefix survival a_k = Π c_i"
