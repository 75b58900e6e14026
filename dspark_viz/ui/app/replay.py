"""The Replay tab: a saved Trace browsed round by round, no model.

Legend: ℓ verification length, m accepted drafts, τ committed tokens per round.

A Trace JSON comes from an upload (``load_trace_file`` checks it, with a readable reason for anything else) or
from the session's last live run; ``replay_view`` draws the text up to a round, that round's view and, when its
policy recorded one, the scheduler's admission path.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ... import metrics
from ...trace import Trace
from ...viz import admission_path_chart, round_view, token_strip_html
from ..inputs import clamp
from .text import chart_json, fmt_num, md_escape, one_line

MAX_TRACE_BYTES = 20 * 2 ** 20


def load_trace_file(path) -> Trace:
    """A Trace from an uploaded JSON file; ValueError with a readable reason for anything else."""
    if not path:
        raise ValueError("no file: upload a Trace JSON saved by this app, the notebooks or `dspark-viz`")
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_TRACE_BYTES:
            raise ValueError(f"the file is {size / 2 ** 20:.1f} MB; traces above "
                             f"{MAX_TRACE_BYTES // 2 ** 20} MB are refused")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{p.name} is not a text file (not UTF-8): not a Trace JSON") from None
    except OSError as e:
        raise ValueError(f"cannot read the uploaded file: {e}") from None
    if not text.lstrip().startswith("{"):
        raise ValueError(f"{p.name} is not a dspark_viz Trace (expected a JSON object)")
    tr = Trace.from_json(text)
    try:                                               # types are not checked by the dataclasses: draw once
        if not isinstance(tr.rounds, list) or not isinstance(tr.meta, dict):
            raise TypeError("rounds must be a list and meta an object")
        if tr.rounds:
            _replay_draw(tr, len(tr.rounds) - 1)
    except Exception as e:                             # noqa: BLE001
        raise ValueError(f"{p.name} is not a valid dspark_viz Trace ({type(e).__name__}: {e})") from None
    return tr


def _replay_draw(tr: Trace, i: int, show_pruned: bool = True) -> tuple[str, str, str | None]:
    """(strip HTML up to round i, round view JSON, admission path JSON or None)."""
    upto = replace(tr, rounds=tr.rounds[: i + 1])
    strip = token_strip_html(upto, show_pruned=bool(show_pruned), legend=False)
    sched = tr.rounds[i].schedule
    path = chart_json(admission_path_chart(sched)) if sched and sched.get("path") else None
    return strip, chart_json(round_view(tr, i)), path


def replay_view(tr: Trace | None, index, show_pruned: bool = True) -> tuple[str, str, str | None, str | None]:
    """(status Markdown, strip HTML, round view JSON, admission path JSON or None) up to round ``index``."""
    if tr is None:
        return "Upload a Trace JSON (or press **Use my last live run**) to browse it round by round.", "", None, None
    n = len(tr.rounds)
    if n == 0:
        return "This trace has no rounds (the answer ended at the prefill token).", "", None, None
    notes: list[str] = []
    i = clamp(index if index is not None else n - 1, 0, n - 1, "round", notes, integer=True)
    strip, rv, path = _replay_draw(tr, i, show_pruned)
    if path is None:
        notes.append("no admission path in this round: its policy did not sort candidates (fixed length, "
                     "or a drafter without confidences)")
    m = tr.meta
    upto = replace(tr, rounds=tr.rounds[: i + 1])
    prompt = str(m.get("prompt") or "")
    status = (f"**Round {i + 1} of {n}** · drafter `{md_escape(m.get('drafter', '?'))}` · policy "
              f"`{md_escape(m.get('policy', '?'))}` · temperature {md_escape(m.get('temperature', '?'))} · "
              f"{upto.n_generated} tokens so far · τ so far = {fmt_num(metrics.tau(upto))}"
              + (f"\n\nPrompt: {md_escape(one_line(prompt, 300))}" if prompt else "")
              + ("".join(f"\n\n**Note:** {md_escape(x)}" for x in notes)))
    return status, strip, rv, path


__all__ = ["MAX_TRACE_BYTES", "load_trace_file", "replay_view"]
