"""The Serving frontier tab: every policy simulated on the recorded (or synthetic) requests at R = 1 … 256.

Legend: R concurrent requests, γ block size, SPS(B) engine steps per second at B tokens per forward.

The simulation is ``serving.simulate.sweep`` and the headline ratios ``serving.simulate.headline``; this module
picks the policies and loads, keeps each profile's sweep in the session's cache, and writes the charts and summary.
"""
from __future__ import annotations

import time

from ...serving.simulate import headline, sweep
from ...viz import budget_chart, frontier_chart
from ..inputs import check_choice
from .resources import AppResources
from .text import chart_json, fmt_num, md_escape

SWEEP_RS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def frontier_policies(gamma: int) -> list[str]:
    """Fixed lengths 1, 3 and γ, then the confidence-driven policies."""
    fixed = sorted({1, min(3, gamma), gamma})
    return [f"fixed-{e}" for e in fixed] + ["hardware-aware", "hardware-aware+floor", "async-global"]


def frontier_view(res: AppResources, profile: str, cache: dict | None) -> tuple[str, str, str, dict]:
    """The sweep of every policy on the recorded (or synthetic) requests, cached per profile in ``cache``
    (the session's state). → (frontier JSON, budget JSON, summary Markdown, cache)."""
    import pandas as pd

    profile = check_choice(profile, res.profiles, "profile")
    cache = dict(cache or {})
    if profile not in cache:
        t0 = time.perf_counter()
        df = sweep(res.recorded.traces, frontier_policies(res.recorded.gamma), res.profiles[profile],
                   Rs=SWEEP_RS, n_rounds=res.limits.sweep_rounds, seed=0)
        cache[profile] = {"rows": df.to_dict("records"), "seconds": time.perf_counter() - t0}
    df = pd.DataFrame(cache[profile]["rows"])
    try:
        h = headline(df, policy="hardware-aware", baseline="fixed-1", sla_R=32)
        head = (f"At the per-user speed fixed-1 reaches with R = 32 ({h['sla_per_user']:,.0f} tok/s per user), "
                f"the hardware-aware scheduler serves **×{fmt_num(h['throughput_gain_at_sla'])}** the total "
                f"throughput of fixed-1{' (lower bound)' if h['policy_at_sla_is_lower_bound'] else ''}; at "
                f"fixed-1's throughput it is **×{fmt_num(h['per_user_speedup_at_matched_throughput'])}** faster "
                f"per user; its worst ratio to the best fixed length is "
                f"**×{fmt_num(h['min_ratio_vs_best_fixed'])}** (at R = {h['argmin_R_vs_best_fixed']}).")
    except (ValueError, KeyError, ZeroDivisionError) as e:
        head = f"(headline numbers unavailable: {md_escape(e)})"
    summary = (f"{head}\n\nSimulated with `serving.simulate.sweep` on {res.recorded.note}; profile `{profile}`, "
               f"{res.limits.sweep_rounds} engine steps per point, R ∈ {{{', '.join(map(str, SWEEP_RS))}}} "
               f"(computed in {cache[profile]['seconds']:.1f} s, kept while this page is open).")
    return chart_json(frontier_chart(df)), chart_json(budget_chart(df)), summary, cache


__all__ = ["SWEEP_RS", "frontier_policies", "frontier_view"]
