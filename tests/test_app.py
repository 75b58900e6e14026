"""app.py served for real: every public endpoint through gradio_client, bad input, 8 concurrent sessions.

Fast tests use the tiny random Llama (real TargetModel wrapper, letters a–z as tokens) with prompt lookup and a
random drafter that has a confidence head (so the engine load matters); one module-level app with the real
embedded SmolLM2 target checks a real decode against plain decoding.
"""
from __future__ import annotations

import html
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
pytest.importorskip("gradio")
pytest.importorskip("gradio_client")
pytest.importorskip("altair")

from gradio_client import Client, handle_file  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import app  # noqa: E402
from dspark_viz.background import tile_requests  # noqa: E402
from dspark_viz.decode import plain_generate, speculative_generate  # noqa: E402
from dspark_viz.drafters import LookupDrafter, RandomDrafter  # noqa: E402
from dspark_viz.model.toy import tiny_llama_target  # noqa: E402
from dspark_viz.scheduler import HardwareAware  # noqa: E402
from dspark_viz.trace import Trace  # noqa: E402
from dspark_viz.background import live_policy  # noqa: E402
from dspark_viz.ui.app.live import live_decode  # noqa: E402
from dspark_viz.ui.app.playground import playground_view  # noqa: E402
from dspark_viz.ui.app.resources import DRAFTER_ORDER, build_calibration, load_recorded  # noqa: E402
from dspark_viz.ui.inputs import prepare_prompt  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:.*no_silent_downcasting"),      # inside gradio's queue
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]
ENDPOINTS = ("/decode", "/playground", "/playground_path", "/calibration", "/frontier", "/replay_load",
             "/replay_last", "/replay_round")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(demo) -> str:
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    return f"http://127.0.0.1:{port}/"


@pytest.fixture(scope="module")
def tiny():
    """(url, resources) of an app on the tiny target; closed after the module."""
    target = tiny_llama_target()
    drafters = {"lookup": LookupDrafter(4, vocab_size=target.vocab_size),
                "random": RandomDrafter(target.vocab_size, gamma=4, seed=1)}
    demo = app.build_demo(target, drafters, trace_source=None, examples=[("chat", "abcabcabc")])
    url = serve(demo)
    yield url, demo.dspark_resources
    demo.close()


@pytest.fixture
def client(tiny):
    return Client(tiny[0], verbose=False)                # one client = one session


def decode_args(prompt, drafter="random", temperature=0.0, max_new=24, load=8, profile="gpu-like", compare=False,
                seed=0, show_pruned=True, fallback=False):
    """The /decode inputs; the fallback is off so that the rounds are the library's own (it decides by timings)."""
    return (prompt, drafter, temperature, max_new, load, profile, compare, seed, show_pruned, fallback)


def library_decode(res, prompt, drafter="random", temperature=0.0, max_new=24, load=8, profile="gpu-like",
                   compare=False, seed=0, show_pruned=True, fallback=False) -> Trace:
    """The same request decoded directly by the library (what the app must reproduce)."""
    d = res.drafters[drafter]
    return speculative_generate(res.target, d, prompt, policy=live_policy(d, load, res.recorded.conf_rows),
                                temperature=temperature, max_new_tokens=max_new, seed=seed,
                                sps=res.profiles[profile], fallback=fallback)


def plot_spec(value) -> dict:
    assert isinstance(value, dict) and value["type"] == "altair", value
    return json.loads(value["plot"])


def title_of(spec: dict) -> str:
    t = spec.get("title", "")
    return t.get("text", "") if isinstance(t, dict) else str(t)


# -- the API ------------------------------------------------------------------------------------------------
def test_every_endpoint_is_public(client):
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    for name in ENDPOINTS:
        assert name in api, f"{name} missing from {sorted(api)}"


