"""The JSON side of the package's small records (SPS profiles, STS calibrations, Traces): one way to write,
read and round them, so each record only says how it maps to a dict.

A record class sets ``RECORD`` (how an error message names it, e.g. "an SPS profile") and implements
``to_dict`` / ``from_dict``; ``JSONRecord`` adds ``to_json``, ``save``, ``from_json`` and ``load``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def parse_json(text: str, what: str) -> Any:
    """``json.loads`` whose error says which record the text was meant to be."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not {what} (invalid JSON: {e})") from e


def write_text(path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8), creating its folder."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def round_floats(x, digits: int):
    """A copy of a JSON-like value with every float rounded to ``digits`` significant digits."""
    if isinstance(x, float):
        return float(f"{x:.{digits}g}")
    if isinstance(x, dict):
        return {k: round_floats(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [round_floats(v, digits) for v in x]
    return x


class JSONRecord:
    """``to_json`` / ``save`` / ``from_json`` / ``load`` over a class's ``to_dict`` / ``from_dict``."""
    RECORD = "a record"

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, d: Any):
        raise NotImplementedError

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def save(self, path) -> None:
        write_text(path, self.to_json(indent=1))

    @classmethod
    def from_json(cls, s: str):
        return cls.from_dict(parse_json(s, cls.RECORD))

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read())
