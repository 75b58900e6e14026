"""The Calibration tab on Gradio: a draft position and before / after STS → the reliability diagram and table.

Legend: k 1-based draft position, a_k prefix survival, STS Sequential Temperature Scaling.

The view is ``calibration_tab.calibration_view`` (model-free); this module lays the tab out and wires it.
"""
from __future__ import annotations

import gradio as gr

from .calibration_tab import calibration_view
from .components import plot, warn
from .resources import AppResources

CALIB_HELP = """Is the confidence head honest? Each panel is one draft position k: the predicted prefix survival a_k
(x) against how often the first k drafts were really accepted (y). On the dashed diagonal the confidence is honest;
below it the head is over-confident. **Sequential Temperature Scaling (STS)** fits one temperature per position, left
to right: it keeps the ranking (AUROC) and fixes the scale, which the scheduler's Θ estimate relies on."""


def calibration_tab(res: AppResources, tab: gr.Tab) -> None:
    """The tab's components and events, inside the caller's ``gr.Tab`` (``tab``: opening it draws the view)."""

    def calibration(position, after):
        try:
            chart, table = calibration_view(res, position, after)
        except ValueError as e:
            return gr.skip(), warn(e)
        return plot(chart), table

    gr.Markdown(CALIB_HELP)
    calib_note = gr.Markdown("", elem_id="calib-note")
    with gr.Row():
        cal_pos = gr.Dropdown([("all positions", 0)] + [(f"k = {k}", k) for k in range(1, res.recorded.gamma + 1)],
                              value=0, label="Draft position")
        cal_after = gr.Checkbox(True, label="Show after STS")
    cal_plot = gr.Plot(show_label=False)
    cal_table = gr.Markdown("", elem_id="calib-table")
    gr.on([tab.select, cal_pos.change, cal_after.change], calibration, [cal_pos, cal_after],
          [cal_plot, cal_table], api_name="calibration", concurrency_limit=None,
          trigger_mode="always_last", show_progress="minimal")
    tab.select(lambda: res.calibration.note, None, calib_note, api_visibility="private", concurrency_limit=None)


__all__ = ["CALIB_HELP", "calibration_tab"]
