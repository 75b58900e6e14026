"""The position weights of the drafter loss: the paper's w_k = exp(−(k−1)/γ) against DeepSpec's exp(−k/4).

    .venv/bin/python benchmarks/ablate_position_weights.py --corpus corpus/answers --steps 1000 --threads 1 \
        --json docs/data/position_weights.json

Every term of the loss is normalised by Σ_k w_k, so exp(−k/4) trains exactly as exp(−(k−1)/4): the two arms differ
in the decay alone (γ = 7 against 4: the paper's weights fall more slowly over the block). Both arms train the same
DSpark-Markov (same seed, data, steps and recipe, features computed online from the corpus) and are then scored on
the same held-out corpus sequences (the trainer's validation split, never trained on), the same blocks for both:
τ_est (1 + Σ_k Π_{i≤k} (1 − TV_i), the expected accepted length at T = 1 estimated from the total variation to the
target) and per-slot acceptance, with a paired bootstrap interval of the difference over sequences. Resumable:
each arm's run folder keeps its checkpoint.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dspark_viz.drafters.neural import load_drafter_file  # noqa: E402
from dspark_viz.fast.tune import cpu_model_and_flags  # noqa: E402
from dspark_viz.model.target import load_target  # noqa: E402
from dspark_viz.settings import cache_dir  # noqa: E402
from dspark_viz.train.config import TrainConfig  # noqa: E402
from dspark_viz.train.losses import position_weights  # noqa: E402
from dspark_viz.train.online import CorpusFeatures, with_features  # noqa: E402
from dspark_viz.train.trainer import _anchors, forward_blocks, on_device, train  # noqa: E402

ARMS = {"paper": None, "deepspec": 4.0}          # decay D of w_k = exp(−(k−1)/D); None: D = γ


@torch.no_grad()
def per_sequence(model, seqs: list[dict], blocks: int, seed: int = 1234) -> dict[str, np.ndarray]:
    """τ_est and per-slot acceptance (1 − TV) of each sequence's ``blocks`` random blocks (the same blocks for
    every model: the anchors depend on the sequence's index and the seed alone)."""
    model.eval()
    dev = model.W_vd.device
    tau, acc = [], []
    for i, s in enumerate(seqs):
        s = on_device(s, dev)
        a = _anchors(s, blocks, torch.Generator().manual_seed(seed + i)).to(dev)
        logits, _, _, p_t, m = forward_blocks(model, [s], [a])
        tv = 0.5 * ((torch.softmax(logits.float(), -1) - p_t).abs().sum(-1) + (1 - p_t.sum(-1)).clamp_min(0))
        surv = ((1 - tv).clamp(0, 1) * m).cumprod(-1)                                     # (N, γ)
        tau.append(float((1 + surv.sum(-1)).mean()))
        acc.append((((1 - tv) * m).sum(0) / m.sum(0).clamp_min(1)).tolist())
    return {"tau": np.array(tau), "acc": np.array(acc)}


def paired_interval(d: np.ndarray, n_boot: int = 4000, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), (n_boot, len(d)))].mean(1)
    return [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="corpus/answers")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--n-layers", type=int, default=1)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seqs-per-step", type=int, default=4)
    ap.add_argument("--blocks-per-seq", type=int, default=64)
    ap.add_argument("--val-seqs", type=int, default=256)
    ap.add_argument("--max-seqs", type=int, default=None, help="train on the first N corpus answers only")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--runs", default=None, help="run folders (default $DSPARK_CACHE/ablations/position_weights)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    runs = Path(a.runs) if a.runs else cache_dir() / "ablations" / "position_weights"
    target = load_target(dtype="fp32")
    store = CorpusFeatures(load_target(dtype="bf16"), a.corpus, limit=a.max_seqs)
    tr, val = store.split()
    val = val[:a.val_seqs]
    t0 = time.perf_counter()
    for arm, decay in ARMS.items():
        tc = TrainConfig(steps=a.steps, lr=a.lr, seqs_per_step=a.seqs_per_step, blocks_per_seq=a.blocks_per_seq,
                         decay=decay, precision=a.precision, compile="off", ckpt_every=max(a.steps // 4, 1))
        train(target, "dspark", None, runs / arm, runs / f"{arm}.json", tc, cfg_overrides={"n_layers": a.n_layers},
              store=store)
    train_s = time.perf_counter() - t0
    val = with_features(val)                       # the held-out features once, for both arms
    got = {arm: per_sequence(load_drafter_file(runs / f"{arm}.json", target).model, val, a.blocks_per_seq)
           for arm in ARMS}
    gamma = got["paper"]["acc"].shape[1]
    d = got["deepspec"]["tau"] - got["paper"]["tau"]
    out = {"command": " ".join(["benchmarks/ablate_position_weights.py", *(argv or sys.argv[1:])]),
           "cpu": cpu_model_and_flags()[0] or platform.machine(), "torch": torch.__version__,
           "steps": a.steps, "n_layers": a.n_layers, "train_sequences": len(tr), "val_sequences": len(val),
           "train_minutes": round(train_s / 60, 1),
           "weights": {arm: [round(float(w), 4) for w in position_weights(gamma, dec)] for arm, dec in ARMS.items()},
           "arms": {arm: {"tau_est": round(float(g["tau"].mean()), 4),
                          "acceptance_by_slot": [round(float(x), 4) for x in g["acc"].mean(0)]}
                    for arm, g in got.items()},
           "tau_deepspec_minus_paper": round(float(d.mean()), 4),
           "interval_95": [round(x, 4) for x in paired_interval(d)]}
    lo, hi = out["interval_95"]
    out["verdict"] = ("deepspec" if lo > 0 else "paper" if hi < 0 else "not resolved")
    print(json.dumps(out, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
