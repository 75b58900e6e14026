"""Throughput and verification budget against concurrency (paper Fig. 8, both rows), with seed intervals.

Legend: R concurrent requests, ℓ verified drafts per request, 1 + ℓ tokens verified per request in one forward
(the bonus included: the paper's "verification budget", 2 for MTP-1).
Input: a ``serving.seeds.summarize`` frame (means with ``<metric>_lo`` / ``<metric>_hi``) or a plain
``serving.simulate.sweep`` frame (no band then).
"""
from __future__ import annotations

from .style import POLICY_COLORS, series_scale


def concurrency_chart(summary_df, data: str | None = None, width: int = 340, height: int = 200,
                      with_bonus: bool = True):
    """Top: total throughput vs R; bottom: the verification budget per request vs R (1 + ℓ when ``with_bonus``,
    the paper's measure; else ℓ). Log-2 x, one line per policy, a 95 % band where the frame has one."""
    import altair as alt

    df = summary_df.copy()
    shift = 1.0 if with_bonus else 0.0
    for col in ("mean_budget", "mean_budget_lo", "mean_budget_hi"):
        if col in df:
            df[col] = df[col] + shift
    policies = list(dict.fromkeys(df.policy))
    color = alt.Color("policy:N", scale=series_scale(policies, POLICY_COLORS), title="policy",
                      legend=alt.Legend(symbolOpacity=1))
    x = alt.X("R:Q", scale=alt.Scale(type="log", base=2), title="concurrent requests R (log scale)",
              axis=alt.Axis(format="d"))
    budget_title = "tokens verified per request, 1 + ℓ" if with_bonus else "verified drafts ℓ per request"

    def panel(metric: str, title: str, fmt: str, h: int):
        tips = [alt.Tooltip("policy:N"), alt.Tooltip("R:Q"), alt.Tooltip(f"{metric}:Q", format=fmt, title=title)]
        base = alt.Chart(df).encode(x=x, tooltip=tips)
        layers = [base.mark_line(strokeWidth=2).encode(y=alt.Y(f"{metric}:Q", title=title), color=color),
                  base.mark_point(filled=True, size=30).encode(
                      y=f"{metric}:Q", color=color, shape=alt.Shape("policy:N", title="policy",
                                                                    scale=alt.Scale(domain=policies)))]
        if f"{metric}_lo" in df and f"{metric}_hi" in df:          # the band shares the lines' (opaque) legend
            layers.insert(0, base.mark_area(opacity=0.18).encode(y=f"{metric}_lo:Q", y2=f"{metric}_hi:Q",
                                                                 color=color))
        return alt.layer(*layers).properties(width=width, height=h)

    top = panel("throughput", "total throughput (tokens/s)", ",.0f", height)
    bottom = panel("mean_budget", budget_title, ".2f", int(height * 0.8))
    seeds = int(df.n_seeds.min()) if "n_seeds" in df else 1
    band = f"mean of {seeds} seeds, 95 % band" if seeds > 1 else "one seed"
    return alt.vconcat(top, bottom, spacing=8).resolve_scale(color="shared", shape="shared").properties(
        title=alt.Title("Throughput and budget against load" + (f" · {data}" if data else ""),
                        subtitle=[f"{band} — paper Fig. 8 (top and bottom rows)"]))


__all__ = ["concurrency_chart"]
