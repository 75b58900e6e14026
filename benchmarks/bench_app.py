"""How responsive is the app? Three figures, printed (and optionally saved as JSON).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_app.py [--drafter NAME] [--max-new-tokens 64] [--json out.json]

1. cold start with the cached model: ``build_demo()`` (first load of the converted model from the disk cache,
   every drafter that loads) + ``launch()`` until the page answers HTTP 200 — Python imports of torch / gradio
   already done; target ≤ 15 s — and, for reference, a whole fresh ``python app.py`` process until the page answers
   (imports included).
2. a scheduler-playground slider move answered by the server: median of 20 ``/playground`` calls through
   gradio_client at 20 different loads (every one a cache miss), target ≤ 150 ms; then the same 20 again (memo hits).
3. UI work per live-decoding round beyond model time: time the Gradio callback spends per round (its yields,
   drawing included) minus the round's t_draft + t_verify + t_schedule (+ t_other, the library's bookkeeping),
   target ≤ 50 ms; plus the end-to-end overhead per round seen by a gradio_client user. Load R = 1: the request
   alone in the app's engine.
4. plain decoding's tokens/s as the app reports it (the /decode comparison run, a Gradio worker thread) against
   ``plain_generate`` in the main thread (what the command line runs), same prompt and length, alternating,
   three of each; target: the app within 10 % of the main thread.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dspark_viz.trace import Trace  # noqa: E402
from dspark_viz.ui.app.live import model_seconds  # noqa: E402
from dspark_viz.ui.app.playground import admission_view, playground_view  # noqa: E402

PROMPT = "Write a Python function that returns the n-th Fibonacci number, with a docstring and an example."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_page(url: str, timeout: float = 300.0, proc=None) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the app exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def pct(xs, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def process_cold_start() -> float:
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return wait_page(f"http://127.0.0.1:{port}/", proc=proc) - t0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def ui_per_round(demo, drafter: str, max_new: int) -> dict:
    """Drive the registered /decode callback in process; per round: gap between its yields − model time."""
    fn = next(f.fn for f in demo.fns.values() if f.api_name == "decode")
    res = demo.dspark_resources
    profile = next(iter(res.profiles))
    gaps, t_last, trace = [], None, None
    t_start = time.perf_counter()
    for out in fn(PROMPT, drafter, 0.0, max_new, 1, profile, False, 0):
        now = time.perf_counter()
        status = out[0]
        if isinstance(status, str) and status.startswith("**Round"):
            gaps.append(now - (t_last if t_last is not None else t_start))
        t_last = now
        if not isinstance(out[5], dict) and out[5] is not None:           # the final trace (state output)
            trace = out[5]
    if trace is None or len(trace.rounds) != len(gaps):
        raise RuntimeError(f"could not pair yields with rounds ({len(gaps)} yields)")
    ui, ui_strict = [], []
    for i, (g, r) in enumerate(zip(gaps, trace.rounds)):
        model = r.t_draft + r.t_verify + r.t_schedule + (trace.t_prefill if i == 0 else 0.0)
        ui_strict.append(1000 * (g - model))                             # model = draft + verify + schedule
        ui.append(1000 * (g - model - r.t_other))                        # also excluding drafter bookkeeping
    model_ms = 1000 * statistics.mean(r.t_draft + r.t_verify + r.t_schedule + r.t_other for r in trace.rounds)
    return dict(drafter=drafter, rounds=len(gaps), tokens=trace.n_generated, model_ms_per_round=model_ms,
                ui_ms_mean=statistics.mean(ui_strict), ui_ms_median=statistics.median(ui_strict),
                ui_ms_p90=pct(ui_strict, 0.9), ui_ms_mean_excl_t_other=statistics.mean(ui))


def end_to_end(url: str, drafter: str, max_new: int) -> dict:
    from gradio_client import Client

    c = Client(url, verbose=False)
    t0 = time.perf_counter()
    out = c.predict(PROMPT, drafter, 0.0, max_new, 1, "gpu-like", False, 0, api_name="/decode")
    wall = time.perf_counter() - t0
    tr = Trace.from_json(out[4])
    return dict(wall_s=wall, model_s=model_seconds(tr), rounds=len(tr.rounds),
                overhead_ms_per_round=1000 * (wall - model_seconds(tr)) / max(1, len(tr.rounds)))


def plain_app_vs_main(url: str, demo, drafter: str, max_new: int, repeats: int = 3) -> dict:
    """Plain decoding's tokens/s in the app's comparison run (parsed from its stats table) and plain_generate's in
    this process's main thread (the library's own seconds, prefill included, as the app measures), alternating."""
    import re

    from gradio_client import Client

    from dspark_viz.decode import plain_generate

    res, c = demo.dspark_resources, Client(url, verbose=False)
    app_tps, main_tps = [], []
    for _ in range(repeats):
        stats = c.predict(PROMPT, drafter, 0.0, max_new, 1, "gpu-like", True, 0, api_name="/decode")[3]
        m = re.search(r"\| \*\*plain\*\* \| (\d+) \| \d+ \| ([\d.]+) \| \*\*([\d.]+)\*\* \|", stats)
        if m is None:
            raise RuntimeError("no plain decoding row in the app's stats")
        app_tps.append(float(m.group(3)))
        tr = plain_generate(res.target, PROMPT, max_new_tokens=max_new)
        main_tps.append(tr.n_generated / model_seconds(tr))
    a, b = statistics.median(app_tps), statistics.median(main_tps)
    return dict(app_tok_s=a, main_tok_s=b, ratio=a / b, app_runs=app_tps, main_runs=main_tps)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drafter", default=None, help="live-decoding drafter (default: the app's first)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--no-process", action="store_true", help="skip the fresh-process cold start")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    from gradio_client import Client

    import app

    out: dict = {"threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                 "loadavg_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    # no warm-up: build_demo's first load_target() reads the converted model from the disk cache
    port = free_port()
    t0 = time.perf_counter()
    demo = app.build_demo()
    t_built = time.perf_counter()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True)
    url = f"http://127.0.0.1:{port}/"
    t_page = wait_page(url)
    out["cold_start_s"] = t_page - t0
    out["build_demo_s"] = t_built - t0
    print(f"cold start (build_demo + launch → page answers): {out['cold_start_s']:.2f} s "
          f"(build_demo {out['build_demo_s']:.2f} s)  target ≤ 15 s")
    try:
        c = Client(url, verbose=False)
        profile = next(iter(demo.dspark_resources.profiles))
        loads = [3 + 12 * i for i in range(20)]                          # 20 distinct loads: no memo hits
        c.predict(2, profile, True, api_name="/playground")              # warm the connection
        for name in ("cold", "warm"):                                    # warm: the same 20 loads again
            answer, full = [], []
            for R in loads:
                t = time.perf_counter()
                c.predict(R, profile, True, api_name="/playground")      # ℓ per request (text + bar chart)
                answer.append(1000 * (time.perf_counter() - t))
                c.predict(R, profile, True, api_name="/playground_path")  # then the Θ-curve chart
                full.append(1000 * (time.perf_counter() - t))
            out[f"playground_ms_median_{name}"] = statistics.median(answer)
            out[f"playground_ms_p90_{name}"] = pct(answer, 0.9)
            out[f"playground_full_ms_median_{name}"] = statistics.median(full)
        res = demo.dspark_resources
        other = [p for p in res.profiles if p != profile][0]             # fresh memo keys: in-process callback time
        ts_ans, ts_path = [], []
        for R in loads:
            t = time.perf_counter()
            playground_view(res, R, other, True)
            ts_ans.append(1000 * (time.perf_counter() - t))
            t = time.perf_counter()
            admission_view(res, R, other, True)
            ts_path.append(1000 * (time.perf_counter() - t))
        out["playground_callback_ms_median"] = statistics.median(ts_ans)
        out["playground_path_callback_ms_median"] = statistics.median(ts_path)
        t = time.perf_counter()
        for _ in range(10):
            c.predict(1, api_name="/replay_round")                       # a trivial endpoint: the floor
        out["trivial_endpoint_ms"] = 100 * (time.perf_counter() - t)
        print(f"playground slider move (median of 20 via gradio_client): ℓ per request answered in "
              f"{out['playground_ms_median_cold']:.0f} ms at new loads (p90 {out['playground_ms_p90_cold']:.0f}), "
              f"{out['playground_ms_median_warm']:.0f} ms at loads seen before  target ≤ 150 ms")
        print(f"  with the Θ-curve chart: {out['playground_full_ms_median_cold']:.0f} ms new / "
              f"{out['playground_full_ms_median_warm']:.0f} ms seen; a trivial endpoint takes "
              f"{out['trivial_endpoint_ms']:.0f} ms here; the callbacks alone (in process, new loads): "
              f"{out['playground_callback_ms_median']:.0f} ms (ℓ) + {out['playground_path_callback_ms_median']:.0f} ms "
              f"(Θ chart)")
        drafter = a.drafter or next(iter(demo.dspark_resources.drafters))
        ui = ui_per_round(demo, drafter, a.max_new_tokens)
        out["live"] = ui
        print(f"live decoding UI work per round beyond model time ({drafter}, {ui['rounds']} rounds, model "
              f"{ui['model_ms_per_round']:.0f} ms/round): mean {ui['ui_ms_mean']:.1f} ms, median "
              f"{ui['ui_ms_median']:.1f} ms, p90 {ui['ui_ms_p90']:.1f} ms  target ≤ 50 ms")
        e2e = end_to_end(url, drafter, a.max_new_tokens)
        out["end_to_end"] = e2e
        print(f"  end to end through gradio_client: {e2e['wall_s']:.2f} s wall for {e2e['model_s']:.2f} s of model "
              f"time → {e2e['overhead_ms_per_round']:.0f} ms overhead per round")
        plain = plain_app_vs_main(url, demo, drafter, a.max_new_tokens)
        out["plain_app_vs_main"] = plain
        print(f"plain decoding as the app reports it: {plain['app_tok_s']:.1f} tok/s; plain_generate in the main "
              f"thread: {plain['main_tok_s']:.1f} tok/s → ×{plain['ratio']:.2f}  target ≥ 0.90")
    finally:
        demo.close()
    if not a.no_process:
        out["process_cold_start_s"] = process_cold_start()
        print(f"fresh `python app.py` process until the page answers (imports included): "
              f"{out['process_cold_start_s']:.2f} s")
    out["loadavg_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(f"machine: {out['cpus']} CPUs, torch threads {out['threads']}, load average "
          f"{out['loadavg_start']:.1f} → {out['loadavg_end']:.1f}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
