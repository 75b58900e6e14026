"""DSpark, live: a Gradio app over dspark_viz (speculative decoding with confidence-scheduled verification).

    python app.py [--host 127.0.0.1] [--port 7860] [--target PATH]

``build_demo(target=None, drafters=None, ...)`` returns the gr.Blocks; launching happens only under __main__.
The model, the drafters and the recorded data are loaded once and shared read-only by every session; what
belongs to one user (the last trace, the trace being replayed, the serving sweeps) lives in gr.State.
The callbacks are thin: they call the tab modules of ``dspark_viz.ui`` (``resources``, ``live``, ``playground``,
``calibration_tab``, ``frontier``, ``replay``) and map their results onto components.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

import gradio as gr  # noqa: E402
from gradio.components.plot import PlotData  # noqa: E402

from dspark_viz.ui.app.calibration_tab import calibration_view  # noqa: E402
from dspark_viz.ui.app.frontier import frontier_view  # noqa: E402
from dspark_viz.ui.app.live import LiveUpdate, live_decode, strip_view  # noqa: E402
from dspark_viz.ui.app.playground import KNEE_LABEL, KNEE_PROFILE, admission_view, playground_view, sps_chart_json  # noqa: E402,E501
from dspark_viz.ui.app.replay import load_trace_file, replay_view  # noqa: E402
from dspark_viz.ui.app.resources import RECORDING, Limits, drafters_md, load_resources  # noqa: E402
from dspark_viz.ui.app.text import md_escape  # noqa: E402
from dspark_viz.viz import legend_html  # noqa: E402

MODEL_LIMIT = 2            # model-bound events running at once (decoding, serving sweeps); instant ones: no limit

INTRO = """# ⚡ DSpark — speculative decoding you can watch
A small **drafter** guesses the next few tokens, the **target** model ({target}) checks them all in one forward pass
and keeps the longest correct prefix plus one token of its own. DSpark's drafter also says **how sure it is** about
each guess, and a **scheduler** uses that to decide how many guesses are worth checking given how busy the engine is.
{drafters}"""

LIVE_HELP = """Every **round**: the drafter proposes γ tokens; the scheduler picks how many of them, **ℓ**, the
target verifies. It sees your request plus **R − 1** other requests sharing the engine (the load slider) and admits
draft tokens while the expected throughput keeps rising. The target accepts a prefix of **m** tokens and adds one
**bonus** token of its own. Decoding stays exact: at temperature 0 the text equals plain decoding. Drafters without
a confidence head verify all γ drafts. The scheduler plans with this machine's measured engine profile by default
(the GPU-like ones are synthetic). With the **fallback** on, a round whose draft would not pay for itself (judged from
the earlier rounds' measured times) is a plain step instead; the speed-up under the run is against plain decoding on
the same engine and dtype."""

PLAYGROUND_HELP = """No model here, just the scheduler (paper Algorithm 1). Each of the **R** requests is a recorded
draft block with confidences c₁…c_γ ({source}). Every (request, position) is sorted by its prefix survival
a = c₁·…·c_k; candidates are admitted one by one while the expected throughput **Θ = τ·SPS(B)** rises, and the
scheduler **stops at the first one that does not** (that early stop keeps decoding lossless). Move the load: with
few requests, verifying extra tokens is almost free and blocks are verified in full; as the engine fills up, every
extra token slows everyone down, so ℓ shrinks. Type your own request's confidences to see what it gets, and pick
the profile with the knee on a slider to move the point where extra tokens stop being free."""

CALIB_HELP = """Is the confidence head honest? Each panel is one draft position k: the predicted prefix survival a_k
(x) against how often the first k drafts were really accepted (y). On the dashed diagonal the confidence is honest;
below it the head is over-confident. **Sequential Temperature Scaling (STS)** fits one temperature per position, left
to right: it keeps the ranking (AUROC) and fixes the scale, which the scheduler's Θ estimate relies on."""

FRONTIER_HELP = """A serving simulation (`serving.simulate.sweep`): R requests share the engine, each step replays one
recorded round per request, the policy picks ℓ for each request and the step costs 1/SPS(B). **Left**: total
throughput against per-user speed, one point per R (up and right is better). **Right**: how many drafts each policy
verifies as R grows: fixed policies never adapt, the hardware-aware scheduler spends less when the engine is busy."""

REPLAY_HELP = """Upload a saved **Trace JSON** (the file under Live decode, `trace.to_json()` in a notebook, or the
CLI), or take your last live run, then slide through its rounds: the text up to that round, the round's confidences
and ℓ, and the scheduler's admission path when the policy recorded one. No model is needed."""


def _plot(spec: str | None):
    return None if spec is None else PlotData(type="altair", plot=spec)


def _keep(x):
    """None → leave the component as it is."""
    return gr.skip() if x is None else x


def live_outputs(u: LiveUpdate) -> tuple:
    """One LiveUpdate → (status, strip, round plot, stats, trace file, last-trace state)."""
    if u.warning and u.phase in ("start", "error"):
        gr.Warning(u.warning)
    strip = None if u.strip is None else _strip_box(u.strip)
    return (u.status, _keep(strip), _keep(_plot(u.chart)), _keep(u.stats), _keep(u.file), _keep(u.trace))


def _strip_box(body: str, empty: str = "The answer appears here, round by round.") -> str:
    if not body:
        return f'<div class="dsv-empty" style="color:#777">{empty}</div>'
    return f'<div style="max-height:440px;overflow-y:auto">{body}</div>'


def build_demo(target=None, drafters=None, *, profiles=None, traces=None, trace_source=RECORDING, examples=None,
               limits: Limits | None = None, target_path: str | None = None) -> gr.Blocks:
    """The app. target / drafters / profiles / traces default to the embedded model, every drafter that loads,
    the synthetic + measured SPS profiles and the shipped recording of the DSpark drafter at T = 1
    (``trace_source``: a bundle, Trace JSON or folder; synthetic requests when there is none)."""
    res = load_resources(target, drafters, profiles=profiles, traces=traces, trace_source=trace_source,
                         examples=examples, limits=limits, target_path=target_path)
    lim = res.limits
    first_profile = next(iter(res.profiles))

    def live(prompt, drafter, temperature, max_new, load, profile, compare, seed, show_pruned=True, fallback=None):
        for u in live_decode(res, prompt, drafter, temperature, max_new, load, profile, compare, seed,
                             show_pruned, fallback):
            yield live_outputs(u)

    def live_strip(last, show_pruned):
        return gr.skip() if last is None else _strip_box(strip_view(last, show_pruned))

    def playground(load, profile, early_stop, mine, knee):
        try:
            v = playground_view(res, load, profile, early_stop, mine, knee)
        except ValueError as e:
            gr.Warning(str(e))
            return f"⚠️ **{md_escape(e)}**", gr.skip(), gr.skip()
        return v.summary, v.lengths_html, _plot(v.lengths_chart)

    def playground_path(load, profile, early_stop, mine, knee):
        try:
            return _plot(admission_view(res, load, profile, early_stop, mine, knee))
        except ValueError:
            return gr.skip()                           # the first event already said why

    def calibration(position, after):
        try:
            chart, table = calibration_view(res, position, after)
        except ValueError as e:
            gr.Warning(str(e))
            return gr.skip(), f"⚠️ **{md_escape(e)}**"
        return _plot(chart), table

    def frontier(profile, cache):
        try:
            f, b, summary, cache = frontier_view(res, profile, cache)
        except ValueError as e:
            gr.Warning(str(e))
            return gr.skip(), gr.skip(), f"⚠️ **{md_escape(e)}**", gr.skip()
        return _plot(f), _plot(b), summary, cache

    def replay_outputs(tr, index=None, note: str = "", show_pruned: bool = True):
        try:
            status, strip, rv, path = replay_view(tr, index, show_pruned)
        except Exception as e:                         # noqa: BLE001 — a malformed round: say so, stay up
            gr.Warning(f"cannot draw this round: {e}")
            return f"⚠️ **Cannot draw this round: {md_escape(e)}**", gr.skip(), gr.skip(), gr.skip()
        return status + note, _strip_box(strip, "The trace's text appears here."), _plot(rv), _plot(path)

    def replay_load(file, show_pruned=True):
        try:
            tr = load_trace_file(file)
        except ValueError as e:
            gr.Warning(str(e))
            return (None, gr.Slider(visible=False), f"⚠️ **Could not open this file: {md_escape(e)}**",
                    _strip_box("", "The trace's text appears here."), None, None)
        return (tr, _round_slider(tr), *replay_outputs(tr, None, "\n\n✓ Loaded the uploaded trace.", show_pruned))

    def replay_last(last, show_pruned=True):
        if last is None:
            msg = "No live run yet: run one in the Live decode tab first."
            gr.Warning(msg)
            return gr.skip(), gr.skip(), f"⚠️ **{msg}**", gr.skip(), gr.skip(), gr.skip()
        return (last, _round_slider(last),
                *replay_outputs(last, None, "\n\n✓ Showing your last live run.", show_pruned))

    def replay_round(tr, index, show_pruned=True):
        return replay_outputs(tr, index, show_pruned=show_pruned)

    with gr.Blocks(title="DSpark — speculative decoding, live", analytics_enabled=False,
                   delete_cache=(1800, 3600)) as demo:       # served copies of trace files: dropped after an hour
        last_trace = gr.State(None)                    # per session: the last finished live trace
        gr.Markdown(INTRO.format(target=f"`{res.target.name}`", drafters=drafters_md(res)))
        with gr.Tabs():
            # -- live decode --------------------------------------------------------------------------------
            with gr.Tab("Live decode", id="live"):
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
                        load = gr.Slider(1, lim.max_load, value=4, step=1, label="Engine load R",
                                         info="concurrent requests sharing the verify forward", elem_id="live-load")
                        profile = gr.Dropdown(res.profile_choices(), value=res.live_profile,
                                              label="Engine profile SPS(B)", elem_id="live-profile",
                                              info="the measured CPU curve by default; the others are synthetic")
                        fallback = gr.Checkbox(res.fallback_default, elem_id="live-fallback",
                                               label="Fallback: decode plainly while drafting does not pay",
                                               info="decided from earlier rounds' measured times: still lossless")
                        with gr.Row():
                            compare = gr.Checkbox(True, label="Then run plain decoding to compare tokens/s")
                            seed = gr.Number(0, label="Seed", precision=0, minimum=0)
                        show_pruned = gr.Checkbox(True, label="Show pruned drafts (cut by the scheduler)",
                                                  elem_id="show-pruned")
                live_status = gr.Markdown("Press **Run** to start.", elem_id="live-status")
                gr.HTML(legend_html(), elem_id="legend")
                strip = gr.HTML(_strip_box(""), elem_id="live-strip")
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
                                       api_name="decode", concurrency_limit=MODEL_LIMIT, concurrency_id="model",
                                       show_progress="minimal")
                stop_btn.click(None, None, None, cancels=[run_ev], api_visibility="private")
                show_pruned.change(live_strip, [last_trace, show_pruned], strip, api_visibility="private",
                                   concurrency_limit=None, show_progress="hidden")

            # -- scheduler playground -----------------------------------------------------------------------
            with gr.Tab("Scheduler playground", id="playground") as pg_tab:
                gr.Markdown(PLAYGROUND_HELP.format(source=res.recorded.note))
                with gr.Row():
                    pg_load = gr.Slider(1, lim.max_load, value=8, step=1, label="Engine load R (concurrent requests)",
                                        elem_id="pg-load")
                    pg_profile = gr.Dropdown(res.profile_choices() + [(KNEE_LABEL, KNEE_PROFILE)], value=first_profile,
                                             label="Engine profile", elem_id="pg-profile")
                    pg_early = gr.Checkbox(True, label="Early stop (Algorithm 1, lossless)",
                                           info="off: retrospective argmax of Θ — not lossless")
                with gr.Row():
                    pg_mine = gr.Textbox("", label="Your request's confidences c₁…c_γ (request 0; empty: recorded)",
                                         placeholder="e.g. 0.9, 0.8, 0.6, 0.4", elem_id="pg-mine")
                    pg_knee = gr.Slider(4, 512, value=96, step=4, label="SPS knee B (profile: GPU-like, knee on "
                                        "the slider)", elem_id="pg-knee")
                pg_summary = gr.Markdown("", elem_id="pg-summary")
                pg_lengths = gr.HTML("", elem_id="pg-lengths")
                with gr.Row():
                    pg_lengths_plot = gr.Plot(show_label=False, elem_id="pg-lengths-plot")
                    pg_path_plot = gr.Plot(show_label=False, elem_id="pg-path-plot")
                with gr.Accordion("Engine cost model: steps per second SPS(B)", open=False):
                    sps_plot = gr.Plot(show_label=False, elem_id="sps-plot")
                pg_in = [pg_load, pg_profile, pg_early, pg_mine, pg_knee]
                # the answer (ℓ per request) first, then the slower Θ-curve chart: both instant, model-free
                gr.on([pg_tab.select, pg_load.change, pg_profile.change, pg_early.change, pg_mine.submit,
                       pg_mine.blur, pg_knee.change], playground, pg_in,
                      [pg_summary, pg_lengths, pg_lengths_plot], api_name="playground", concurrency_limit=None,
                      trigger_mode="always_last", show_progress="hidden") \
                    .then(playground_path, pg_in, pg_path_plot, api_name="playground_path", concurrency_limit=None,
                          trigger_mode="always_last", show_progress="hidden")
                pg_tab.select(lambda: _plot(sps_chart_json(res)), None, sps_plot, api_visibility="private",
                              concurrency_limit=None)

            # -- calibration --------------------------------------------------------------------------------
            with gr.Tab("Calibration", id="calibration") as calib_tab:
                gr.Markdown(CALIB_HELP)
                calib_note = gr.Markdown("", elem_id="calib-note")
                with gr.Row():
                    cal_pos = gr.Dropdown([("all positions", 0)] + [(f"k = {k}", k)
                                                                    for k in range(1, res.recorded.gamma + 1)],
                                          value=0, label="Draft position")
                    cal_after = gr.Checkbox(True, label="Show after STS")
                cal_plot = gr.Plot(show_label=False)
                cal_table = gr.Markdown("", elem_id="calib-table")
                gr.on([calib_tab.select, cal_pos.change, cal_after.change], calibration, [cal_pos, cal_after],
                      [cal_plot, cal_table], api_name="calibration", concurrency_limit=None,
                      trigger_mode="always_last", show_progress="minimal")
                calib_tab.select(lambda: res.calibration.note, None, calib_note, api_visibility="private",
                                 concurrency_limit=None)

            # -- serving frontier ---------------------------------------------------------------------------
            with gr.Tab("Serving frontier", id="frontier") as frontier_tab:
                gr.Markdown(FRONTIER_HELP)
                sweeps = gr.State({})                  # per session: profile → sweep rows
                fr_profile = gr.Dropdown(res.profile_choices(), value=first_profile, label="Engine profile")
                fr_summary = gr.Markdown("Open this tab or pick a profile to simulate (a few seconds).",
                                         elem_id="frontier-summary")
                with gr.Row():
                    fr_plot = gr.Plot(show_label=False)
                    fr_budget = gr.Plot(show_label=False)
                gr.on([frontier_tab.select, fr_profile.change], frontier, [fr_profile, sweeps],
                      [fr_plot, fr_budget, fr_summary, sweeps], api_name="frontier",
                      concurrency_limit=MODEL_LIMIT, concurrency_id="sweep", trigger_mode="always_last")

            # -- replay -------------------------------------------------------------------------------------
            with gr.Tab("Replay", id="replay"):
                gr.Markdown(REPLAY_HELP)
                replay_trace = gr.State(None)          # per session: the trace being browsed
                with gr.Row():
                    upload = gr.File(label="Trace JSON", file_types=[".json"], type="filepath", elem_id="upload")
                    with gr.Column():
                        use_last = gr.Button("Use my last live run", variant="secondary", size="md", elem_id="use-last")
                        rp_round = gr.Slider(0, 1, value=0, step=1, label="Round", visible=False,
                                             elem_id="replay-round")
                        rp_pruned = gr.Checkbox(True, label="Show pruned drafts (cut by the scheduler)")
                rp_status = gr.Markdown(replay_view(None, None)[0], elem_id="replay-status")
                rp_strip = gr.HTML(_strip_box("", "The trace's text appears here."), elem_id="replay-strip")
                with gr.Row():
                    rp_round_plot = gr.Plot(show_label=False)
                    rp_path_plot = gr.Plot(show_label=False)
                rp_out = [rp_status, rp_strip, rp_round_plot, rp_path_plot]
                upload.upload(replay_load, [upload, rp_pruned], [replay_trace, rp_round, *rp_out],
                              api_name="replay_load", concurrency_limit=None)
                use_last.click(replay_last, [last_trace, rp_pruned], [replay_trace, rp_round, *rp_out],
                               api_name="replay_last", concurrency_limit=None)
                gr.on([rp_round.change, rp_pruned.change], replay_round, [replay_trace, rp_round, rp_pruned], rp_out,
                      api_name="replay_round", concurrency_limit=None, trigger_mode="always_last",
                      show_progress="hidden")
        gr.Markdown(f"<small>Model `{res.target.name}` on `{res.target.device}` · profiles: "
                    f"{', '.join(res.profiles)} · data for the model-free tabs: {res.recorded.note}</small>")
    demo.queue(max_size=64, default_concurrency_limit=MODEL_LIMIT)
    demo.dspark_resources = res                       # for tests and benchmarks (read-only)
    return demo


def _round_slider(tr):
    n = len(tr.rounds)
    return gr.Slider(minimum=0, maximum=max(1, n - 1), value=max(0, n - 1), step=1, visible=n > 0,
                     label=f"Round (0 … {max(0, n - 1)})", interactive=n > 1)


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
