"""The live engine under load, measured: R requests submitted together, for each R, with the drafter and with plain
decoding in the same engine, interleaved — the engine's throughput and each request's speed, beside what the
trace-driven simulation (serving/simulate.py) predicts for the same R on this machine's profile.

Legend: R requests decoded at once, B tokens a verification forward holds.

Throughput: committed tokens (all requests) per second of the engine's rounds (prefills excluded). Per-user speed:
each request's tokens after its first, over the seconds from its first token to its end, averaged over requests.
"""
from __future__ import annotations

import statistics
import time

from ..cost import profile_for
from .engine import LiveEngine


def bench_prompts(path=None, every: int = 7) -> list[str]:
    """The prompts an engine bench decodes: every ``every``-th first turn of a {"turns": [...]} JSONL file (default:
    the shipped evaluation prompts, one domain after another)."""
    from ..datasets.prompts import load_prompts
    from ..settings import assets

    recs = load_prompts(path or assets("prompts", "eval.jsonl"))
    return [r["turns"][0] for r in recs[::every]] or [r["turns"][0] for r in recs]


def run_once(target, drafter, prompts: list[str], max_new_tokens: int, temperature: float, seed: int,
             sps=None) -> dict:
    """One engine decoding every prompt at once (scheduling on ``sps``, default the target's profile) → its
    figures."""
    eng = LiveEngine(target, drafter, temperature=temperature, max_live=max(len(prompts), 1), sps=sps)
    jobs = [eng.submit(p, max_new_tokens=max_new_tokens, seed=seed + i, diagnostics=False)     # as `bench`: no
            for i, p in enumerate(prompts)]                                                     # chart top-k
    t0 = time.perf_counter()
    eng.run_until_idle()
    wall = time.perf_counter() - t0
    for j in jobs:
        j.result()
    per_user = [(j.trace.n_generated - 1) / (j.t_end - j.t_first) for j in jobs if j.t_end > j.t_first]
    return {"throughput": eng.throughput(), "per_user": statistics.mean(per_user) if per_user else float("nan"),
            "tokens": sum(r.committed for r in eng.history), "rounds": len(eng.history), "wall_s": wall,
            "mean_B": statistics.mean(r.B for r in eng.history) if eng.history else float("nan"),
            "max_R": max((r.R for r in eng.history), default=0)}


def engine_bench(target, drafter, prompts: list[str], Rs=(1, 2, 4, 8), max_new_tokens: int = 64,
                 temperature: float = 0.0, repeats: int = 1, seed: int = 0, log=print, sps=None) -> list[dict]:
    """For each R and repeat: the drafter's engine and plain decoding's engine on the same R prompts, one after the
    other (interleaved, so a busy machine slows both alike), Algorithm 1 scheduling on ``sps`` (default the
    target's profile). → one row per (R, method, repeat)."""
    if not prompts:
        raise ValueError("no prompts to decode")
    if any(not 1 <= R <= 64 for R in Rs):
        raise ValueError(f"R must lie in 1…64, got {list(Rs)}")
    for dr in (None, drafter):                   # warm-up, not kept: the GEMM and attention shapes of each width
        run_once(target, dr, [prompts[i % len(prompts)] for i in range(max(Rs))], 8, temperature, seed, sps)
    rows = []
    for rep in range(repeats):
        for R in Rs:
            batch = [prompts[(rep * 7 + i) % len(prompts)] for i in range(R)]
            for method, dr in (("plain", None), (drafter.name, drafter)) if rep % 2 == 0 else \
                    ((drafter.name, drafter), ("plain", None)):
                got = run_once(target, dr, batch, max_new_tokens, temperature, seed + 100 * rep, sps)
                rows.append({"R": R, "method": method, "repeat": rep, **got})
                log(f"R = {R} {method:>14}: {got['throughput']:7.1f} tok/s in all, {got['per_user']:6.1f} per user "
                    f"(mean B {got['mean_B']:.1f}, R seen {got['max_R']})")
    return rows


def summarize(rows: list[dict], drafter_name: str, sim: dict[int, float] | None = None) -> list[dict]:
    """Per R: median throughput and per-user speed of each method, the drafter's gain over plain decoding and over
    its own R = 1, and the simulation's prediction where given."""
    out, base = [], None
    for R in sorted({r["R"] for r in rows}):
        med = {m: {k: statistics.median(r[k] for r in rows if r["R"] == R and r["method"] == m)
                   for k in ("throughput", "per_user")} for m in ("plain", drafter_name)}
        base = base if base is not None else med[drafter_name]["throughput"]
        out.append({"R": R, "throughput": med[drafter_name]["throughput"], "per_user": med[drafter_name]["per_user"],
                    "plain_throughput": med["plain"]["throughput"], "plain_per_user": med["plain"]["per_user"],
                    "x_plain": med[drafter_name]["throughput"] / med["plain"]["throughput"],
                    "x_R1": med[drafter_name]["throughput"] / base,
                    "sim_throughput": (sim or {}).get(R)})
    return out


def simulated(target, traces, Rs, drafter: str = "dspark", n_rounds: int = 200, profile=None) -> dict[int, float]:
    """The trace-driven simulation's throughput (tokens/s, hardware-aware) at each R on ``profile`` (default
    ``target``'s), with the engine's drafting: every request's drafting call costing what the profile measured for
    ``drafter`` (its meta.draft_s), one after another (R calls a step), and none in a step where Algorithm 1 would
    verify nothing (``Policy.verifies_nothing``)."""
    from ..scheduler import HardwareAware
    from .simulate import sweep
    prof = profile if profile is not None else profile_for(target)
    draft_s = float((getattr(prof, "meta", None) or {}).get("draft_s", {}).get(drafter, 0.0))
    out = {}
    for R in Rs:
        step_draft = 0.0 if HardwareAware().verifies_nothing(R, prof) else R * draft_s
        df = sweep(traces, ["hardware-aware"], prof, Rs=[R], n_rounds=n_rounds, draft_time=step_draft)
        out[int(R)] = float(df.throughput.iloc[0])
    return out


__all__ = ["bench_prompts", "engine_bench", "run_once", "simulated", "summarize"]
