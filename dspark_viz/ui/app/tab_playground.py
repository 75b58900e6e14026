"""The Scheduler playground tab on Gradio: the load, the profile and your own confidences → ℓ per request.

Legend: R concurrent requests (engine load), ℓ verification length, Θ expected throughput, SPS(B) engine steps
per second at B tokens per forward.

The views are ``playground.playground_view`` / ``admission_view`` / ``sps_chart_json`` (model-free, instant);
this module lays the tab out and wires every input to them.
"""
from __future__ import annotations

import gradio as gr

from .components import plot, warn
from .playground import KNEE_LABEL, KNEE_PROFILE, admission_view, playground_view, sps_chart_json
from .resources import AppResources

PLAYGROUND_HELP = """No model here, just the scheduler (paper Algorithm 1). Each of the **R** requests is a recorded
draft block with confidences c₁…c_γ ({source}). Every (request, position) is sorted by its prefix survival
a = c₁·…·c_k; candidates are admitted one by one while the expected throughput **Θ = τ·SPS(B)** rises, and the
scheduler **stops at the first one that does not** (that early stop keeps decoding lossless). Move the load: with
few requests, verifying extra tokens is almost free and blocks are verified in full; as the engine fills up, every
extra token slows everyone down, so ℓ shrinks. Type your own request's confidences to see what it gets, and pick
the profile with the knee on a slider to move the point where extra tokens stop being free."""


def playground_tab(res: AppResources, tab: gr.Tab) -> None:
    """The tab's components and events, inside the caller's ``gr.Tab`` (``tab``: opening it draws the views)."""

    def playground(load, profile, early_stop, mine, knee):
        try:
            v = playground_view(res, load, profile, early_stop, mine, knee)
        except ValueError as e:
            return warn(e), gr.skip(), gr.skip()
        return v.summary, v.lengths_html, plot(v.lengths_chart)

    def playground_path(load, profile, early_stop, mine, knee):
        try:
            return plot(admission_view(res, load, profile, early_stop, mine, knee))
        except ValueError:
            return gr.skip()                           # the first event already said why

    gr.Markdown(PLAYGROUND_HELP.format(source=res.recorded.note))
    with gr.Row():
        pg_load = gr.Slider(1, res.limits.max_load, value=8, step=1, label="Engine load R (concurrent requests)",
                            elem_id="pg-load")
        pg_profile = gr.Dropdown(res.profile_choices() + [(KNEE_LABEL, KNEE_PROFILE)], value=next(iter(res.profiles)),
                                 label="Engine profile", elem_id="pg-profile")
        pg_early = gr.Checkbox(True, label="Early stop (Algorithm 1, lossless)",
                               info="off: retrospective argmax of Θ — not lossless")
    with gr.Row():
        pg_mine = gr.Textbox("", label="Your request's confidences c₁…c_γ (request 0; empty: recorded)",
                             placeholder="e.g. 0.9, 0.8, 0.6, 0.4", elem_id="pg-mine")
        pg_knee = gr.Slider(4, 512, value=96, step=4, label="SPS knee B (profile: GPU-like, knee on "
                            "the slider)", elem_id="pg-knee")
    pg_summary = gr.Markdown("", elem_id="pg-summary")
    pg_lengths = gr.HTML("", elem_id="pg-lengths")
    with gr.Row():
        pg_lengths_plot = gr.Plot(show_label=False, elem_id="pg-lengths-plot")
        pg_path_plot = gr.Plot(show_label=False, elem_id="pg-path-plot")
    with gr.Accordion("Engine cost model: steps per second SPS(B)", open=False):
        sps_plot = gr.Plot(show_label=False, elem_id="sps-plot")
    pg_in = [pg_load, pg_profile, pg_early, pg_mine, pg_knee]
    # the answer (ℓ per request) first, then the slower Θ-curve chart: both instant, model-free
    gr.on([tab.select, pg_load.change, pg_profile.change, pg_early.change, pg_mine.submit,
           pg_mine.blur, pg_knee.change], playground, pg_in,
          [pg_summary, pg_lengths, pg_lengths_plot], api_name="playground", concurrency_limit=None,
          trigger_mode="always_last", show_progress="hidden") \
        .then(playground_path, pg_in, pg_path_plot, api_name="playground_path", concurrency_limit=None,
              trigger_mode="always_last", show_progress="hidden")
    tab.select(lambda: plot(sps_chart_json(res)), None, sps_plot, api_visibility="private",
               concurrency_limit=None)


__all__ = ["PLAYGROUND_HELP", "playground_tab"]
