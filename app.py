"""DSpark, live: a Gradio app over dspark_viz (speculative decoding with confidence-scheduled verification).

    python app.py [--host 127.0.0.1] [--port 7860] [--target PATH]

``build_demo(target=None, drafters=None, ...)`` returns the gr.Blocks; launching happens only under __main__.
The model, the drafters and the recorded data are loaded once and shared read-only by every session; what
belongs to one user (the last trace, the trace being replayed, the serving sweeps) lives in gr.State.
This file only composes the five tabs: each one's layout and callbacks are its builder in ``dspark_viz.ui.app``
(``tab_live``, ``tab_playground``, ``tab_calibration``, ``tab_frontier``, ``tab_replay``), which maps the tab
modules' results (``live``, ``playground``, ``calibration_tab``, ``frontier``, ``replay``) onto components.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402

from dspark_viz.ui.app.components import MODEL_LIMIT  # noqa: E402
from dspark_viz.ui.app.resources import RECORDING, Limits, drafters_md, load_resources  # noqa: E402
from dspark_viz.ui.app.tab_calibration import calibration_tab  # noqa: E402
from dspark_viz.ui.app.tab_frontier import frontier_tab  # noqa: E402
from dspark_viz.ui.app.tab_live import live_tab  # noqa: E402
from dspark_viz.ui.app.tab_playground import playground_tab  # noqa: E402
from dspark_viz.ui.app.tab_replay import replay_tab  # noqa: E402

INTRO = """# ⚡ DSpark — speculative decoding you can watch
A small **drafter** guesses the next few tokens, the **target** model ({target}) checks them all in one forward pass
and keeps the longest correct prefix plus one token of its own. DSpark's drafter also says **how sure it is** about
each guess, and a **scheduler** uses that to decide how many guesses are worth checking given how busy the engine is.
{drafters}"""


def build_demo(target=None, drafters=None, *, profiles=None, traces=None, trace_source=RECORDING, examples=None,
               limits: Limits | None = None, target_path: str | None = None) -> gr.Blocks:
    """The app. target / drafters / profiles / traces default to the embedded model, every drafter that loads,
    the synthetic + measured SPS profiles and the shipped recording of the DSpark drafter at T = 1
    (``trace_source``: a bundle, Trace JSON or folder; synthetic requests when there is none)."""
    res = load_resources(target, drafters, profiles=profiles, traces=traces, trace_source=trace_source,
                         examples=examples, limits=limits, target_path=target_path)
    with gr.Blocks(title="DSpark — speculative decoding, live", analytics_enabled=False,
                   delete_cache=(1800, 3600)) as demo:       # served copies of trace files: dropped after an hour
        last_trace = gr.State(None)                    # per session: the last finished live trace
        gr.Markdown(INTRO.format(target=f"`{res.target.name}`", drafters=drafters_md(res)))
        with gr.Tabs():
            with gr.Tab("Live decode", id="live"):
                live_tab(res, last_trace)
            with gr.Tab("Scheduler playground", id="playground") as tab:
                playground_tab(res, tab)
            with gr.Tab("Calibration", id="calibration") as tab:
                calibration_tab(res, tab)
            with gr.Tab("Serving frontier", id="frontier") as tab:
                frontier_tab(res, tab)
            with gr.Tab("Replay", id="replay"):
                replay_tab(last_trace)
        gr.Markdown(f"<small>Model `{res.target.name}` on `{res.target.device}` · profiles: "
                    f"{', '.join(res.profiles)} · data for the model-free tabs: {res.recorded.note}</small>")
    demo.queue(max_size=64, default_concurrency_limit=MODEL_LIMIT)
    demo.dspark_resources = res                       # for tests and benchmarks (read-only)
    return demo


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="DSpark live demo (Gradio)")
    ap.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1: this machine)")
    ap.add_argument("--port", type=int, default=7860)
    ap.add_argument("--target", default=None, metavar="PATH",
                    help="a local Hugging Face causal-LM folder or .gguf file (default: embedded SmolLM2-135M)")
    a = ap.parse_args(argv)
    try:
        demo = build_demo(target_path=a.target)
    except (FileNotFoundError, ValueError) as e:       # a bad --target: one line, no traceback
        raise SystemExit(f"app.py: {e}") from None
    demo.launch(server_name=a.host, server_port=a.port, share=False)


if __name__ == "__main__":
    main()
