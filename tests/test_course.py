"""The stored course: what a reader sees without running it (GitHub, nbviewer, a PDF export)."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def _outputs(nb_path: Path):
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            yield i, out.get("data", {})


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_stored_chart_has_a_static_picture(path):
    charts = [(i, d) for i, d in _outputs(path) if any("vegalite" in k for k in d)]
    assert charts, f"{path.name} stores no chart output"
    for i, d in charts:
        assert "image/png" in d, f"{path.name} cell {i}: a Vega-Lite output without a PNG beside it"
        assert base64.b64decode(d["image/png"])[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} cell {i}"
        assert d["text/plain"] != "<dict>", f"{path.name} cell {i}: an empty plain-text fallback"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_stored_widget_has_a_static_picture(path):
    """An ipywidgets panel shows only "VBox(children=…)" where no kernel runs it: each stored one carries a PNG of
    its charts and a line of text saying what it shows."""
    for i, d in _outputs(path):
        if "application/vnd.jupyter.widget-view+json" in d:
            assert "image/png" in d, f"{path.name} cell {i}: a widget output without a static picture"
            assert base64.b64decode(d["image/png"])[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} cell {i}"
            text = "".join(d["text/plain"])
            assert not text.startswith(("VBox(", "HBox(")), f"{path.name} cell {i}: {text[:40]}"
