"""Full-block evaluation of a drafter (fixed ℓ = γ, as the paper's Table 1) over prompt files.

Legend: γ block size, τ mean committed tokens per round, k 1-based slot.
Prompts are ``{"turns": [...], "domain": ...}`` JSONL; the first turn is the request.
"""
from __future__ import annotations

import json
from pathlib import Path

from tqdm import tqdm

from .. import metrics
from ..datasets.prompts import bench_half, load_prompts
from ..decode import speculative_generate
from ..scheduler import FixedLength


def load_eval_prompts(paths, domain: str | None = None, per_domain: int | None = None,
                      half: str | None = None) -> list[dict]:
    """Records of the files, optionally one domain, one fixed half (datasets.prompts.bench_half: "select" /
    "report"), and at most ``per_domain`` per domain (the first ones, after the half is taken)."""
    recs: list[dict] = []
    for p in paths:
        recs += load_prompts(p)
    if half:
        recs = bench_half(recs, half)
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
                     max_prompt_tokens: int = 1024, batch: int = 1) -> dict:
    """Decode every record with full-block verification; returns the summary and the traces.

    ``batch`` > 1 decodes that many requests together (serving/batched.py on the live engine: one verify forward
    for all of them; request i keeps seed + i, so where the engine is exact the traces' tokens are those of the
    one-at-a-time loop), fewer and fuller forwards."""
    policy = policy or FixedLength(drafter.gamma)
    if not 1 <= batch <= 8:
        raise ValueError(f"batch must lie in 1…8, got {batch}")
    traces = []
    bar = tqdm(total=len(records), desc=f"eval {drafter.name} T={temperature}", disable=not progress)
    for i0 in range(0, len(records), batch):
        chunk = records[i0:i0 + batch]
        ids = [target.chat_ids(r["turns"][0])[-max_prompt_tokens:] for r in chunk]
        if batch == 1:
            out = [speculative_generate(target, drafter, prompt_ids=ids[0], policy=policy, temperature=temperature,
                                        max_new_tokens=max_new_tokens, seed=seed + i0)]
        else:
            from ..serving.batched import batched_generate

            out = batched_generate(target, drafter, prompt_ids=ids, policy=policy, temperature=temperature,
                                   max_new_tokens=max_new_tokens, seed=seed + i0).traces
        for j, (r, tr) in enumerate(zip(chunk, out)):
            tr.meta.update(domain=r.get("domain", "mixed"), prompt=r["turns"][0][:200])
            traces.append(tr)
            if traces_dir is not None:
                Path(traces_dir).mkdir(parents=True, exist_ok=True)
                tr.to_json(str(Path(traces_dir) / f"{drafter.name}_T{temperature:g}_{i0 + j:04d}.json"))
        bar.update(len(chunk))
        if progress:
            bar.set_postfix(tau=f"{metrics.tau(traces):.2f}")
    bar.close()
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
