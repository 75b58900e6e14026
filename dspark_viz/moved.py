"""Earlier homes of modules that moved, so that code importing them by their old names keeps working.

``import dspark_viz.trace_store`` (or ``from dspark_viz.machine import choose_default_dtype``) gives the module now
at the new home: the same module object, not a copy, so a setting changed through either name is seen by both.
The package itself imports only the new homes (tests/test_layout.py checks it). CHANGELOG.md lists every move.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    "dspark_viz.prompts": "dspark_viz.datasets.prompts",
    "dspark_viz.trace_store": "dspark_viz.datasets.traces",
    "dspark_viz.synthetic": "dspark_viz.datasets.synthetic",
    "dspark_viz.evaluate": "dspark_viz.evaluation.full_block",
    "dspark_viz.machine": "dspark_viz.evaluation.dtype_choice",
    "dspark_viz.bench": "dspark_viz.evaluation",
    "dspark_viz.bench.machine": "dspark_viz.evaluation.machine_info",
    "dspark_viz.bench.methods": "dspark_viz.evaluation.speed_methods",
    "dspark_viz.bench.runner": "dspark_viz.evaluation.speed_runner",
    "dspark_viz.bench.report": "dspark_viz.evaluation.speed_report",
    "dspark_viz.serving.background": "dspark_viz.background",
    "dspark_viz.viz.export": "dspark_viz.viz.render",
    "dspark_viz.drafters.export": "dspark_viz.drafters.deepspec_export",
    **{f"dspark_viz.ui.{m}": f"dspark_viz.ui.app.{m}"
       for m in ("resources", "live", "playground", "replay", "frontier", "calibration_tab", "text")},
    **{f"dspark_viz.ui.{m}": f"dspark_viz.ui.notebook.{m}" for m in ("widgets", "scheduler_panel", "panel_kit")},
}


class _OldNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name in ``MOVED`` and loads it as the module at its new home."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=fullname == "dspark_viz.bench")

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        self._own_spec = module.__spec__          # the import system writes the old name's spec onto the module
        return module

    def exec_module(self, module):
        module.__spec__ = self._own_spec          # … so give it its own back: it stays what it is at its home


def install() -> None:
    """Put the finder on the import path once (dspark_viz/__init__.py calls this)."""
    if not any(isinstance(f, _OldNames) for f in sys.meta_path):
        sys.meta_path.insert(0, _OldNames())     # ahead of an editable install's finder, which would look on disk
