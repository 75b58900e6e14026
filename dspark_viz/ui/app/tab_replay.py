"""The Replay tab on Gradio: an uploaded Trace JSON (or the session's last live run) → a slider over its rounds.

Legend: ℓ verification length, m accepted drafts, τ committed tokens per round.

The views are ``replay.load_trace_file`` and ``replay.replay_view`` (no model); the trace being browsed is kept
per session (a gr.State).
"""
from __future__ import annotations

import gradio as gr

from .components import plot, strip_box
from .replay import load_trace_file, replay_view
from .text import md_escape

REPLAY_HELP = """Upload a saved **Trace JSON** (the file under Live decode, `trace.to_json()` in a notebook, or the
CLI), or take your last live run, then slide through its rounds: the text up to that round, the round's confidences
and ℓ, and the scheduler's admission path when the policy recorded one. No model is needed."""

EMPTY_TEXT = "The trace's text appears here."


def round_slider(tr) -> gr.Slider:
    """The round slider for trace ``tr``: its last round selected, hidden without rounds."""
    n = len(tr.rounds)
    return gr.Slider(minimum=0, maximum=max(1, n - 1), value=max(0, n - 1), step=1, visible=n > 0,
                     label=f"Round (0 … {max(0, n - 1)})", interactive=n > 1)


def replay_outputs(tr, index=None, note: str = "", show_pruned: bool = True) -> tuple:
    """Trace ``tr`` up to round ``index`` → (status, strip, round plot, admission path plot)."""
    try:
        status, strip, rv, path = replay_view(tr, index, show_pruned)
    except Exception as e:                         # noqa: BLE001 — a malformed round: say so, stay up
        gr.Warning(f"cannot draw this round: {e}")
        return f"⚠️ **Cannot draw this round: {md_escape(e)}**", gr.skip(), gr.skip(), gr.skip()
    return status + note, strip_box(strip, EMPTY_TEXT), plot(rv), plot(path)


# The endpoints below keep no docstring: Gradio would show it as their API description.
# An uploaded file → (trace state, round slider, *replay_outputs).
def replay_load(file, show_pruned=True) -> tuple:
    try:
        tr = load_trace_file(file)
    except ValueError as e:
        gr.Warning(str(e))
        return (None, gr.Slider(visible=False), f"⚠️ **Could not open this file: {md_escape(e)}**",
                strip_box("", EMPTY_TEXT), None, None)
    return (tr, round_slider(tr), *replay_outputs(tr, None, "\n\n✓ Loaded the uploaded trace.", show_pruned))


# The session's last live run → (trace state, round slider, *replay_outputs).
def replay_last(last, show_pruned=True) -> tuple:
    if last is None:
        msg = "No live run yet: run one in the Live decode tab first."
        gr.Warning(msg)
        return gr.skip(), gr.skip(), f"⚠️ **{msg}**", gr.skip(), gr.skip(), gr.skip()
    return (last, round_slider(last), *replay_outputs(last, None, "\n\n✓ Showing your last live run.", show_pruned))


def replay_round(tr, index, show_pruned=True) -> tuple:
    return replay_outputs(tr, index, show_pruned=show_pruned)


def replay_tab(last_trace: gr.State) -> None:
    """The tab's components and events, inside the caller's ``gr.Tab``; ``last_trace``: the Live tab's last run."""
    gr.Markdown(REPLAY_HELP)
    replay_trace = gr.State(None)          # per session: the trace being browsed
    with gr.Row():
        upload = gr.File(label="Trace JSON", file_types=[".json"], type="filepath", elem_id="upload")
        with gr.Column():
            use_last = gr.Button("Use my last live run", variant="secondary", size="md", elem_id="use-last")
            rp_round = gr.Slider(0, 1, value=0, step=1, label="Round", visible=False, elem_id="replay-round")
            rp_pruned = gr.Checkbox(True, label="Show pruned drafts (cut by the scheduler)")
    rp_status = gr.Markdown(replay_view(None, None)[0], elem_id="replay-status")
    rp_strip = gr.HTML(strip_box("", EMPTY_TEXT), elem_id="replay-strip")
    with gr.Row():
        rp_round_plot = gr.Plot(show_label=False)
        rp_path_plot = gr.Plot(show_label=False)
    rp_out = [rp_status, rp_strip, rp_round_plot, rp_path_plot]
    upload.upload(replay_load, [upload, rp_pruned], [replay_trace, rp_round, *rp_out],
                  api_name="replay_load", concurrency_limit=None)
    use_last.click(replay_last, [last_trace, rp_pruned], [replay_trace, rp_round, *rp_out],
                   api_name="replay_last", concurrency_limit=None)
    gr.on([rp_round.change, rp_pruned.change], replay_round, [replay_trace, rp_round, rp_pruned], rp_out,
          api_name="replay_round", concurrency_limit=None, trigger_mode="always_last", show_progress="hidden")


__all__ = ["REPLAY_HELP", "replay_load", "replay_last", "replay_outputs", "replay_round", "replay_tab",
           "round_slider"]
