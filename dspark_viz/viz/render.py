"""Offline rendering: Vega-Lite → SVG / PNG / self-contained HTML through vl-convert (no browser, no CDN).

Also a notebook renderer: altair 6's "mimetype" renderer emits ``application/vnd.vegalite.v6.json``, which
JupyterLab 4's built-in Vega-Lite renderer does not claim; ``enable_notebook_renderer()`` registers one
that emits the v5 mime type it renders plus a static PNG of the same chart, all offline. Where no Vega-Lite
renderer runs (GitHub, nbviewer, a PDF export) the PNG is what shows; nbval does not compare PNGs, so stored
outputs stay machine-independent. The figures use no Vega-Lite 6-only features, so the v5 renderer draws them.
"""
from __future__ import annotations

from pathlib import Path

VL_VERSION = "6.4"          # vl-convert's Vega-Lite matching altair 6's schema


def _spec(chart, validate: bool = True) -> dict:
    return chart if isinstance(chart, dict) else chart.to_dict(validate=validate)


def to_svg(chart) -> str:
    """SVG markup of an altair chart (or a Vega-Lite dict)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(_spec(chart), vl_version=VL_VERSION)


def to_png(chart, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(_spec(chart), vl_version=VL_VERSION, scale=scale)


def save_png(chart, path, scale: float = 2.0) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(to_png(chart, scale))
    return path


def save_svg(chart, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_svg(chart), encoding="utf-8")
    return path


def to_html(chart, bundle: bool = True) -> str:
    """A standalone HTML page; bundle=True inlines the Vega JavaScript (works offline, ~1 MB)."""
    import vl_convert as vlc

    return vlc.vegalite_to_html(_spec(chart), vl_version=VL_VERSION, bundle=bundle)


def _title(spec: dict) -> str:
    """The chart's title text (first line), or its mark, for the plain-text fallback."""
    t = spec.get("title")
    if isinstance(t, dict):
        t = t.get("text")
    if isinstance(t, list):
        t = t[0] if t else None
    if t:
        return str(t)
    mark = spec.get("mark")
    return f"{mark.get('type') if isinstance(mark, dict) else mark or 'layered'} chart"


def mime_bundle(chart, svg: bool = False, png: bool = True, png_scale: float = 1.0) -> dict:
    """Display bundle: Vega-Lite v5 (JupyterLab renders it offline), a static PNG for readers without a
    Vega-Lite renderer, optionally an SVG, and a text line naming the chart."""
    import base64

    spec = dict(_spec(chart, validate=False))                 # charts are validated in tests
    spec["$schema"] = "https://vega.github.io/schema/vega-lite/v5.json"   # what the v5 renderer expects
    data = {"application/vnd.vegalite.v5+json": spec, "text/plain": f"<chart: {_title(spec)}>"}
    if png:
        data["image/png"] = base64.b64encode(to_png(chart, scale=png_scale)).decode("ascii")
    if svg:
        data["image/svg+xml"] = to_svg(chart)
    return data


def enable_notebook_renderer(svg: bool = False, png: bool = True) -> None:
    """Make altair charts display through ``mime_bundle`` (call once at the top of a notebook)."""
    import altair as alt

    alt.renderers.register("dspark", lambda spec, **kw: mime_bundle(spec, svg=svg, png=png))
    alt.renderers.enable("dspark")
