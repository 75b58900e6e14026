"""End-to-end alignment check of the drafter pipeline: features, labels and inference line up.

A drafter trained on the target's greedy answers to a few dozen prompts must, decoding those same prompts
greedily through the real loop (full block), accept nearly every slot-1 draft: it has seen exactly these
contexts. A low figure means the training data and the decode loop disagree (an off-by-one in positions,
features of the wrong layer, labels shifted), not that the drafter is small.

    .venv/bin/python benchmarks/alignment_check.py --algo dspark --prompts 50 --steps 600 --json out.json

Everything it writes lives under ``--work`` (default: $DSPARK_CACHE/alignment).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from dspark_viz import metrics
from dspark_viz.drafters.neural import load_drafter_file
from dspark_viz.evaluation.full_block import evaluate_drafter
from dspark_viz.model.target import load_target
from dspark_viz.datasets.prompts import load_prompts
from dspark_viz.settings import assets, cache_dir
from dspark_viz.train.config import TrainConfig
from dspark_viz.train.data import FeatureStore, build_dataset
from dspark_viz.train.trainer import train


def balanced(recs: list[dict], n: int) -> list[dict]:
    """The first records of each domain in turn until n."""
    by: dict[str, list[dict]] = {}
    for r in recs:
        by.setdefault(r.get("domain", "mixed"), []).append(r)
    out, i = [], 0
    while len(out) < n and any(i < len(v) for v in by.values()):
        out += [v[i] for v in by.values() if i < len(v)][: n - len(out)]
        i += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", default="dspark")
    ap.add_argument("--prompts", type=int, default=50)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--n-layers", type=int, default=1)
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    work = Path(a.work) if a.work else cache_dir() / "alignment"
    work.mkdir(parents=True, exist_ok=True)
    target = load_target(dtype="fp32")
    recs = balanced(load_prompts(assets("prompts", "train.jsonl")), a.prompts)
    pfile = work / "prompts.jsonl"
    pfile.write_text("".join(json.dumps(r) + "\n" for r in recs))
    t0 = time.perf_counter()
    feat = build_dataset(target, pfile, work / "data", temperature=0.0, max_new_tokens=a.max_new_tokens,
                         batch_size=16, finished_only=True)
    store = FeatureStore(feat)
    t_data = time.perf_counter() - t0
    tc = TrainConfig(steps=a.steps, lr=a.lr, warmup=20, seqs_per_step=4, blocks_per_seq=16,
                     ckpt_every=max(a.steps // 3, 1))
    out = work / f"{a.algo}.json"
    t0 = time.perf_counter()
    # every sequence trains (no held-out split matters here: the check decodes the training prompts)
    train(target, a.algo, feat, work / f"run_{a.algo}", out, tc, store=store, cfg_overrides={"n_layers": a.n_layers},
          init=None)
    t_train = time.perf_counter() - t0
    drafter = load_drafter_file(out, target, name=f"{a.algo} (alignment)")
    tr, _ = store.split()
    trained = {target.decode(s["ids"][:s["prompt_len"]].tolist()) for s in tr}
    seen = [r for r in recs if target.decode(target.chat_ids(r["turns"][0])) in trained]
    res = evaluate_drafter(target, drafter, seen, temperature=0.0, max_new_tokens=a.max_new_tokens, progress=False)
    acc = metrics.conditional_acceptance(res["traces"])
    summary = {"algo": a.algo, "prompts": len(recs), "answers_trained": len(store.seqs),
               "answer_tokens": store.n_tokens(), "prompts_decoded": len(seen), "steps": a.steps,
               "n_layers": a.n_layers, "lr": a.lr, "tau": round(res["tau"], 3), "rounds": res["rounds"],
               "conditional_acceptance": [round(x, 3) for x in acc], "data_s": round(t_data), "train_s": round(t_train)}
    print(json.dumps(summary, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
