"""Who keeps a verification budget as the engine fills up: ℓ per kind of request against the load R.

Legend: R concurrent requests, ℓ verified drafts of a request, B = Σ (1 + ℓ_r) tokens in the verify forward.
The frame comes from scheduling a batch at several loads (``scheduler``); this module only draws it.
"""
from __future__ import annotations

from .style import series_scale


def load_budget_chart(df, width: int = 420, height: int = 240, title: str | None = None,
                      subtitle: str | list[str] | None = None):
    """Lines of the mean ℓ against R (log x), one per ``series`` (e.g. one kind of request), with B on the
    tooltip. ``df`` columns: R, series, ell, B (the batch's verify tokens at that R)."""
    import altair as alt

    names = list(dict.fromkeys(df.series))
    base = alt.Chart(df).encode(
        x=alt.X("R:Q", scale=alt.Scale(type="log", base=2), title="concurrent requests R (log scale)",
                axis=alt.Axis(format="d")),
        y=alt.Y("ell:Q", title="verified drafts ℓ (mean over its copies)", scale=alt.Scale(zero=True)),
        color=alt.Color("series:N", scale=series_scale(names), title=None,
                        legend=alt.Legend(orient="right", labelLimit=320)),
        tooltip=[alt.Tooltip("series:N", title="request"), alt.Tooltip("R:Q"),
                 alt.Tooltip("ell:Q", format=".2f", title="ℓ"), alt.Tooltip("B:Q", title="B (whole batch)")],
    )
    lines = base.mark_line(strokeWidth=2) + base.mark_point(filled=True, size=35)
    return lines.properties(width=width, height=height, title=alt.Title(
        title or "Verification budget per request as the load grows",
        subtitle=subtitle or "each line: one kind of request in the batch", anchor="start"))


__all__ = ["load_budget_chart"]
