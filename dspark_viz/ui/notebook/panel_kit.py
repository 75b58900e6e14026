"""What the ipywidgets panels share: the lazy ipywidgets import, profile arguments, chart output."""
from __future__ import annotations

from typing import Mapping

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
