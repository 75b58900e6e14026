"""The generated text, round by round: which drafted tokens survived, which the target replaced.

Legend: γ block size, ℓ verification length, m accepted drafts, k 1-based position.

Within a round the strip shows: accepted drafts, then the discarded tail of the draft (the rejected
token, the verified-but-not-reached slots, the pruned slots), then the target's bonus token. Reading
only the solid boxes (accepted + bonus) gives the committed text. A thin bar separates rounds.
"""
from __future__ import annotations

import html

from ..trace import Trace
from .style import CHART_LABELS, STATUS_COLORS, STATUS_HELP, STATUS_LABELS, STATUS_ORDER, display_token, fmt
from .style import status_encodings

# inline CSS per status: colour AND shape (border style, strike-through, underline, weight)
_BASE = "padding:0 1px;border-radius:3px;"     # font, white-space and line-height come from the container
_BODY = ("white-space:pre-wrap;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:14px;"
         "line-height:1.9;word-break:break-word;border:1px solid #dddddd;border-radius:4px;padding:6px 8px;"
         "background:#ffffff;color:#222222")
_CSS = {
    "prefill": f"border:1px solid {STATUS_COLORS['prefill']};color:#222;background:#eeeeee;",
    "accepted": f"border:1px solid {STATUS_COLORS['accepted']};color:#00402f;background:#d4eee6;",
    "rejected": (f"border:2px solid {STATUS_COLORS['rejected']};color:{STATUS_COLORS['rejected']};"
                 "background:#fbe3d6;text-decoration:line-through;text-decoration-thickness:2px;"),
    "not_reached": ("border:1px dotted #777777;color:#666666;background:#f4f4f4;"
                    "text-decoration:line-through;font-size:0.85em;"),
    "pruned": (f"border:1.5px dashed {STATUS_COLORS['pruned']};color:#8a3f6c;background:transparent;"
               "font-style:italic;font-size:0.85em;opacity:0.85;"),
    "bonus": (f"border:3px double {STATUS_COLORS['bonus']};color:#003a5c;background:#d6e8f5;"
              "font-weight:bold;text-decoration:underline;"),
}
_SEP = ("display:inline-block;width:1px;height:1.4em;background:#b0b0b0;margin:0 4px;"
        "vertical-align:middle;")


def _text_html(text: str) -> str:
    """Escape model text; newline → ↵ + a real line break; empty → ∅."""
    if text == "" or text is None:
        return "∅"
    parts = str(text).replace("\r\n", "\n").split("\n")
    return "↵<br>".join(html.escape(p, quote=True) for p in parts) if len(parts) > 1 else html.escape(text)


def _span(status: str, text: str, tip: str) -> str:
    return (f'<span class="dsv-tok dsv-{status}" style="{_BASE}{_CSS[status]}" '
            f'title="{html.escape(tip, quote=True)}">{_text_html(text)}</span>')


def _draft_tip(r, d) -> str:
    lines = [f"round {r.index} · k = {d.k} · {STATUS_LABELS[d.status]}",
             f"token {d.token!r}: {display_token(d.text, 40)}",
             f"p_draft = {fmt(d.p_draft)}", f"p_target = {fmt(d.p_target)}",
             f"confidence c_k = {fmt(d.confidence)}"]
    if d.confidence_cal is not None:
        lines.append(f"calibrated c_k = {fmt(d.confidence_cal)}")
    lines.append(f"survival a_k = {fmt(d.survival)}")
    return "\n".join(lines)


def legend_html(statuses=STATUS_ORDER) -> str:
    chips = [_span(s, STATUS_LABELS[s].split(" ", 1)[0] + " " + s.replace("_", " "), STATUS_HELP[s])
             + f'<span style="color:#555;font-size:0.8em;margin:0 10px 0 3px">{html.escape(STATUS_HELP[s])}</span>'
             for s in statuses]
    sep = f'<span style="{_SEP}" title="round boundary"></span>'
    chips.append(sep + '<span style="color:#555;font-size:0.8em;margin-left:3px">round boundary</span>')
    return '<div class="dsv-legend" style="margin-bottom:6px;line-height:2.2">' + "".join(chips) + "</div>"


