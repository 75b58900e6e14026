"""Charts and token HTML for dspark_viz: Trace / DataFrame / Schedule in, altair chart (or HTML str) out.

No algorithm lives here: numbers come from metrics, calibration, scheduler and serving.
"""
from .acceptance import acceptance_chart, acceptance_frame, tau_frame, tau_table_chart
from .budgets import load_budget_chart
from .calibration import reliability_diagram, reliability_frame, threshold_sweep_chart
from .load import concurrency_chart
from .logits import logit_decomposition, logit_frame
from .paper_compare import fig2_compare_chart, fig2_compare_frame, table1_compare_chart, table1_compare_frame
from .render import enable_notebook_renderer, mime_bundle, save_png, save_svg, to_html, to_png, to_svg
from .round_diagram import round_diagram, round_diagram_frame
from .rounds import round_frame, round_view
from .serving import (admission_path_chart, budget_chart, chosen_lengths_chart, engine_load_chart, frontier_chart,
                      sps_chart, sps_frame)
from .speed import round_cost_chart, speculation_gain_chart
from .studies import data_chart, depth_chart, gain_chart, gamma_chart, study_curves_chart
from .tokens import legend_html, strip_frame, token_strip_chart, token_strip_html
from .training import loss_curve_chart, loss_frame

__all__ = [
    "token_strip_html", "token_strip_chart", "strip_frame", "legend_html",
    "round_view", "round_frame", "round_diagram", "round_diagram_frame",
    "acceptance_chart", "acceptance_frame", "tau_table_chart", "tau_frame",
    "table1_compare_frame", "table1_compare_chart", "fig2_compare_frame", "fig2_compare_chart",
    "logit_decomposition", "logit_frame",
    "reliability_diagram", "reliability_frame", "threshold_sweep_chart",
    "sps_chart", "sps_frame", "admission_path_chart", "chosen_lengths_chart", "engine_load_chart", "frontier_chart", "budget_chart",
    "load_budget_chart", "concurrency_chart",
    "round_cost_chart", "speculation_gain_chart", "loss_curve_chart", "loss_frame",
    "depth_chart", "gamma_chart", "gain_chart", "data_chart", "study_curves_chart",
    "to_svg", "to_png", "save_png", "save_svg", "to_html", "mime_bundle", "enable_notebook_renderer",
]
