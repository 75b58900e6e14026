"""``dspark-viz corpus``: self-synthesised prompts and the target's answers (dspark_viz.train.magpie / corpus).

    dspark-viz corpus prompts --raw corpus/prompts-raw --batches 240 --batch-size 128
    dspark-viz corpus filter --raw corpus/prompts-raw --out assets/prompts/magpie.jsonl.gz --avoid BENCH.jsonl …
    dspark-viz corpus answers --prompts assets/prompts/magpie.jsonl.gz --out corpus/answers --token-budget 2000000
    dspark-viz corpus stats --out corpus/answers
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..train import corpus, magpie
from .common import add_target_args, load_target_from_args


def _add_sampling(p: argparse.ArgumentParser, batch_size: int, temperature: float, max_new_tokens: int) -> None:
    """The target and the sampling settings that requests and answers share (their defaults differ)."""
    add_target_args(p)
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--temperature", type=float, default=temperature)
    p.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    p.add_argument("--seed", type=int, default=0)


def add_corpus(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    pr = sub.add_parser("prompts", help="the target writes user requests (Magpie-style), raw shards, resumable")
    _add_sampling(pr, batch_size=128, temperature=0.8, max_new_tokens=96)
    pr.add_argument("--raw", required=True, help="folder of raw shards")
    pr.add_argument("--batches", type=int, required=True)
    fi = sub.add_parser("filter", help="raw shards → the prompt suite (filters, dedup, decontamination)")
    fi.add_argument("--raw", required=True)
    fi.add_argument("--out", required=True, help="the suite, .jsonl.gz")
    fi.add_argument("--avoid", nargs="*", default=[], metavar="FILE.jsonl",
                    help="prompt files no request may overlap (benchmarks, evaluation suites)")
    an = sub.add_parser("answers", help="the target's answers to prompt files, sharded, resumable")
    _add_sampling(an, batch_size=128, temperature=0.7, max_new_tokens=384)
    an.add_argument("--prompts", nargs="+", required=True, metavar="FILE.jsonl[.gz]")
    an.add_argument("--out", required=True, help="corpus folder (manifest.json + shards)")
    an.add_argument("--token-budget", type=int, required=True, help="stop at this many finished answer tokens")
    an.add_argument("--max-shards", type=int, default=None, help="stop after this many new shards")
    an.add_argument("--minutes", type=float, default=None,
                    help="stop at the first shard written after this long (resumable)")
    an.add_argument("--slots", type=int, default=128,
                    help="sequences decoded at once (continuous batching; not a corpus setting: any value resumes)")
    st = sub.add_parser("stats", help="size, throughput and repeated spans of a corpus")
    st.add_argument("--out", required=True)


def run_corpus(a: argparse.Namespace) -> None:
    if a.action == "prompts":
        if a.batches < 1 or a.batch_size < 1 or a.max_new_tokens < 1:
            raise ValueError("--batches, --batch-size and --max-new-tokens must be ≥ 1")
        target = load_target_from_args(a)
        magpie.synthesise(target, a.raw, a.batches, a.batch_size, a.temperature, a.max_new_tokens, a.seed)
    elif a.action == "filter":
        counts = magpie.filter_prompts(a.raw, a.out, magpie.read_avoid_texts(a.avoid))
        print(json.dumps(counts, indent=1))
    elif a.action == "answers":
        if (a.token_budget < 1 or a.batch_size < 1 or a.max_new_tokens < 1 or (a.max_shards or 1) < 1
                or not 1 <= a.slots <= 4096 or (a.minutes is not None and a.minutes <= 0)):
            raise ValueError("--token-budget, --batch-size, --max-new-tokens and --max-shards must be ≥ 1, "
                             "--slots 1 … 4096, --minutes > 0")
        target = load_target_from_args(a)
        print(json.dumps(corpus.make_answers(target, a.prompts, a.out, a.token_budget, a.batch_size,
                                             a.temperature, a.max_new_tokens, a.seed,
                                             max_shards=a.max_shards, slots=a.slots,
                                             max_seconds=a.minutes * 60 if a.minutes else None), indent=1))
    else:
        man = corpus.load_manifest(a.out)
        if man is None:
            raise ValueError(f"no corpus in {a.out}")
        s = corpus.summary(man)
        s["repeated_32_token_span"] = round(corpus.repeated_span_share(a.out), 4)
        s["bytes_on_disk"] = sum(f.stat().st_size for f in Path(a.out).glob("shard_*.npz"))
        print(json.dumps(s, indent=1))
