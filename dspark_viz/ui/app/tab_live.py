"""The Live decode tab on Gradio: the prompt, the settings, the streamed answer, the round chart and the stats.

Legend: R concurrent requests (engine load), γ block size, ℓ verification length, m accepted drafts.

The decoding is ``live.live_decode`` (a stream of LiveUpdate); this module lays the tab out and maps each update
onto its components. The finished trace goes into the session's ``last_trace`` state (the Replay tab reads it).
"""
from __future__ import annotations

import gradio as gr

from ...viz import legend_html
from .components import keep, plot, strip_box
from .live import LiveUpdate, live_decode, strip_view
from .resources import AppResources

LIVE_HELP = """Every **round**: the drafter proposes γ tokens; the scheduler picks how many of them, **ℓ**, the
target verifies. Your request runs in one live engine with **R − 1** real background requests (the load slider)
and every other open page's: each round one forward verifies all their blocks, and the scheduler admits draft
tokens across all of them while the expected throughput keeps rising. The target accepts a prefix of **m** tokens and adds one
**bonus** token of its own. Decoding stays exact: at temperature 0 the text equals plain decoding. Drafters without
a confidence head verify all γ drafts. The scheduler plans with this machine's measured engine profile by default
(the GPU-like ones are synthetic). With the **fallback** on, a round whose draft would not pay for itself (judged from
the earlier rounds' measured times) is a plain step instead; the speed-up under the run is against plain decoding on
the same engine and dtype."""


def live_outputs(u: LiveUpdate) -> tuple:
    """One LiveUpdate → (status, strip, round plot, stats, trace file, last-trace state)."""
    if u.warning and u.phase in ("start", "error"):
        gr.Warning(u.warning)
    strip = None if u.strip is None else strip_box(u.strip)
    return (u.status, keep(strip), keep(plot(u.chart)), keep(u.stats), keep(u.file), keep(u.trace))


def live_tab(res: AppResources, last_trace: gr.State) -> None:
    """The tab's components and events, inside the caller's ``gr.Tab``; a finished run goes into ``last_trace``."""
    lim = res.limits

    def live(prompt, drafter, temperature, max_new, load, profile, compare, seed, show_pruned=True, fallback=None):
        for u in live_decode(res, prompt, drafter, temperature, max_new, load, profile, compare, seed,
                             show_pruned, fallback):
            yield live_outputs(u)

    def live_strip(last, show_pruned):
        return gr.skip() if last is None else strip_box(strip_view(last, show_pruned))

    gr.Markdown(LIVE_HELP)
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(label="Prompt", lines=4, max_lines=12, elem_id="prompt",
                                placeholder="Ask something, or pick an example below")
            gr.Examples([[p] for _, p in res.examples], inputs=[prompt], label="Examples",
                        example_labels=[f"{dom}: {p.splitlines()[0][:60]}" for dom, p in res.examples])
            with gr.Row():
                run_btn = gr.Button("▶ Run", variant="primary", elem_id="run")
                stop_btn = gr.Button("■ Stop", variant="stop", elem_id="stop")
        with gr.Column(scale=2):
            drafter = gr.Dropdown(res.drafter_choices(), value=next(iter(res.drafters)),
                                  label="Drafter", elem_id="drafter")
            with gr.Row():
                temperature = gr.Slider(0, lim.max_temperature, value=0.0, step=0.1,
                                        label="Temperature", info="0 = greedy", elem_id="temperature")
                max_new = gr.Slider(8, lim.max_new_tokens, value=min(96, lim.max_new_tokens), step=8,
                                    label="Max new tokens", elem_id="max-new")
            load = gr.Slider(1, lim.max_live, value=4, step=1, label="Engine load R",
                             info="yours + R − 1 background requests in the shared engine (other pages join too)",
                             elem_id="live-load")
            profile = gr.Dropdown(res.profile_choices(), value=res.live_profile,
                                  label="Engine profile SPS(B)", elem_id="live-profile",
                                  info="the measured CPU curve by default; the others are synthetic")
            fallback = gr.Checkbox(res.fallback_default, elem_id="live-fallback",
                                   label="Fallback: decode plainly while drafting does not pay",
                                   info="beyond the paper: decided from earlier rounds' measured times, still lossless")
            with gr.Row():
                compare = gr.Checkbox(True, label="Then run plain decoding to compare tokens/s")
                seed = gr.Number(0, label="Seed", precision=0, minimum=0)
            show_pruned = gr.Checkbox(True, label="Show pruned drafts (cut by the scheduler)",
                                      elem_id="show-pruned")
    live_status = gr.Markdown("Press **Run** to start.", elem_id="live-status")
    gr.HTML(legend_html(), elem_id="legend")
    strip = gr.HTML(strip_box(""), elem_id="live-strip")
    with gr.Row():
        with gr.Column(scale=1):
            round_plot = gr.Plot(show_label=False, elem_id="round-plot")
        with gr.Column(scale=1):
            stats = gr.Markdown("", elem_id="live-stats")
            trace_file = gr.File(label="This run's trace (JSON) — open it in Replay", interactive=False,
                                 elem_id="trace-file")
    run_ev = run_btn.click(live, [prompt, drafter, temperature, max_new, load, profile, compare, seed,
                                  show_pruned, fallback],
                           [live_status, strip, round_plot, stats, trace_file, last_trace],
                           api_name="decode", concurrency_limit=lim.max_live, concurrency_id="live",
                           show_progress="minimal")
    stop_btn.click(None, None, None, cancels=[run_ev], api_visibility="private")
    show_pruned.change(live_strip, [last_trace, show_pruned], strip, api_visibility="private",
                       concurrency_limit=None, show_progress="hidden")


__all__ = ["LIVE_HELP", "live_outputs", "live_tab"]
