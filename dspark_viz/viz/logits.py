"""What the sequential head changes: backbone logits U_k, sequential bias B_k and their sum, for one slot.

Legend: U_k parallel-stage (backbone) logits of slot k through the frozen LM head, B_k bias from the
Markov / RNN head given the previous drafted token, U_k + B_k the logits the draft was sampled from
(before temperature). A DFlash-style drafter has B_k = 0: the middle panel is empty.
"""
from __future__ import annotations

from typing import Any, Mapping

from .style import COMPONENT_COLORS, OKABE_ITO, display_token

COMPONENTS = tuple(COMPONENT_COLORS)  # U_k backbone, B_k sequential bias, U_k + B_k sampled from


def logit_frame(diag: Mapping[str, Any]):
    """Tidy DataFrame (token, rank, component, value, chosen) from a DraftToken.diag dict."""
    import pandas as pd

    toks = list(diag["tokens"])
    U = [float(u) for u in diag["U"]]
    B = [float(b) for b in diag.get("B") or [0.0] * len(U)]
    if not (len(toks) == len(U) == len(B)):
        raise ValueError(f"diag lengths differ: tokens {len(toks)}, U {len(U)}, B {len(B)}")
    ids = list(diag.get("ids") or [None] * len(toks))
    labels = [display_token(str(t), 16) for t in toks]
    seen: dict[str, int] = {}
    for i, lab in enumerate(labels):                    # two ids with the same text stay two bars
        if lab in seen:
            labels[i] = f"{lab} #{ids[i] if ids[i] is not None else i}"
        seen[lab] = i
    chosen = diag.get("chosen")
    rows = []
    for i, (lab, u, b) in enumerate(zip(labels, U, B)):
        is_chosen = chosen is not None and chosen in (toks[i], ids[i])
        for comp, v in zip(COMPONENTS, (u, b, u + b)):
            rows.append(dict(token=lab, rank=i, component=comp, value=v, chosen=bool(is_chosen)))
    return pd.DataFrame(rows, columns=["token", "rank", "component", "value", "chosen"])


def logit_decomposition(diag: Mapping[str, Any], width: int = 170, height: int | None = None):
    """Three panels sharing the token axis (sorted by the final logit U_k + B_k): U_k | B_k | U_k + B_k.

    ``diag``: {"tokens": [...texts or ids], "U": [...], "B": [...], optional "ids", "chosen"}.
    The sampled token (``chosen``, a text or an id) is outlined and marked ← sampled.
    """
    import altair as alt

    df = logit_frame(diag)
    order = (df[df.component == COMPONENTS[2]].sort_values("value", ascending=False).token.tolist())
    n = len(order)
    h = height or max(80, 18 * n)
    panels = []
    for comp in COMPONENTS:
        d = df[df.component == comp]
        base = alt.Chart(d).encode(
            y=alt.Y("token:N", sort=order, title=None if panels else "candidate token",
                    axis=alt.Axis(labelFont="monospace", labels=not panels)),
            x=alt.X("value:Q", title="logit", scale=alt.Scale(zero=True)),
            tooltip=[alt.Tooltip("token:N"), alt.Tooltip("component:N"), alt.Tooltip("value:Q", format=".3f")],
        )
        bars = base.mark_bar(color=COMPONENT_COLORS[comp], opacity=0.9).encode(
            stroke=alt.condition("datum.chosen", alt.value("#000000"), alt.value(None)),
            strokeWidth=alt.condition("datum.chosen", alt.value(2.5), alt.value(0)),
        )
        zero = alt.Chart(d).mark_rule(color="#555555").encode(x=alt.datum(0))
        layer = bars + zero
        if comp == COMPONENTS[2] and d.chosen.any():
            layer += base.transform_filter("datum.chosen").mark_text(
                text="← sampled", align="left", dx=4, fontSize=11, fontWeight="bold", color=OKABE_ITO["black"])
        panels.append(layer.properties(width=width, height=h, title=comp))
    title = alt.Title("Logit decomposition of one draft slot",
                      subtitle="the sequential head adds B_k (from the previous draft token) to the backbone's U_k")
    return alt.hconcat(*panels, spacing=8).properties(title=title)
