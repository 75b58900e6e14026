"""Checking what a user typed or picked before anything runs: numbers clipped into range, choices
validated, confidences parsed, the prompt fitted into the context (the app tabs and the notebook panels).

Every check either returns a usable value (appending a note for the user when it had to change one)
or raises ValueError with a sentence the app shows as it is.
"""
from __future__ import annotations

import math
from typing import Any, Mapping


def _num(x, name: str) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {x!r}")
    return v


def clamp(x, lo: float, hi: float, name: str, notes: list[str], integer: bool = False):
    """x clipped into [lo, hi] (rounded if integer); a note says so when it had to clip."""
    v = _num(x, name)
    v = round(v) if integer else v
    c = min(max(v, lo), hi)
    if c != v:
        notes.append(f"{name} {x} is out of range {lo:g}–{hi:g}: using {c:g}")
    return int(c) if integer else float(c)


def check_choice(value: str, options: Mapping[str, Any], what: str) -> str:
    """``value`` if it is one of ``options``, else ValueError listing them."""
    if value not in options:
        raise ValueError(f"unknown {what} {value!r}: choose one of {', '.join(options)}")
    return value


def split_confidences(text) -> list[str]:
    """A typed row of confidences ("0.9, 0.8, 0.6"; commas, semicolons or spaces) → its non-empty parts."""
    return [p for p in str(text or "").replace(";", ",").replace(" ", ",").split(",") if p.strip()]


def check_confidences(row, max_len: int = 64) -> list[float]:
    """One request's confidences: 1…max_len numbers in [0, 1], as floats; else ValueError saying what is wrong."""
    try:
        out = [float(x) for x in row]
    except (TypeError, ValueError):
        raise ValueError("confidences must be numbers, e.g. 0.9, 0.7, 0.4") from None
    if not 1 <= len(out) <= max_len:
        raise ValueError(f"give 1…{max_len} confidences, got {len(out)}")
    if any(not 0.0 <= c <= 1.0 for c in out):                  # also refuses NaN
        raise ValueError("each confidence must lie in [0, 1], e.g. 0.9, 0.7, 0.4")
    return out


def parse_confidences(text, max_len: int = 64) -> list[float] | None:
    """The one confidence parser of the faces: a typed row → floats in [0, 1]; None for an empty field.
    Anything else raises ValueError saying what is wrong."""
    parts = split_confidences(text)
    return check_confidences(parts, max_len) if parts else None


def prepare_prompt(target, text: str, max_new_tokens: int, context_limit: int) -> tuple[list[int], str, str | None]:
    """Chat-template ids of the prompt; if prompt + answer would not fit, keep the *end* of the prompt.

    → (ids, prompt text used, notice or None). Raises ValueError for an empty prompt.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("The prompt is empty: type a question or pick an example.")
    room = context_limit - max_new_tokens
    if room < 8:
        raise ValueError(f"max new tokens {max_new_tokens} leaves no room for a prompt in a "
                         f"{context_limit}-token context")
    ids = list(target.chat_ids(text))
    if len(ids) <= room:
        return ids, text, None
    toks = list(target.encode(text))
    overhead = max(0, len(ids) - len(toks))             # chat-template tokens around the user text
    keep, used = room - overhead, ""
    while keep > 0:
        used = target.decode(toks[-keep:])
        ids = list(target.chat_ids(used)) if used.strip() else []
        if ids and len(ids) <= room:
            break
        keep -= max(1, len(ids) - room)                 # re-tokenisation at the cut can add a token or two
    if keep <= 0:
        raise ValueError(f"the prompt does not fit the {context_limit}-token context even when truncated")
    notice = (f"The prompt had {len(toks)} tokens; with {max_new_tokens} new tokens only {room} fit the "
              f"{context_limit}-token context, so it was truncated to its last {keep} tokens.")
    return ids, used, notice


__all__ = ["check_choice", "check_confidences", "clamp", "parse_confidences", "prepare_prompt", "split_confidences"]
