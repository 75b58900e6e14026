"""``dspark-viz data`` and ``dspark-viz train``: argument parsing over dspark_viz.train (data, trainer)."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..drafters.config import ALGOS
from ..drafters.neural import ASSETS, SHIPPED
from ..model.target import load_target
from ..settings import assets, cache_dir
from ..train.config import TrainConfig
from ..train import corpus as corpus_mod
from ..train.data import build_dataset, build_features, check_cache_dtype, default_data_dir
from ..train.precision import cpu_has_bf16
from ..train.online import CorpusFeatures, cache_bytes, cache_fits
from ..train.trainer import train, train_in_turns
from .common import set_threads


def add_data(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", default=None, metavar="DIR",
                   help="features of this corpus's answers (`dspark-viz corpus answers`); without it, the target "
                        "answers --prompts first")
    p.add_argument("--prompts", default=None, metavar="FILE.jsonl",
                   help="training prompts (default: the shipped train suite)")
    p.add_argument("--target", default=None, help="a local HF causal-LM folder or .gguf (default: embedded SmolLM2)")
    p.add_argument("--max-seqs", type=int, default=None, help="features of the first N corpus answers only")
    p.add_argument("--out", default=None, help="feature cache folder (default: $DSPARK_CACHE/data/train)")
    p.add_argument("--max-new-tokens", type=int, default=160)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--limit", type=int, default=None, help="use only the first N prompts")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--dtype", default="auto", choices=["auto", "fp32", "bf16"],
                   help="the target's forward that makes the features (stored as fp16 either way); auto: bf16 on "
                        "CUDA and on a CPU that multiplies it natively (AVX512-BF16 / AMX), fp32 elsewhere")


def run_data(a: argparse.Namespace) -> None:
    set_threads(a.threads)
    dtype = feature_dtype(a.dtype)
    out_dir = Path(a.out) if a.out else default_data_dir()
    if a.corpus:
        check_cache_dtype(out_dir, dtype)                # before the target loads: a clear error, nothing lost
        target = load_target(a.target, dtype=dtype)
        out = build_features(target, a.corpus, out_dir, max_seqs=a.max_seqs)
        print(f"features computed in {dtype}")
    else:
        if a.dtype == "bf16":
            raise ValueError("--dtype bf16 applies to a corpus's features (--corpus DIR); without --corpus the "
                             "target answers the prompts and computes the features in fp32")
        target = load_target(a.target, dtype="fp32")    # answers sampled and features computed in fp32
        prompts = Path(a.prompts) if a.prompts else assets("prompts", "train.jsonl")
        out = build_dataset(target, prompts, out_dir, a.temperature, a.max_new_tokens, a.batch_size, limit=a.limit)
    print(f"feature cache: {out}")


def add_train(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--algo", required=True, help=f"one of {', '.join(ALGOS)}, a comma list, or 'all' "
                    "(several train in turns on one shared data cache, --turn steps each)")
    ap.add_argument("--turn", type=int, default=200, help="steps per turn when several drafters train")
    ap.add_argument("--data", default=None, help="feature cache (default: $DSPARK_CACHE/data/train)")
    ap.add_argument("--features", default="auto", choices=["auto", "cache", "online"],
                    help="where the target's features come from: the feature cache (--data), or computed in each "
                         "step from the corpus's token ids (--corpus; no cache needed); auto: the cache where one "
                         "exists, else online")
    ap.add_argument("--corpus", nargs="+", default=["corpus/answers"], metavar="DIR",
                    help="the corpus for --features online (default: corpus/answers); several folders train on "
                         "all their answers")
    ap.add_argument("--unfinished", action="store_true",
                    help="online features: train on answers cut at the corpus's length limit too (every token is "
                         "still the target's own continuation; default: finished answers only)")
    ap.add_argument("--feature-batch", type=int, default=None,
                    help="sequences per forward of the target when features are computed online (default: 8 on "
                         "a CPU, 64 on a GPU)")
    ap.add_argument("--run-dir", default=None, help="checkpoints + log (default: $DSPARK_CACHE/runs/ALGO)")
    ap.add_argument("--out", default=None, help="exported drafter (default: assets/drafters/NAME.json); "
                    "with several drafters, a folder")
    ap.add_argument("--init-from", default=None, help="warm-start from this drafter (a folder of shipped "
                    "names with several drafters); default: the --out file when it exists")
    ap.add_argument("--steps", type=int, default=TrainConfig.steps)
    ap.add_argument("--minutes", type=float, default=None, help="stop after this long (resumable)")
    ap.add_argument("--fit-minutes", type=float, default=None,
                    help="a fresh run sets its step count (at most --steps) so that training takes about this "
                         "long, from the time of its first steps; the learning-rate schedule then ends there")
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--blocks-per-seq", type=int, default=TrainConfig.blocks_per_seq)
    ap.add_argument("--seqs-per-step", type=int, default=TrainConfig.seqs_per_step)
    ap.add_argument("--ckpt-every", type=int, default=TrainConfig.ckpt_every)
    ap.add_argument("--max-seqs", type=int, default=None, help="use only the first N cached sequences "
                    "(a fixed data budget while generation grows the cache)")
    ap.add_argument("--position-decay", type=float, default=None, metavar="D",
                    help="position weights w_k = exp(−(k−1)/D) of the loss (default: D = γ, the paper's; the loss "
                         "is normalised by Σ w, so DeepSpec's exp(−k/4) is D = 4)")
    ap.add_argument("--n-layers", type=int, default=None, help="draft layers (default 1)")
    ap.add_argument("--gamma", type=int, default=None, help="block size γ (default 7)")
    ap.add_argument("--draft-vocab", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--target", default=None, help="a local HF causal-LM folder or .gguf (default: embedded SmolLM2)")
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                    help="bf16 autocast or fp32 (auto: bf16 on CUDA; on a CPU with AVX512-BF16 / AMX the faster of the "
                         "two, timed on the first steps; fp32 elsewhere)")
    ap.add_argument("--compile", default=TrainConfig.compile, choices=["auto", "on", "off"],
                    help="the loss through torch.compile, fused forward and backward (auto: runs of at least "
                         "300 steps; where compiling fails the eager loss runs)")
    ap.add_argument("--conf-detach", action="store_true",
                    help="DSpark: the confidence loss trains the confidence head only, not the backbone and the "
                         "sequential head (the paper trains the three terms jointly)")


def feature_dtype(choice: str = "auto") -> str:
    """The dtype of the target's forward that makes features: bf16 on CUDA and on a CPU that multiplies it
    natively (AVX512-BF16 / AMX), fp32 elsewhere."""
    if choice != "auto":
        return choice
    import torch
    return "bf16" if torch.cuda.is_available() or cpu_has_bf16() else "fp32"


def online_store(a: argparse.Namespace, data: Path, target):
    """None where the trainer reads the feature cache at ``data``; else the corpus with its features computed in
    each step (``--features online``, or auto without a cache), said on the console with the cache's size."""
    if a.features == "cache" or (a.features == "auto" and (data / "index.json").exists()):
        return None
    dirs = [a.corpus] if isinstance(a.corpus, str) else list(a.corpus)
    for d in dirs:
        if corpus_mod.load_manifest(d) is None:
            raise ValueError(f"no feature cache at {data} and no corpus at {d}: build one with `dspark-viz "
                             "corpus answers` (or a cache with `dspark-viz data`)")
    dtype = feature_dtype()
    same = dtype == "fp32" and str(target.dtype) == "torch.float32"          # the training target serves
    store = CorpusFeatures(target if same else load_target(a.target, dtype=dtype), dirs, limit=a.max_seqs,
                           finished_only=not getattr(a, "unfinished", False),
                           feature_batch=getattr(a, "feature_batch", None))
    fits, words = cache_fits(cache_bytes(store.target, sum(s["n"] for s in store.seqs)), data)
    why = ("it would not fit: " if not fits else "no cache built; it would fit: ") + words
    print(f"features computed online in {dtype} from {', '.join(map(str, dirs))} ({len(store.seqs)} sequences) "
          f"— {why}")
    return store