def token_strip_html(trace: Trace, show_pruned: bool = True, legend: bool = True,
                     max_rounds: int | None = None) -> str:
    """Self-contained HTML (inline CSS only) of the trace's text, round by round.

    Hover a token for p_draft, p_target, confidence and survival; hover a round separator for ℓ and m.
    ``max_rounds`` keeps only the last rounds (the strip of a long answer stays small).
    """
    rounds = trace.rounds if max_rounds is None else trace.rounds[-max_rounds:]
    out = []
    if len(rounds) == len(trace.rounds):
        if trace.first_token is not None and trace.first_token >= 0:
            out.append(_span("prefill", trace.first_text, f"prefill token {trace.first_token!r}"))
    else:
        out.append(f'<span style="color:#777">… {len(trace.rounds) - len(rounds)} earlier rounds </span>')
    for r in rounds:
        tip = f"round {r.index}: drafted {len(r.drafts)}, verified ℓ = {r.ell}, accepted m = {r.accepted}"
        tip += f", committed {r.n_committed}" + (" · stop" if r.stopped else "")
        out.append(f'<span class="dsv-sep" style="{_SEP}" title="{html.escape(tip, quote=True)}"></span>')
        drafts = sorted(r.drafts, key=lambda d: d.k)
        for d in drafts:
            if d.status == "accepted":
                out.append(_span("accepted", d.text, _draft_tip(r, d)))
        for d in drafts:
            if d.status in ("rejected", "not_reached") or (d.status == "pruned" and show_pruned):
                out.append(_span(d.status, d.text, _draft_tip(r, d)))
        if r.bonus is not None:
            src = {"residual": "drawn from the residual max(0, p_target − p_draft) after a rejection",
                   "target": "drawn from p_target after full acceptance"}.get(r.bonus_source, r.bonus_source)
            out.append(_span("bonus", r.bonus_text, f"round {r.index} · bonus token {r.bonus!r}\n{src}"))
    head = legend_html([s for s in STATUS_ORDER if show_pruned or s != "pruned"]) if legend else ""
    body = f'<div class="dsv-body" style="{_BODY}">' + "".join(out) + "</div>"
    return f'<div class="dsv-strip" style="font-family:system-ui,sans-serif;color:#222">{head}{body}</div>'


def strip_frame(trace: Trace, show_pruned: bool = True, max_rounds: int | None = 40):
    """Long frame for the chart: one row per drafted slot plus one per bonus token (column 'bonus')."""
    import pandas as pd

    rows = []
    rounds = trace.rounds if max_rounds is None else trace.rounds[:max_rounds]
    for r in rounds:
        for d in r.drafts:
            if d.status == "pruned" and not show_pruned:
                continue
            rows.append(dict(round=r.index, slot=str(d.k), k=d.k, status=d.status,
                             label=CHART_LABELS[d.status], text=display_token(d.text, 8),
                             token=d.token, p_draft=d.p_draft, p_target=d.p_target, confidence=d.confidence,
                             confidence_cal=d.confidence_cal, survival=d.survival, ell=r.ell, m=r.accepted))
        if r.bonus is not None:
            rows.append(dict(round=r.index, slot="bonus", k=None, status="bonus", label=CHART_LABELS["bonus"],
                             text=display_token(r.bonus_text, 8), token=r.bonus, p_draft=None, p_target=None,
                             confidence=None, confidence_cal=None, survival=None, ell=r.ell, m=r.accepted))
    return pd.DataFrame(rows, columns=["round", "slot", "k", "status", "label", "text", "token", "p_draft",
                                       "p_target", "confidence", "confidence_cal", "survival", "ell", "m"])


def token_strip_chart(trace: Trace, show_pruned: bool = True, max_rounds: int | None = 40):
    """Rounds as rows, draft positions 1..γ (+ a 'bonus' column) as columns, colour + dash = status."""
    import altair as alt


    df = strip_frame(trace, show_pruned, max_rounds)
    gamma = max((len(r.drafts) for r in trace.rounds), default=0)
    slots = [str(k) for k in range(1, gamma + 1)] + ["bonus"]
    statuses = [s for s in STATUS_ORDER if s in set(df.status)]
    n_rounds = max(1, df["round"].nunique())
    base = alt.Chart(df).encode(
        x=alt.X("slot:O", sort=slots, scale=alt.Scale(domain=slots, paddingInner=0.12),
                axis=alt.Axis(title="draft position k (then the target's bonus token)", labelAngle=0,
                              orient="top")),
        y=alt.Y("round:O", axis=alt.Axis(title="round"), scale=alt.Scale(paddingInner=0.15)),
    )
    cells = base.mark_bar(cornerRadius=3, stroke="#222222").encode(          # bar: rect drops strokeDash
        **status_encodings("label", "status", statuses, alt.Legend(orient="bottom", columns=3, symbolSize=200)),
        tooltip=[alt.Tooltip("round:O"), alt.Tooltip("slot:N", title="k"), alt.Tooltip("text:N", title="token"),
                 alt.Tooltip("status:N"), alt.Tooltip("p_draft:Q", format=".3f"),
                 alt.Tooltip("p_target:Q", format=".3f"), alt.Tooltip("confidence:Q", format=".3f"),
                 alt.Tooltip("survival:Q", format=".3f"), alt.Tooltip("ell:Q", title="ℓ"),
                 alt.Tooltip("m:Q", title="m accepted")],
    )
    text = base.mark_text(fontSize=11, font="monospace").encode(
        text="text:N",
        color=alt.condition("datum.status == 'not_reached' || datum.status == 'pruned'",
                            alt.value("#222222"), alt.value("#ffffff")),
    )
    return (cells + text).properties(
        width=min(60 * len(slots), 560), height=min(18 * n_rounds + 10, 720),
        title=alt.Title("Speculative decoding, round by round",
                        subtitle="each row is one draft → verify round; read accepted + bonus for the text"),
    )
