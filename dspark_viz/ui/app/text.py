"""How the app writes results: inline Markdown, numbers with a dash for missing ones, Vega-Lite JSON.

Plain string helpers shared by every tab (no gradio, no model).
"""
from __future__ import annotations

import html


def md_escape(s) -> str:
    """Escape text for inline Markdown."""
    return html.escape(str(s), quote=False).replace("*", "\\*").replace("`", "\\`").replace("|", "\\|")


def fmt_num(x, d: int = 2) -> str:
    """``x`` with ``d`` decimals; "—" for None or NaN."""
    return "—" if x is None or x != x else f"{x:.{d}f}"


def one_line(text: str, n: int) -> str:
    """``text`` on one line (line breaks shown as ↵), cut to ``n`` characters."""
    t = " ↵ ".join(x.strip() for x in str(text).splitlines() if x.strip())
    return t if len(t) <= n else t[: n - 1] + "…"


def chart_json(chart) -> str:
    """Vega-Lite JSON of an altair chart (charts are schema-validated in tests/test_viz.py)."""
    return chart.to_json(validate=False, indent=None)


__all__ = ["chart_json", "fmt_num", "md_escape", "one_line"]
