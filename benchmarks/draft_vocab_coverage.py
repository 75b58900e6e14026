"""How much of the target's probability a draft vocabulary of each size leaves out, and what a larger one costs.

A drafter proposes only tokens of its draft vocabulary V_d, so at every position the probability of
accepting its draft is at most Σ_{v∈V_d} p_target(v) = 1 − (mass outside V_d). This reads the cached
target hidden states of a feature cache (``dspark-viz data``), builds V_d of each size from the training
answers' token counts (as the trainer does), and reports, on the held-out answers, the mean mass outside
and the share of positions whose greedy target token lies outside. The cost side: the drafter's per-block
vocabulary product h·W_vdᵀ (γ rows) timed at each size.

    .venv/bin/python benchmarks/draft_vocab_coverage.py --data DIR --sizes 4096,8192,16384,32768
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from dspark_viz.model.target import load_target
from dspark_viz.train.data import FeatureStore
from dspark_viz.train.trainer import build_draft_vocab


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--sizes", default="4096,8192,16384,32768")
    ap.add_argument("--max-positions", type=int, default=200_000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    target = load_target(dtype="fp32")
    tr, val = FeatureStore(a.data).split()
    val = val or tr
    W = target.lm_head_weight.detach().float()                                          # (V, d)
    h = torch.cat([s["hidden"][s["prompt_len"] - 1:s["n"] - 1] for s in val])[: a.max_positions].float()  # (P, d)
    lse = torch.cat([s["lse"][s["prompt_len"] - 1:s["n"] - 1] for s in val])[: a.max_positions].float()
    nxt = torch.cat([s["ids"][s["prompt_len"]:s["n"]] for s in val])[: a.max_positions]
    rows = []
    for size in [int(x) for x in a.sizes.split(",")]:
        vd = build_draft_vocab(tr, size, set(target.stop_ids), target.vocab_size)
        inside = torch.zeros(h.shape[0])
        for i in range(0, h.shape[0], 4096):
            inside[i:i + 4096] = torch.exp(h[i:i + 4096] @ W[vd].T - lse[i:i + 4096, None]).sum(-1)
        greedy = torch.cat([(h[i:i + 4096] @ W.T).argmax(-1) for i in range(0, h.shape[0], 4096)])
        member = torch.zeros(target.vocab_size, dtype=torch.bool)
        member[vd] = True
        Wd, x = W[vd].contiguous(), torch.randn(7, W.shape[1])
        ts = []
        for _ in range(30):
            t0 = time.perf_counter()
            torch.nn.functional.linear(x, Wd)
            ts.append(time.perf_counter() - t0)
        rows.append({"draft_vocab": size, "mean_mass_outside": round(float(1 - inside.mean()), 4),
                     "answer_tokens_outside": round(float((~member[nxt]).float().mean()), 4),
                     "greedy_target_token_outside": round(float((~member[greedy]).float().mean()), 4),
                     "vocab_product_ms_7_rows": round(1000 * statistics.median(ts), 3)})
        print(json.dumps(rows[-1]))
    res = {"positions": int(h.shape[0]), "train_sequences": len(tr), "held_out_sequences": len(val),
           "threads": torch.get_num_threads(), "rows": rows}
    if a.json:
        open(a.json, "w").write(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