def test_decode_streams_rounds_in_the_shared_engine(client, tiny):
    """Load R = 8: the request decodes in the live engine beside 7 real background requests; rounds stream, the
    page shows the live R and both speeds, and the greedy text is plain decoding's."""
    _, res = tiny
    args = decode_args("abcabcabc", "random", temperature=0.0, max_new=24, load=8, seed=3, compare=True)
    job = client.submit(*args, api_name="/decode")
    final = job.result(timeout=120)
    updates = job.outputs()
    rounds = [u for u in updates if str(u[0]).startswith("**Round")]
    assert len(rounds) >= 3, [u[0] for u in updates]               # streamed one update per round
    assert all("**Engine:** R = " in u[0] and "engine " in u[0] for u in rounds)
    assert "7 background requests from the evaluation set" in rounds[0][0]
    status, strip, chart, stats, trace_path = final
    assert "Finished" in status and "plain decoding done" in status
    assert "dsv-tok" in strip and "dsv-bonus" in strip               # coloured tokens, bonus tokens
    spec = plot_spec(chart)
    assert title_of(spec).startswith("Round ")
    assert "tokens/s" in stats and "**plain**" in stats and "✓ yes" in stats and "**Engine:**" in stats
    tr = Trace.from_json(trace_path)
    assert tr.output_ids == plain_generate(res.target, "abcabcabc", max_new_tokens=24).output_ids
    assert tr.meta["load_R"] == 8 and tr.meta["policy"] == "hardware-aware" and tr.meta["engine"] is True
    assert max(tr.meta["loads"]) >= 2                                 # the background requests shared forwards
    assert max(len(r.schedule["lengths"]) for r in tr.rounds if r.schedule) >= 2   # ℓ allocated across requests
    eng = res.engine("random", "gpu-like")
    assert not eng.busy() or all(j.trace.meta.get("app") != "background" for j in eng.live)


def test_decode_greedy_lookup_equals_plain_decoding(client, tiny):
    _, res = tiny
    status, strip, chart, stats, trace_path = client.predict(
        *decode_args("abababab", "lookup", max_new=32, load=8, compare=True), api_name="/decode")
    assert "dsv-accepted" in strip                                   # lookup drafts get accepted here
    assert "✓ yes" in stats                                          # greedy speculative = plain
    assert "no confidence head" in status                            # the load does not apply to lookup
    tr = Trace.from_json(trace_path)
    assert tr.output_ids == plain_generate(res.target, "abababab", max_new_tokens=32).output_ids
    assert tr.meta["policy"] == "fixed-4" and max(tr.meta["loads"]) >= 2


def test_pruned_drafts_can_be_hidden(client):
    shown = client.predict(*decode_args("abcabc", "random", max_new=12, load=4, profile="cpu", show_pruned=True),
                           api_name="/decode")
    hidden = client.predict(*decode_args("abcabc", "random", max_new=12, load=4, profile="cpu", show_pruned=False),
                            api_name="/decode")
    assert "dsv-pruned" in shown[1] and "dsv-pruned" not in hidden[1]  # 4 requests on the CPU curve: drafts cut
    assert "dsv-bonus" in hidden[1]
    status, strip, *_ = client.predict(1, False, api_name="/replay_round")   # nothing loaded in this session
    assert "Upload a Trace JSON" in status


def test_decode_bad_input_is_reported_and_the_app_stays_up(client, tiny):
    out = client.predict(*decode_args("   "), api_name="/decode")
    assert "prompt is empty" in out[0]
    out = client.predict(*decode_args("xyz!?"), api_name="/decode")   # not in the toy vocabulary
    assert "⚠️" in out[0] and "vocabulary" in out[0]
    with pytest.raises(AppError, match="maximum"):                    # out of the slider's range: gradio says so
        client.predict(*decode_args("abc", temperature=5.0), api_name="/decode")
    with pytest.raises(AppError, match="not in the list of choices"):
        client.predict(*decode_args("abc", drafter="nope"), api_name="/decode")
    long_prompt = "abcdefgh" * 80                                     # 640 tokens > the tiny 512-token context
    status, strip, _, _, trace_path = client.predict(*decode_args(long_prompt, "lookup", max_new=32),
                                                     api_name="/decode")
    assert "truncated" in status and "Finished" in status
    tr = Trace.from_json(trace_path)
    assert len(tr.prompt_ids) + 32 <= 512 and long_prompt.endswith(tr.meta["prompt"])
    out = client.predict(*decode_args("abc", "lookup", max_new=8), api_name="/decode")
    assert "Finished" in out[0]                                       # still serving


