"""What the ipywidgets panels share: the lazy ipywidgets import, profile arguments, chart output, and the display
bundle that gives each panel a static picture."""
from __future__ import annotations

import html
import re
from typing import Mapping, Sequence

from ... import viz
from ...cost import SPSProfile, gpu_like, jagged


def widgets_module():
    import ipywidgets

    return ipywidgets


def profile_dict(profiles) -> dict[str, SPSProfile]:
    """Profiles given as None (the synthetic pair), one profile, a mapping or a list → name → profile."""
    if profiles is None:
        return {"gpu-like": gpu_like(), "jagged": jagged()}
    if isinstance(profiles, SPSProfile):
        return {profiles.name: profiles}
    if isinstance(profiles, Mapping):
        return dict(profiles)
    return {p.name: p for p in profiles}


def show(out, chart) -> None:
    """Replace an Output widget's content with one chart (works with or without a kernel)."""
    out.outputs = ({"output_type": "display_data", "data": viz.mime_bundle(chart, png=False), "metadata": {}},)


def plain(text: str) -> str:
    """An HTML status line as plain text."""
    return html.unescape(re.sub(r"<[^>]+>", "", text or "")).strip()


def panel_bundle(widget, charts: Sequence, text: str, **kwargs) -> dict:
    """A panel's display: the live widget where a kernel runs it; for a reader without one (GitHub, nbviewer, an
    export, where the bare widget shows only "VBox(children=…)") a PNG of the panel's charts as they stand, stacked,
    and ``text`` (its state in words)."""
    import base64

    import altair as alt

    data = dict(widget._repr_mimebundle_(**kwargs) or {})
    drawn = [c for c in charts if c is not None]
    if drawn:
        chart = drawn[0] if len(drawn) == 1 else alt.vconcat(*drawn)
        data["image/png"] = base64.b64encode(viz.to_png(chart, scale=1.0)).decode("ascii")
    data["text/plain"] = text
    return data
