"""Many Traces in one compact file: the recorded evaluation runs the course and the app replay.

A bundle is gzip-compressed JSON (``*.json.gz``)::

    {"format": "dspark_viz.traces/1", "meta": {...shared by every trace...},
     "vocab": {"token id": "text", ...}, "traces": [Trace dict without token texts, ...]}

What makes it compact (and what a bundle therefore does not keep):
- token texts live once in ``vocab``; each DraftToken / Round / Trace stores ids only;
- floats keep ``digits`` significant digits (4: probabilities to 1e-4 relative);
- ``survival`` is not stored: it is Π c_i of the calibrated (else raw) confidences, recomputed on load;
- a slot's chart data (``diag``) is reduced to what the lessons read at scale: the backbone's own pick
  (argmax of U_k among the stored candidates) and its margin U_1 − U_2, or the lookup n-gram length.
Everything else (statuses, p_draft, p_target, ℓ, m, bonus, timings, schedule decisions) is kept.
"""
from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..records import round_floats
from ..settings import assets
from ..trace import Trace

FORMAT = "dspark_viz.traces/1"
MAX_BUNDLE_BYTES = 64 * 2 ** 20          # compressed size refused above this (a bad path or a foreign file)


def compact_diag(diag: dict[str, Any] | None) -> dict[str, Any] | None:
    """A slot's chart data reduced to the backbone's pick and margin and the head's top token (neural) or the
    n-gram length (lookup)."""
    if not diag:
        return None
    if "U" in diag and "ids" in diag and diag["U"]:
        order = sorted(range(len(diag["U"])), key=lambda i: -diag["U"][i])
        margin = diag["U"][order[0]] - diag["U"][order[1]] if len(order) > 1 else None
        return {"backbone": int(diag["ids"][order[0]]), "margin": margin,      # argmax U among the top ids
                "head": int(diag["ids"][0])}                                  # argmax (U + B): ids run by U + B
    if "ngram" in diag:
        return {"ngram": diag["ngram"]}
    return {k: v for k, v in diag.items() if k in ("backbone", "margin", "head")} or None


def _strip(tr: Trace, vocab: dict[str, str], digits: int) -> dict[str, Any]:
    d = tr.to_dict()
    vocab.setdefault(str(tr.first_token), tr.first_text)
    d.pop("first_text", None)
    for r in d["rounds"]:
        if r["bonus"] is not None:
            vocab.setdefault(str(r["bonus"]), r["bonus_text"])
        r.pop("bonus_text", None)
        for t in r["drafts"]:
            vocab.setdefault(str(t["token"]), t["text"])
            t.pop("text", None)
            t.pop("survival", None)
            t["diag"] = compact_diag(t.get("diag"))
    return round_floats(d, digits)


def save_bundle(traces: Sequence[Trace], path: str | Path, meta: dict[str, Any] | None = None,
                digits: int = 4) -> Path:
    """Write ``traces`` to ``path`` (``.json.gz``), atomically (a crash leaves the old file or none)."""
    path = Path(path)
    if not str(path).endswith(".json.gz"):
        raise ValueError(f"a trace bundle is a .json.gz file, got {path.name}")
    vocab: dict[str, str] = {}
    body = {"format": FORMAT, "meta": dict(meta or {}), "traces": [_strip(t, vocab, digits) for t in traces]}
    body["vocab"] = vocab
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(body, f, ensure_ascii=False, separators=(",", ":"))
    os.replace(tmp, path)
    return path


def _restore(d: dict[str, Any], vocab: dict[str, str]) -> Trace:
    def text(i):
        return vocab.get(str(i), "") if i is not None else ""

    d = dict(d)
    d["first_text"] = text(d.get("first_token"))
    for r in d.get("rounds", []):
        r["bonus_text"] = text(r.get("bonus"))
        a, use_cal = 1.0, all(t.get("confidence_cal") is not None for t in r["drafts"])
        for t in r["drafts"]:
            t["text"] = text(t.get("token"))
            c = t.get("confidence_cal") if use_cal else t.get("confidence")
            if c is None:
                t["survival"] = None
            else:
                a *= float(c)
                t["survival"] = a
    return Trace.from_dict(d)


def read_bundle(path: str | Path) -> tuple[dict[str, Any], list[Trace]]:
    """(shared meta, traces) of one bundle; each trace's meta also carries the shared fields."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no trace bundle at {path}")
    if path.stat().st_size > MAX_BUNDLE_BYTES:
        raise ValueError(f"{path.name} is {path.stat().st_size / 2 ** 20:.0f} MB: not a trace bundle")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            body = json.load(f)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path.name} is not a readable trace bundle ({e})") from e
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise ValueError(f"{path.name} is not a trace bundle (format {FORMAT!r} expected)")
    meta, vocab = body.get("meta", {}), body.get("vocab", {})
    traces = []
    for d in body.get("traces", []):
        tr = _restore(d, vocab)
        tr.meta = {**meta, **tr.meta}
        traces.append(tr)
    return meta, traces


def load_bundle(path: str | Path) -> list[Trace]:
    return read_bundle(path)[1]


def load_traces(source: str | Path) -> list[Trace]:
    """Traces from a bundle (``.json.gz``), one Trace JSON, or a folder of either (sorted by name).
    In a folder, files that are neither are skipped; a single named file must be readable."""
    source = Path(source)
    if source.is_dir():
        out: list[Trace] = []
        for p in sorted(source.iterdir()):
            try:
                if p.name.endswith(".json.gz"):
                    out += load_bundle(p)
                elif p.suffix == ".json":
                    out.append(Trace.from_json(str(p)))
            except (ValueError, OSError):
                continue
        return out
    if not source.exists():
        raise FileNotFoundError(f"no traces at {source}")
    return load_bundle(source) if source.name.endswith(".json.gz") else [Trace.from_json(str(source))]


def bundle_name(drafter: str, temperature: float) -> str:
    return f"{drafter}_T{temperature:g}.json.gz"


def recorded_traces(drafter: str, temperature: float, domains: Iterable[str] | None = None,
                    folder: str | Path | None = None) -> list[Trace]:
    """The shipped recording of ``drafter`` at ``temperature`` (optionally only some domains)."""
    name = bundle_name(drafter, temperature)
    path = Path(folder) / name if folder else Path(assets("traces", name))
    traces = load_bundle(path)
    if domains is not None:
        keep = set(domains)
        traces = [t for t in traces if t.meta.get("domain") in keep]
    return traces


__all__ = ["FORMAT", "bundle_name", "compact_diag", "load_bundle", "load_traces", "read_bundle", "recorded_traces", "save_bundle"]
