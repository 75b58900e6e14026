"""Full-block evaluation of a drafter (fixed ℓ = γ, as the paper's Table 1) over prompt files.

Legend: γ block size, τ mean committed tokens per round, k 1-based slot.
Prompts are ``{"turns": [...], "domain": ...}`` JSONL; the first turn is the request.
"""
from __future__ import annotations

import json
from pathlib import Path

from tqdm import tqdm

from . import metrics
from .decode import speculative_generate
from .scheduler import FixedLength
from .train.prompts import load_prompts

SHARED_BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "bench"


def bench_files() -> list[Path]:
    """../shared/bench/*.jsonl when present (gsm8k = math, humaneval = code, mt-bench = chat)."""
    return sorted(SHARED_BENCH.glob("*.jsonl")) if SHARED_BENCH.exists() else []


def load_eval_prompts(paths, domain: str | None = None, per_domain: int | None = None) -> list[dict]:
    recs: list[dict] = []
    for p in paths:
        recs += load_prompts(p)
    if domain:
        recs = [r for r in recs if r.get("domain") == domain]
    if per_domain:
        seen: dict[str, int] = {}
        out = []
        for r in recs:
            d = r.get("domain", "mixed")
            if seen.get(d, 0) < per_domain:
                out.append(r)
                seen[d] = seen.get(d, 0) + 1
        recs = out
    return recs


def evaluate_drafter(target, drafter, records: list[dict], temperature: float = 0.0, max_new_tokens: int = 128,
                     seed: int = 0, traces_dir: str | Path | None = None, policy=None, progress: bool = True,
                     max_prompt_tokens: int = 1024) -> dict:
    """Decode every record with full-block verification; returns the summary and the traces."""
    policy = policy or FixedLength(drafter.gamma)
    traces = []
    it = tqdm(records, desc=f"eval {drafter.name} T={temperature}", disable=not progress)
    for i, r in enumerate(it):
        ids = target.chat_ids(r["turns"][0])[-max_prompt_tokens:]
        tr = speculative_generate(target, drafter, prompt_ids=ids, policy=policy, temperature=temperature,
                                  max_new_tokens=max_new_tokens, seed=seed + i,
                                  meta={"domain": r.get("domain", "mixed"), "prompt": r["turns"][0][:200]})
        traces.append(tr)
        if progress:
            it.set_postfix(tau=f"{metrics.tau(traces):.2f}")
        if traces_dir is not None:
            Path(traces_dir).mkdir(parents=True, exist_ok=True)
            tr.to_json(str(Path(traces_dir) / f"{drafter.name}_T{temperature:g}_{i:04d}.json"))
    s = metrics.summary(traces)
    return {"drafter": drafter.name, "temperature": temperature, "max_new_tokens": max_new_tokens,
            "n_prompts": len(records), "tau": s["tau"], "per_domain": s["per_domain"], "survival": s["survival"],
            "conditional_acceptance": s["conditional_acceptance"], "rounds": s["rounds"], "traces": traces}


def format_report(res: dict) -> str:
    lines = [f"{res['drafter']}  T={res['temperature']:g}  τ = {res['tau']:.3f}  ({res['rounds']} rounds, "
             f"{res['n_prompts']} prompts)"]
    for d, v in res["per_domain"].items():
        lines.append(f"  {d:<6} τ = {v['tau']:.3f}  rounds {v['rounds']}")
    lines.append("  k          " + " ".join(f"{k:>5d}" for k in range(1, len(res["survival"]) + 1)))
    lines.append("  survival   " + " ".join(f"{x:5.2f}" for x in res["survival"]))
    lines.append("  cond. acc. " + " ".join(f"{x:5.2f}" for x in res["conditional_acceptance"]))
    return "\n".join(lines)


def to_json(res: dict, path: str | Path) -> None:
    body = {k: v for k, v in res.items() if k != "traces"}
    Path(path).write_text(json.dumps(body, indent=1))
