"""How well could any confidence head rank prefix survival at this drafter's quality?

    python benchmarks/confidence_ceiling.py            # → docs/confidence_ceiling.json (+ results.md section)

On the held-out split of the training feature cache (`dspark-viz data`; the sequences no drafter trained
on), every block is drafted teacher-forced exactly as in training, and for each slot k the chance that the
draft survives verification at T = 1 is known exactly: c*_k = 1 − TV(p_d,k, p_t,k), the confidence head's
own training label (paper eq. 8). Prefix survival P(m ≥ k) is then Π_{i≤k} c*_i (conditional on the data's
prefix, as in training). The population AUROC of a score against those chances (calibration.expected_auroc)
is computed for
  - the shipped head: a_k = Π_{i≤k} c_i (raw; STS is fitted on rollouts, and ranks per position nearly alike),
  - the oracle: Π c*_i itself — the best any score that knows the chance but not the draw can do,
  - the draft distribution's own peak: Π max_v p_d,i(v), a score that needs no training at all.
This is in-distribution (the training data's prompts and T = 0.7 answers); the rollout AUROC of
docs/results.md is out of sample (the benchmark prompt folder, T = 1) and lower.

Then the serving question: what would HardwareAware gain with a perfect head? Each held-out block is
replayed as a round whose outcome m is drawn from its chances (slot k survives with probability c*_k,
``--replicas`` draws per block, seeded), once with c* as the confidences the scheduler sees (a perfect
head) and once with the shipped head's (fitted with STS on these rounds, in sample: the head's best case),
on the synthetic GPU-like profile; FixedLength and the oracle yardstick see the same rounds.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "confidence_ceiling.json"


def block_chances(model, seqs, blocks_per_seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    """→ c_star, conf, peak: (N, γ) each over every block of ``seqs`` (rows whose γ slots all lie in the data)."""
    from dspark_viz.train.losses import l1_distance
    from dspark_viz.train.trainer import _anchors, dspark_forward

    gen = torch.Generator().manual_seed(seed)
    out = {"c_star": [], "conf": [], "peak": []}
    with torch.no_grad():
        for s in seqs:
            logits, conf, _, p_t, mask = dspark_forward(model, s, _anchors(s, blocks_per_seq, gen))
            p_d = torch.softmax(logits.float(), -1)                                     # (N, γ, V_d)
            full = mask[:, -1] > 0                                                      # (N,) whole block valid
            out["c_star"].append((1 - 0.5 * l1_distance(p_d, p_t))[full])
            out["conf"].append(torch.sigmoid(conf.float())[full])
            out["peak"].append(p_d.max(-1).values[full])
    return {k: torch.cat(v).clamp(0, 1).numpy().astype(float) for k, v in out.items()}


def ceiling(ch: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """Per position k: mean chance of surviving to k, and the expected AUROC of each score for it."""
    from dspark_viz.calibration import expected_auroc

    surv = {k: np.cumprod(v, axis=1) for k, v in ch.items()}                          # (N, γ) prefix products
    g = surv["c_star"].shape[1]
    res = {"survival": [float(surv["c_star"][:, k].mean()) for k in range(g)],
           "mean_head_survival": [float(surv["conf"][:, k].mean()) for k in range(g)]}
    for name, key in (("auroc_head", "conf"), ("auroc_oracle", "c_star"), ("auroc_peak", "peak")):
        res[name] = [expected_auroc(surv[key][:, k], surv["c_star"][:, k]) for k in range(g)]
    return res


def replay_traces(scores: np.ndarray, m: np.ndarray, per_trace: int = 32) -> list:
    """Rounds (scores (N, γ) as calibrated confidences, outcomes m (N,)) → Traces of ``per_trace`` rounds,
    recorded as full-block verification, for serving.simulate.simulate."""
    from dspark_viz.trace import DraftToken, Round, Trace

    g = scores.shape[1]
    rounds = [Round(index=i, anchor=0, anchor_pos=i, ell=g, accepted=int(mi), bonus=0, bonus_text="",
                    bonus_source="residual" if mi < g else "target",
                    drafts=[DraftToken(k=k + 1, token=0, text="", p_draft=1.0, p_target=None,
                                       confidence=float(sc[k]), confidence_cal=float(sc[k]), survival=None,
                                       status="accepted" if k < mi else "rejected" if k == mi else "not_reached")
                            for k in range(g)])
              for i, (sc, mi) in enumerate(zip(scores, m))]
    return [Trace(meta={}, prompt_ids=[0], first_token=0, rounds=rounds[i:i + per_trace])
            for i in range(0, len(rounds), per_trace)]


def perfect_head_replay(ch: dict[str, np.ndarray], replicas: int, rounds: int, seed: int = 0) -> dict:
    """Headline ratios (HardwareAware over FixedLength(1), GPU-like profile) with the perfect head c*, with the
    shipped head after STS, and for the oracle yardstick, on outcomes drawn from c*."""
    from dspark_viz.calibration import fit_sts
    from dspark_viz.cost import gpu_like
    from dspark_viz.serving.simulate import headline, sweep

    rng = np.random.default_rng(seed)
    cs = np.repeat(ch["c_star"], replicas, 0)                                         # (N·r, γ)
    head = np.repeat(ch["conf"], replicas, 0)
    ok = rng.random(cs.shape) < cs                                                    # slot-wise survival draws
    m = np.where(ok.all(1), cs.shape[1], np.argmin(ok, 1))                            # (N·r,) first failure
    head_cal = fit_sts(head, m).apply(head)
    prof = gpu_like()
    fixed = [f"fixed-{k}" for k in range(1, cs.shape[1] + 1)]
    out = {"rounds_replayed": int(len(m)), "mean_accepted": float(m.mean()), "profile": prof.name}
    for name, sc in (("perfect_head", cs), ("shipped_head_sts", head_cal)):
        pols = ["hardware-aware"] + (fixed + ["oracle"] if name == "perfect_head" else ["fixed-1"])
        df = sweep(replay_traces(sc, m), pols, prof, n_rounds=rounds, seed=seed)
        h = headline(df)
        out[name] = {k: h[k] for k in ("throughput_gain_at_sla", "per_user_speedup_at_matched_throughput")}
        if name == "perfect_head":
            o = headline(df, policy="oracle")
            out["oracle"] = {k: o[k] for k in ("throughput_gain_at_sla", "per_user_speedup_at_matched_throughput")}
            out["perfect_head"]["min_ratio_vs_best_fixed"] = h["min_ratio_vs_best_fixed"]
    return out


def run(args) -> None:
    from dspark_viz.drafters import load_drafter
    from dspark_viz.model.target import cache_dir, load_target
    from dspark_viz.train.trainer import FeatureStore

    torch.set_num_threads(args.threads)
    feat = Path(args.data) if args.data else cache_dir() / "data" / "train"
    store = FeatureStore(feat)                              # a clear error when `dspark-viz data` never ran
    _, val = store.split()
    target = load_target(device="cpu", dtype="fp32")
    body = {"data": str(feat.name), "held_out_sequences": len(val), "blocks_per_seq": args.blocks_per_seq,
            "drafters": {}}
    for name in args.drafters:
        t0 = time.perf_counter()
        drafter = load_drafter(name, target)
        model = drafter.model.float()
        if getattr(model, "conf", None) is None:
            raise SystemExit(f"{name} has no confidence head")
        ch = block_chances(model, val, args.blocks_per_seq)
        res = ceiling(ch)
        res.update(blocks=int(ch["c_star"].shape[0]), sha256=str(drafter.card.get("sha256", ""))[:12])
        res["scheduling"] = perfect_head_replay(ch, args.replicas, args.rounds)
        body["drafters"][name] = res
        print(f"{name}: {res['blocks']} blocks, {time.perf_counter() - t0:.0f} s")
        for key in ("survival", "auroc_head", "auroc_oracle", "auroc_peak"):
            print(f"  {key:14s} " + " ".join(f"{x:.3f}" for x in res[key]))
        for key in ("shipped_head_sts", "perfect_head", "oracle"):
            r = res["scheduling"][key]
            print(f"  {key:17s} gain at SLA {r['throughput_gain_at_sla']:.3f}, per-user at matched throughput "
                  f"{r['per_user_speedup_at_matched_throughput']:.3f}")
    OUT.write_text(json.dumps(body, indent=1))
    print(f"wrote {OUT.relative_to(ROOT)}")


def measured_earlier(name: str, r: dict) -> bool:
    """Whether drafter ``name``'s record ``r`` was measured on another file than the shipped card names (its
    ``sha256`` prefix); False where no shipped card exists to compare with."""
    from dspark_viz.drafters.neural import ASSETS, SHIPPED

    card = ASSETS / f"{SHIPPED.get(name, name)}.json"
    now = json.loads(card.read_text()).get("sha256", "") if card.exists() else ""
    return bool(now) and not now.startswith(r.get("sha256", ""))


def markdown() -> list[str]:
    """The results.md section (empty when the script has not run)."""
    if not OUT.exists():
        return []
    d = json.loads(OUT.read_text())
    lines = ["## How good could the confidence head be? (ceiling)", "",
             f"`python benchmarks/confidence_ceiling.py`: {d['held_out_sequences']} held-out sequences of the "
             f"training cache (no drafter trained on them), {d['blocks_per_seq']} blocks each, drafted "
             "teacher-forced as in training. Each slot's chance of surviving verification at T = 1 is known "
             "exactly, c*_k = 1 − TV(p_d, p_t) (the head's training label), so prefix survival is Π c*_i and the "
             "AUROC of a score is its population value over those chances (`calibration.expected_auroc`). "
             "*Oracle* scores with Π c*_i itself: no score that knows the chance but not the draw ranks better. "
             "*Draft peak* is Π max p_d, which needs no training. In-distribution, so higher than the out-of-"
             "sample rollout AUROC above.", ""]
    earlier = {name for name, r in d["drafters"].items() if measured_earlier(name, r)}
    for name, r in d["drafters"].items():
        g = len(r["survival"])
        stale = "" if name not in earlier else \
            (f"; measured on an earlier drafter file (sha256 {r.get('sha256', '?')}…), not the shipped one: rerun "
             "the script on the training feature cache")
        lines += [f"**{name}** ({r['blocks']} blocks{stale})", "",
                  "| | " + " | ".join(f"k={k + 1}" for k in range(g)) + " |", "|---" * (g + 1) + "|"]
        for label, key in (("P(m ≥ k)", "survival"), ("head's mean a_k", "mean_head_survival"),
                           ("AUROC head", "auroc_head"), ("AUROC oracle", "auroc_oracle"),
                           ("AUROC draft peak", "auroc_peak")):
            lines.append(f"| {label} | " + " | ".join(f"{x:.3f}" for x in r[key]) + " |")
        lines.append("")
    sched = {n: r["scheduling"] for n, r in d["drafters"].items() if "scheduling" in r}
    if sched:
        first = next(iter(sched.values()))
        lines += ["**What a perfect head would buy the scheduler.** Each held-out block replayed as a serving round, "
                  f"its outcome drawn from its chances ({first['rounds_replayed']} rounds, mean accepted "
                  f"{first['mean_accepted']:.2f}), on the {first['profile']} profile, HardwareAware over "
                  "FixedLength(1) as in the serving simulation below (gain in throughput at the SLA / per-user speed-up "
                  "at matched throughput):", "",
                  "| drafter | shipped head after STS | perfect head (c*) | oracle yardstick |", "|---|---|---|---|"]
        for n, r in sched.items():
            if n in earlier:
                n += " (earlier drafter file)"
            cell = lambda x: f"{x['throughput_gain_at_sla']:.3f} / {x['per_user_speedup_at_matched_throughput']:.3f}"  # noqa: E731
            lines.append(f"| {n} | {cell(r['shipped_head_sts'])} | {cell(r['perfect_head'])} | {cell(r['oracle'])} |")
        lines.append("")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drafters", nargs="+", default=["dspark", "dspark-rnn"])
    ap.add_argument("--data", default=None, help="feature cache (default: $DSPARK_CACHE/data/train)")
    ap.add_argument("--blocks-per-seq", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--replicas", type=int, default=4, help="outcome draws per block for the scheduling replay")
    ap.add_argument("--rounds", type=int, default=400, help="simulated steps per (policy, R)")
    try:
        run(ap.parse_args())
    except (FileNotFoundError, ValueError) as e:                 # no feature cache, an unknown drafter, …
        raise SystemExit(f"confidence_ceiling: {e}") from None


if __name__ == "__main__":
    main()