def test_live_decode_clamps_out_of_range_settings(tiny):
    _, res = tiny
    ups = list(live_decode(res, "abcabc", "random", temperature=9, max_new_tokens=0, load=-3,
                           profile="jagged", compare=False, seed=1))
    assert ups[0].warning and "temperature 9 is out of range" in ups[0].warning
    done = ups[-1]
    assert done.phase == "done" and "engine load R -3 is out of range" in done.status
    assert done.trace.meta["temperature"] == 2.0 and done.trace.meta["load_R"] == 1
    assert done.trace.meta["max_new_tokens"] == 1 and done.trace.n_generated == 1
    busy = list(live_decode(res, "abcabc", "random", max_new_tokens=6, load=50, compare=False))[-1]
    assert "engine load R 50 is out of range" in busy.status and busy.trace.meta["load_R"] == res.limits.max_live
    bad = list(live_decode(res, "abc", "random", temperature="hot"))
    assert len(bad) == 1 and bad[0].phase == "error" and "must be a number" in bad[0].status
    bad = list(live_decode(res, "abc", "random", profile="tpu"))
    assert len(bad) == 1 and "unknown profile" in bad[0].status


def test_live_decode_plans_with_the_measured_profile_and_falls_back_by_default_on_cpu(tiny):
    """On a CPU target: the measured curve is the default profile, the fallback is on (a plain step is timed
    after the warm-up rounds, so some round skips), the status counts the rounds that drafted, the text at T = 0
    is plain decoding's, and the speed-up names the engine it was measured against."""
    _, res = tiny
    assert res.live_profile == "cpu" and res.profiles["cpu"].device == "cpu" and res.fallback_default
    assert "synthetic" in dict((v, k) for k, v in res.profile_choices())["gpu-like"]
    ups = list(live_decode(res, "abcabcabc", "lookup", max_new_tokens=24, compare=True))
    done, final = ups[-2], ups[-1]
    tr = final.trace
    assert tr.meta["profile"] == "cpu" and tr.meta["fallback"] is True and any(r.skipped for r in tr.rounds)
    drafted = sum(bool(r.drafts) for r in tr.rounds)
    assert f"drafted in {drafted}/{len(tr.rounds)} rounds" in done.status and "+ fallback" in done.status
    assert "✓ yes" in final.stats and "Rounds that drafted" in final.stats
    assert "against plain decoding of the same prompt alone" in final.stats and "float32" in final.stats
    off = list(live_decode(res, "abcabcabc", "lookup", max_new_tokens=24, compare=False, fallback=False))[-1]
    assert off.trace.meta["fallback"] is False and not any(r.skipped for r in off.trace.rounds)


