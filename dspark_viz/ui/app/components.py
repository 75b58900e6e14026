"""What every tab builder shares on the Gradio side: chart JSON as a plot value, "leave it as it is", the
scrolling box of a token strip, a warning as a toast and as Markdown, the model-bound concurrency limit.

The ``tab_*`` modules import Gradio (``app.py`` only imports them); the tab modules they call do not.
"""
from __future__ import annotations

import gradio as gr
from gradio.components.plot import PlotData

from .text import md_escape

MODEL_LIMIT = 2            # model-bound events running at once (decoding, serving sweeps); instant ones: no limit


def plot(spec: str | None):
    """Vega-Lite JSON → the value of a gr.Plot (None: an empty plot)."""
    return None if spec is None else PlotData(type="altair", plot=spec)


def keep(x):
    """None → leave the component as it is."""
    return gr.skip() if x is None else x


def strip_box(body: str, empty: str = "The answer appears here, round by round.") -> str:
    """A token strip in a scrolling box; ``empty`` in grey when there is none yet."""
    if not body:
        return f'<div class="dsv-empty" style="color:#777">{empty}</div>'
    return f'<div style="max-height:440px;overflow-y:auto">{body}</div>'


def warn(e) -> str:
    """``e`` shown as a toast; → the same as bold Markdown for the tab's status."""
    gr.Warning(str(e))
    return f"⚠️ **{md_escape(e)}**"


__all__ = ["MODEL_LIMIT", "keep", "plot", "strip_box", "warn"]
