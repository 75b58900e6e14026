"""The Serving frontier tab on Gradio: a profile → every policy's simulated frontier and draft budget.

Legend: R concurrent requests, SPS(B) engine steps per second at B tokens per forward.

The view is ``frontier.frontier_view``; its sweeps are kept per session (a gr.State: profile → sweep rows).
"""
from __future__ import annotations

import gradio as gr

from .components import MODEL_LIMIT, plot, warn
from .frontier import frontier_view
from .resources import AppResources

FRONTIER_HELP = """A serving simulation (`serving.simulate.sweep`): R requests share the engine, each step replays one
recorded round per request, the policy picks ℓ for each request and the step costs 1/SPS(B). **Left**: total
throughput against per-user speed, one point per R (up and right is better). **Right**: how many drafts each policy
verifies as R grows: fixed policies never adapt, the hardware-aware scheduler spends less when the engine is busy."""


def frontier_tab(res: AppResources, tab: gr.Tab) -> None:
    """The tab's components and events, inside the caller's ``gr.Tab`` (``tab``: opening it runs the sweep)."""

    def frontier(profile, cache):
        try:
            f, b, summary, cache = frontier_view(res, profile, cache)
        except ValueError as e:
            return gr.skip(), gr.skip(), warn(e), gr.skip()
        return plot(f), plot(b), summary, cache

    gr.Markdown(FRONTIER_HELP)
    sweeps = gr.State({})                  # per session: profile → sweep rows
    fr_profile = gr.Dropdown(res.profile_choices(), value=next(iter(res.profiles)), label="Engine profile")
    fr_summary = gr.Markdown("Open this tab or pick a profile to simulate (a few seconds).",
                             elem_id="frontier-summary")
    with gr.Row():
        fr_plot = gr.Plot(show_label=False)
        fr_budget = gr.Plot(show_label=False)
    gr.on([tab.select, fr_profile.change], frontier, [fr_profile, sweeps],
          [fr_plot, fr_budget, fr_summary, sweeps], api_name="frontier",
          concurrency_limit=MODEL_LIMIT, concurrency_id="sweep", trigger_mode="always_last")


__all__ = ["FRONTIER_HELP", "frontier_tab"]