# -- model-free tabs ------------------------------------------------------------------------------------------
def test_playground_lengths_change_with_load(client, tiny):
    _, res = tiny
    alone = client.predict(1, "gpu-like", True, "", 96, api_name="/playground")
    busy = client.predict(200, "gpu-like", True, "", 96, api_name="/playground")
    for out, R in ((alone, 1), (busy, 200)):
        summary, lengths_html, lengths_chart = out
        assert f"R = {R}**" in summary and "mean ℓ" in summary
        want = HardwareAware().choose(tile_requests(res.recorded.conf_rows, R), res.profiles["gpu-like"]).lengths
        assert f'data-r="{R}"' in lengths_html
        assert lengths_html.split('class="pg-lengths">')[1].split("<")[0].split()[:64] == [str(e) for e in want[:64]]
        spec = plot_spec(lengths_chart)
        assert title_of(spec).startswith("Chosen verification lengths")
        bars = [row["ell"] for rows in spec["datasets"].values() for row in rows]
        assert bars == want                                           # the chart draws the same ℓ_r
        path = plot_spec(client.predict(R, "gpu-like", True, "", 96, api_name="/playground_path"))
        assert title_of(path).startswith(f"Admission path of Algorithm 1: {sum(want)} of")   # admitted = Σ ℓ_r
    mean = lambda h: float(h.split('data-mean="')[1].split('"')[0])  # noqa: E731
    assert mean(busy[1]) < mean(alone[1])                             # a busy engine verifies fewer drafts
    jag = client.predict(200, "jagged", True, "", 96, api_name="/playground")
    assert "profile `jagged`" in jag[0] and jag[1] != busy[1]
    retro = client.predict(200, "jagged", False, "", 96, api_name="/playground")
    assert "NOT lossless" in retro[0]
    with pytest.raises(AppError, match="maximum"):
        client.predict(10 ** 6, "gpu-like", True, "", 96, api_name="/playground")


def test_playground_takes_your_confidences_and_a_knee(client, tiny):
    _, res = tiny
    gamma = res.recorded.gamma
    sure = ", ".join(["0.99"] * gamma)
    summary, lengths_html, _ = client.predict(32, "gpu-like", True, sure, 96, api_name="/playground")
    conf = [[0.99] * gamma] + tile_requests(res.recorded.conf_rows, 32)[1:]
    want = HardwareAware().choose(conf, res.profiles["gpu-like"]).lengths
    assert f"your request: ℓ = {want[0]}**" in summary and f'data-mine="{want[0]}"' in lengths_html
    bad, *_ = client.predict(32, "gpu-like", True, "0.9, 2", 96, api_name="/playground")
    assert "⚠️" in bad and "[0, 1]" in bad and "your request" not in bad     # the row is dropped, the rest runs
    wide, *_ = client.predict(64, "gpu-like-knee", True, "", 512, api_name="/playground")
    narrow, *_ = client.predict(64, "gpu-like-knee", True, "", 8, api_name="/playground")
    mean = lambda s: float(s.split("mean ℓ = ")[1].split("**")[0])  # noqa: E731
    assert "knee 8" in narrow and mean(narrow) < mean(wide)            # an early knee: fewer free tokens
    odd = playground_view(res, 64, "gpu-like-knee", True, "", 9999).summary  # past the slider: clipped, said so
    assert "out of range" in odd and "knee 512" in odd


def test_calibration_before_and_after_sts(client):
    chart, table = client.predict(0, True, api_name="/calibration")
    spec = plot_spec(chart)
    assert "Reliability" in title_of(spec) and len(spec["hconcat"]) == 7
    assert "ECE after STS" in table and "T_k" in table and table.count("\n") >= 8
    chart, table = client.predict(3, False, api_name="/calibration")
    spec = plot_spec(chart)
    assert "T_k" not in table and "ECE raw" in table
    assert "after STS" not in json.dumps(spec["datasets"])           # only the raw stage is drawn


def test_frontier_is_cached_per_session(client):
    t0 = time.perf_counter()
    frontier, budget, summary = client.predict("gpu-like", api_name="/frontier")
    first = time.perf_counter() - t0
    assert "Throughput" in title_of(plot_spec(frontier)) and "budget" in title_of(plot_spec(budget))
    assert "hardware-aware" in summary and "synthetic" in summary
    policies = {row["policy"] for rows in plot_spec(frontier)["datasets"].values() for row in rows}
    assert {"fixed-1", "hardware-aware", "async-global"} <= policies
    t0 = time.perf_counter()
    again = client.predict("gpu-like", api_name="/frontier")
    assert again[2] == summary and time.perf_counter() - t0 < first  # same session: from the session's cache


