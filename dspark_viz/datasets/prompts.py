"""Reading prompt files: JSONL, one ``{"turns": [str, ...], "domain"?: str, ...}`` record a line.

``turns`` holds the conversation's user turns; the first one is the request that training, evaluation
and benchmarks send to the target. ``domain`` (``"math"``, ``"code"``, ``"chat"``, or anything else)
groups results; a record without it takes the domain its file name suggests (:func:`infer_domain`).
Any other fields are kept as they are. The package's own suites, ``assets/prompts/train.jsonl`` and
``eval.jsonl``, are written by ``tools/make_prompts.py`` in a checkout; GSM8K / HumanEval / MT-Bench
style files in the same shape load the same way.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

_NAME_HINTS = (("gsm8k", "math"), ("humaneval", "code"), ("human_eval", "code"),
               ("mt-bench", "chat"), ("mt_bench", "chat"), ("mtbench", "chat"))


def infer_domain(path: str | Path) -> str:
    """Domain from a file name: gsm8k -> math, humaneval -> code, mt-bench -> chat, else mixed."""
    name = Path(path).name.lower()
    for hint, domain in _NAME_HINTS:
        if hint in name:
            return domain
    return "mixed"


def load_prompts(path: str | Path, domain: str | None = None, limit: int | None = None) -> list[dict]:
    """Read a JSONL file of ``{"turns": [str, ...], "domain"?: str, ...}`` records.

    Records keep all their fields; one without ``"domain"`` gets the domain inferred from the
    file name (:func:`infer_domain`).  ``domain`` keeps only records of that domain; ``limit``
    keeps the first ``limit`` of those.  Blank lines are skipped.  Raises ``ValueError`` for a
    missing file, a line that is not valid JSON (naming the line), or a record without a
    non-empty ``"turns"`` list of strings.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"prompt file not found: {p}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    fallback = infer_domain(p)
    records: list[dict] = []
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if limit is not None and len(records) >= limit:
                break
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{p}: line {lineno} is not valid JSON ({e.msg})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{p}: line {lineno} must be a JSON object, got {type(rec).__name__}")
            turns = rec.get("turns")
            if (not isinstance(turns, list) or not turns
                    or not all(isinstance(t, str) for t in turns) or not turns[0].strip()):
                raise ValueError(f"{p}: line {lineno} needs a non-empty \"turns\" list of strings "
                                 f"(first turn non-blank)")
            if not isinstance(rec.get("domain"), str) or not rec.get("domain"):
                rec["domain"] = fallback
            if domain is not None and rec["domain"] != domain:
                continue
            records.append(rec)
    return records


HALVES = ("select", "report")


def bench_half(records: list[dict], half: str) -> list[dict]:
    """One fixed half of a benchmark's prompts: ``"select"`` to choose drafters and settings on, ``"report"``
    for the published figures, so that no reported figure comes from prompts a choice was made on.

    The split hashes each record's first turn (SHA-256, even → select, odd → report): it does not depend on
    the file's order, the machine or the number of records, and a record keeps its half when others are
    added."""
    if half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}, got {half!r}")
    want = 0 if half == "select" else 1
    return [r for r in records
            if hashlib.sha256(r["turns"][0].encode("utf-8")).digest()[0] % 2 == want]
