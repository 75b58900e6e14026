"""A drafter's training log as a picture: each loss term on its own scale, training batches and validation.

Input: the rows of a run's ``log.jsonl`` (``train.trainer.train``): training rows {"step", "loss", "l1", "ce", "bce",
…} every few steps (one batch each), validation rows {"step", "val": {…}} at checkpoints.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from .style import OKABE_ITO

TERMS = ("loss", "ce", "l1", "bce")
TERM_TITLES = {"loss": "weighted loss", "ce": "cross-entropy", "l1": "‖p_d − p_t‖₁", "bce": "confidence BCE",
               "tau_est": "τ estimate", "acc1": "first-slot accuracy"}


def loss_frame(log: Iterable[Mapping], terms: Sequence[str] = TERMS):
    """Long frame (step, term, value, kind ∈ {"training batch", "validation"}) of a training log."""
    import pandas as pd

    rows = []
    for r in log:
        src, kind = (r["val"], "validation") if "val" in r else (r, "training batch")
        if "val" not in r and "loss" not in r:
            continue
        rows += [dict(step=int(r["step"]), term=TERM_TITLES.get(t, t), value=float(src[t]), kind=kind)
                 for t in terms if t in src]
    return pd.DataFrame(rows, columns=["step", "term", "value", "kind"])


def loss_curve_chart(log: Iterable[Mapping], terms: Sequence[str] = TERMS, subtitle: str | Sequence[str] = "",
                     width: int = 190, height: int = 150):
    """One small panel per loss term (independent y scales: the terms differ in size by orders of magnitude),
    training-batch values as a line with points, validation values as larger rings."""
    import altair as alt

    df = loss_frame(log, terms)
    order = [TERM_TITLES.get(t, t) for t in terms]
    kinds = ["training batch", "validation"]
    base = alt.Chart().encode(
        x=alt.X("step:Q", title="optimiser step"),
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False)),
        color=alt.Color("kind:N", title=None, scale=alt.Scale(domain=kinds,
                                                               range=[OKABE_ITO["blue"], OKABE_ITO["vermillion"]])),
        tooltip=["step:Q", "term:N", "kind:N", alt.Tooltip("value:Q", format=".3f")],
    )
    train = base.transform_filter("datum.kind == 'training batch'")
    val = base.transform_filter("datum.kind == 'validation'")
    layer = alt.layer(train.mark_line(strokeWidth=1.5), train.mark_point(filled=True, size=25),
                      val.mark_point(size=70, strokeWidth=2), data=df).properties(width=width, height=height)
    return layer.facet(facet=alt.Facet("term:N", sort=order, title=None), columns=len(order)).resolve_scale(
        y="independent").properties(title=alt.Title("Loss terms of the short run", subtitle=subtitle or ""))


__all__ = ["loss_frame", "loss_curve_chart", "TERMS", "TERM_TITLES"]