def test_recorded_traces_feed_the_model_free_tabs(tiny, tmp_path):
    _, res = tiny
    for i in range(4):                                                # traces with confidences (random drafter)
        library_decode(res, "abcabc", "random", temperature=1.0, max_new=16, seed=i).to_json(
            str(tmp_path / f"dspark_T1_{i:04d}.json"))
    library_decode(res, "ababab", "lookup", max_new=8).to_json(str(tmp_path / "lookup_T0_0000.json"))
    (tmp_path / "broken.json").write_text("{")
    rec = load_recorded(None, tmp_path)
    assert not rec.synthetic and len(rec.traces) == 4 and "recorded" in rec.note
    assert rec.gamma == 4 and rec.conf_rows and all(len(c) == 4 for c in rec.conf_rows)
    cal = build_calibration(rec)
    assert "out of sample" in cal.note and cal.conf.shape[1] == 4
    assert load_recorded(None, tmp_path / "nothing").synthetic


# -- replay ----------------------------------------------------------------------------------------------------
def test_replay_a_saved_trace(client, tiny, tmp_path):
    _, res = tiny
    tr = library_decode(res, "abcabcabc", "random", temperature=1.0, max_new=20, seed=5)
    path = tmp_path / "saved.json"
    tr.to_json(str(path))
    slider, status, strip, round_chart, path_chart = client.predict(handle_file(str(path)), api_name="/replay_load")
    n = len(tr.rounds)
    assert slider["maximum"] == n - 1 and slider["value"] == n - 1
    assert f"Round {n} of {n}" in status and "Loaded" in status
    assert strip.count('class="dsv-sep"') == n                        # every round's boundary
    for r in tr.rounds:
        assert f">{html.escape(r.bonus_text)}<" in strip             # its text, token by token
    assert title_of(plot_spec(round_chart)) == f"Round {n - 1}: drafted 4, verified ℓ = {tr.rounds[-1].ell}, " \
                                                f"accepted m = {tr.rounds[-1].accepted}"
    assert "Admission path" in title_of(plot_spec(path_chart))
    status, strip, round_chart, _ = client.predict(0, api_name="/replay_round")   # same session's trace
    assert f"Round 1 of {n}" in status and strip.count('class="dsv-sep"') == 1
    assert title_of(plot_spec(round_chart)).startswith("Round 0:")
    _, no_pruned, _, _ = client.predict(n - 1, False, api_name="/replay_round")
    assert "dsv-pruned" not in no_pruned and no_pruned.count('class="dsv-sep"') == n


def test_replay_rejects_invalid_files(client, tmp_path):
    cases = {"notjson.json": b"hello", "list.json": b"[1, 2, 3]", "binary.json": bytes(range(256)),
             "wrong.json": json.dumps({"meta": {}, "rounds": [{"index": 0}]}).encode(),
             "badjson.json": b'{"meta": '}
    for name, body in cases.items():
        p = tmp_path / name
        p.write_bytes(body)
        out = client.predict(handle_file(str(p)), api_name="/replay_load")
        slider, status = out[0], out[1]
        assert "Could not open this file" in status, (name, status)
        assert slider.get("visible") is False
    status, *_ = client.predict(1, api_name="/replay_round")          # nothing loaded: a hint, no crash
    assert "Upload a Trace JSON" in status


def test_replay_last_live_run(client):
    out = client.predict(api_name="/replay_last")                      # fresh session: nothing yet
    assert "No live run yet" in out[1]
    _, _, _, _, trace_path = client.predict(*decode_args("abcabc", "random", max_new=12), api_name="/decode")
    tr = Trace.from_json(trace_path)
    slider, status, strip, *_ = client.predict(api_name="/replay_last")
    assert f"Round {len(tr.rounds)} of {len(tr.rounds)}" in status and "last live run" in status
    assert slider["maximum"] == max(1, len(tr.rounds) - 1)