def run_train(a: argparse.Namespace) -> None:
    algos = list(ALGOS) if a.algo == "all" else [x.strip() for x in a.algo.split(",") if x.strip()]
    bad = [x for x in algos if x not in ALGOS]
    if bad or not algos:
        raise ValueError(f"unknown algorithm(s) {bad}: choose from {', '.join(ALGOS)} or 'all'")
    if a.fit_minutes is not None and (a.fit_minutes <= 0 or len(algos) > 1):
        raise ValueError(f"--fit-minutes (> 0; got {a.fit_minutes}) sets one drafter's step count: train one, then "
                         "the others with --steps at its count (the same budget)")
    if a.position_decay is not None and a.position_decay <= 0:
        raise ValueError(f"--position-decay must be > 0 (got {a.position_decay})")
    set_threads(a.threads)
    target = load_target(a.target, dtype="fp32")  # training runs in fp32 (CUDA when there is one)
    tc = TrainConfig(steps=a.steps, lr=a.lr, blocks_per_seq=a.blocks_per_seq, seqs_per_step=a.seqs_per_step,
                     ckpt_every=a.ckpt_every, precision=a.precision, compile=a.compile,
                     conf_grad=not a.conf_detach, decay=a.position_decay)
    over = {k: v for k, v in (("n_layers", a.n_layers), ("gamma", a.gamma),
                                                   ("draft_vocab", a.draft_vocab)) if v is not None}
    data = Path(a.data) if a.data else default_data_dir()
    store = online_store(a, data, target)
    if len(algos) > 1:
        root = Path(a.run_dir) if a.run_dir else cache_dir() / "runs"
        folder = Path(a.out) if a.out else ASSETS
        outs = {x: folder / f"{SHIPPED[x]}.json" for x in algos}
        inits = {x: Path(a.init_from) / f"{SHIPPED[x]}.json" for x in algos} if a.init_from else None
        train_in_turns(target, algos, data, root, outs, tc, turn=a.turn, cfg_overrides=over, inits=inits,
                       max_seqs=a.max_seqs, store=store)
        print(f"exported {', '.join(map(str, outs.values()))}")
        return
    algo = algos[0]
    run_dir = Path(a.run_dir) if a.run_dir else cache_dir() / "runs" / algo
    out = Path(a.out) if a.out else ASSETS / f"{SHIPPED[algo]}.json"
    train(target, algo, data, run_dir, out, tc, minutes=a.minutes, fit_minutes=a.fit_minutes, cfg_overrides=over,
          init=Path(a.init_from) if a.init_from else None, max_seqs=a.max_seqs, store=store)
    print(f"exported {out}")
