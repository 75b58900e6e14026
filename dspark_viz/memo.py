"""One small memo for values derived from an object and kept on it until what they were derived from changes.

    table = keyed(self, "rope_table", key=(device, n), build=lambda: rope_cos_sin(...))

The value lives in ``obj.__dict__`` under ``_memo_<name>`` beside the key it was built for, so it goes where the
object goes and is rebuilt the first time it is asked for under another key (a new device, dtype, capacity or
parameter storage). Not a module of the drafters or kernels: a core utility, importing nothing of the package.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")
_MISSING = object()


def keyed(obj: Any, name: str, key: Any, build: Callable[[], T]) -> T:
    """``build()``, computed once per ``key`` and kept on ``obj`` (the last key only)."""
    slot = f"_memo_{name}"
    kept = obj.__dict__.get(slot, _MISSING)
    if kept is _MISSING or kept[0] != key:
        kept = obj.__dict__[slot] = (key, build())
    return kept[1]


def peek(obj: Any, name: str, default: Any = None) -> Any:
    """The value kept under ``name`` whatever its key, or ``default`` (for a caller that extends it in place)."""
    kept = obj.__dict__.get(f"_memo_{name}", _MISSING)
    return default if kept is _MISSING else kept[1]


def forget(obj: Any, name: str) -> None:
    """Drop the value kept under ``name`` (the next ``keyed`` call builds it again)."""
    obj.__dict__.pop(f"_memo_{name}", None)


__all__ = ["keyed", "peek", "forget"]