# -- several users ---------------------------------------------------------------------------------------------
def test_eight_concurrent_sessions_get_their_own_results(tiny):
    url, res = tiny
    letters = "abcdefghijklmnopqrstuvwxyz"
    settings = [dict(prompt=letters[i:i + 5] * (2 + i % 3), drafter=("random", "lookup")[i % 2],
                     temperature=0.0, max_new=12 + 2 * i, load=1 + i % 4,
                     profile=("gpu-like", "jagged")[i % 2], compare=i in (0, 5), seed=100 + i,
                     show_pruned=True, fallback=False) for i in range(8)]
    results, errors = [None] * 8, []
    barrier = threading.Barrier(8)

    def user(i):
        try:
            c = Client(url, verbose=False)
            barrier.wait(timeout=60)
            results[i] = c.predict(*settings[i].values(), api_name="/decode")
        except Exception as e:                                        # noqa: BLE001
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=user, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for i, s in enumerate(settings):
        status, strip, _, stats, trace_path = results[i]
        assert "Finished" in status, status
        tr = Trace.from_json(trace_path)
        want = plain_generate(res.target, s["prompt"], max_new_tokens=s["max_new"])
        assert tr.meta["prompt"] == s["prompt"] and tr.meta["seed"] == s["seed"]
        assert tr.text() == want.text() and tr.output_ids == want.output_ids, i
        assert ("**plain**" in stats) == s["compare"]


# -- the real embedded target ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_real_target_decode(real_target):
    demo = app.build_demo(real_target)                               # every drafter that loads (lookup at least)
    res = demo.dspark_resources
    assert "lookup" in res.drafters
    for name in set(DRAFTER_ORDER) - set(res.drafters):
        assert name in res.missing                                   # not shipped yet: listed, not offered
    url = serve(demo)
    try:
        c = Client(url, verbose=False)
        prompt = "Write a Python function that returns the n-th Fibonacci number."
        status, strip, chart, stats, trace_path = c.predict(prompt, "lookup", 0.0, 24, 4, "gpu-like", True, 0,
                                                            api_name="/decode")
        assert "Finished" in status and "dsv-tok" in strip
        assert "✓ yes" in stats                                      # greedy: identical to plain decoding
        tr = Trace.from_json(trace_path)
        assert tr.text() == plain_generate(real_target, prompt, max_new_tokens=24).text()
        summary, lengths, *_ = c.predict(64, "jagged", True, "", 96, api_name="/playground")
        assert "R = 64**" in summary
    finally:
        demo.close()


def test_prompt_truncation_keeps_the_end(real_target):
    text = "First sentence. " + " ".join(f"word{i}" for i in range(3000)) + " Final question: what is 2+2?"
    ids, used, notice = prepare_prompt(real_target, text, 64, 1024)
    assert len(ids) <= 1024 - 64 and notice and "truncated" in notice
    assert used.endswith("Final question: what is 2+2?") and text.endswith(used)
    assert ids == real_target.chat_ids(used)
    ids2, used2, notice2 = prepare_prompt(real_target, "Hi there", 64, 1024)
    assert notice2 is None and used2 == "Hi there"
    with pytest.raises(ValueError, match="empty"):
        prepare_prompt(real_target, " \n ", 64, 1024)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_live_decode_is_plain_decoding_on_every_example_prompt(dtype):
    """The Live decode tab at T = 0, with the app's default drafter, policy, profile and fallback, reports the text
    of plain decoding on every example prompt, at fp32 and at bf16 (one arithmetic at every forward width)."""
    from dspark_viz.fast import lean
    from dspark_viz.model.target import find_embedded_gguf, load_target
    from dspark_viz.ui.app.resources import load_resources

    try:
        find_embedded_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    target = load_target(device="cpu", dtype=dtype)
    if dtype == "bf16" and (target.paths.matmul != "skinny-kernel" or not lean.fused(target.model)):
        pytest.skip("bf16 width invariance needs the fused few-token path (kernel or fused layers off here)")
    res = load_resources(target, traces=[], trace_source=None)
    drafter = next(iter(res.drafters))
    for _, prompt in res.examples:
        final = list(live_decode(res, prompt, drafter, temperature=0.0, max_new_tokens=48, compare=True))[-1]
        assert "✓ yes" in final.stats, (drafter, prompt[:40], final.stats)
