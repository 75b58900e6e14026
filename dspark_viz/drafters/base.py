"""The drafter protocol under its earlier name: it lives in the core, ``dspark_viz.protocol``."""
from __future__ import annotations

from ..protocol import Context, Draft, Drafter

__all__ = ["Context", "Draft", "Drafter"]
