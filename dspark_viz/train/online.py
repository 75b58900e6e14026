"""Training from token ids: the corpus itself as the training data, the target's features computed when a step
needs them — so a corpus of any size trains on a machine whose disk or page cache would not hold its feature
cache (≈ 7 KB a token: 10M tokens would be 70 GB).

Legend: n sequence length (prompt + answer), m feature layers, d hidden size.

``CorpusFeatures`` holds every usable corpus sequence as token ids (the same sequences, in the same order, that
``data.build_features`` would cache, so the train / validation split is the same); its sequences carry no
features, and ``with_features`` — the first thing a training or validation step does with its sequences —
computes the missing ones in one batched forward of the target (no grad; the same layers, the same dtype as the
cache's forward and the same fp16 storage: ``data.features_batch``). Sequences of a ``FeatureStore`` pass through
unchanged.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from . import corpus as corpus_mod
from .data import MIN_ANSWER, check_corpus, features_batch, split_sequences

FEATURE_BATCH = 8     # sequences per forward when a step's features are computed (on a CPU)
FEATURE_BATCH_GPU = 64


class CorpusFeatures:
    """The corpus in ``corpus_dir`` (a folder, or several: their answers one after another) as training sequences
    (ids (n,) int64, n, prompt_len, domain, id), features computed by ``target`` (loaded at the dtype the cache
    would use) at each step, ``feature_batch`` sequences per forward (default: 8 on a CPU, 64 on a GPU)."""

    def __init__(self, target, corpus_dir: str | Path | list, limit: int | None = None, max_len: int | None = None,
                 finished_only: bool = True, feature_batch: int | None = None):
        dirs = [Path(d) for d in (corpus_dir if isinstance(corpus_dir, (list, tuple)) else [corpus_dir])]
        for d in dirs:
            check_corpus(target, d)
        self.target, self.corpus_dir = target, dirs[0]
        self.feature_batch = feature_batch or (FEATURE_BATCH if target.device.type == "cpu" else FEATURE_BATCH_GPU)
        if self.feature_batch < 1:
            raise ValueError(f"feature_batch must be ≥ 1 (got {self.feature_batch})")
        max_len = max_len or target.max_context
        self.seqs: list[dict] = []
        for d in dirs:
            for p, a, dom in corpus_mod.iter_corpus(d, finished_only):
                if len(p) + len(a) > max_len:
                    continue
                if limit and len(self.seqs) >= limit:
                    break
                if len(a) >= MIN_ANSWER:
                    self.seqs.append({"id": f"corpus:{len(self.seqs)}", "n": len(p) + len(a), "prompt_len": len(p),
                                      "domain": dom, "ids": torch.tensor(p + a, dtype=torch.long),
                                      "features": self})
        if not self.seqs:
            what = "finished answers (ended on the stop token)" if finished_only else "answers"
            raise ValueError(f"no {what} of at least {MIN_ANSWER} tokens that fit the target's context in "
                             f"{', '.join(map(str, dirs))}: sample more with `dspark-viz corpus answers`"
                             + (", or train on answers cut at the length limit too (--unfinished)" if finished_only
                                else ""))

    def refresh(self) -> int:
        """New corpus shards join at the next run (the sequences are read once); nothing is added here."""
        return 0

    def split(self, val_frac: float = 0.03) -> tuple[list[dict], list[dict]]:
        return split_sequences(self.seqs, val_frac)

    def n_tokens(self) -> int:
        return sum(s["n"] - s["prompt_len"] for s in self.seqs)

    def compute(self, seqs: list[dict]) -> list[dict]:
        """``seqs`` with feats (n, m·d) fp16, hidden (n, d) fp16 and lse (n,) fp32 added, on the target's device;
        the forwards take ``feature_batch`` sequences of similar length at a time (less padding)."""
        order = sorted(range(len(seqs)), key=lambda i: seqs[i]["n"])
        out: list[dict | None] = [None] * len(seqs)
        no_autocast = torch.autocast(self.target.device.type, enabled=False)     # the cache's arithmetic, not the step's
        for b in range(0, len(order), self.feature_batch):
            idx = order[b:b + self.feature_batch]
            with no_autocast:
                got = features_batch(self.target, [seqs[i]["ids"].tolist() for i in idx], to_cpu=False)
            for i, (f, h, l) in zip(idx, got):
                out[i] = {**seqs[i], "feats": f, "hidden": h, "lse": l}
        return out


def with_features(seqs: list[dict]) -> list[dict]:
    """``seqs`` with their target features: cached sequences as they are, the others computed now, all those of
    one store in one call."""
    missing = [i for i, s in enumerate(seqs) if "feats" not in s]
    if not missing:
        return seqs
    out = list(seqs)
    stores: dict[int, list[int]] = {}
    for i in missing:
        stores.setdefault(id(seqs[i]["features"]), []).append(i)
    for idx in stores.values():
        for i, s in zip(idx, seqs[idx[0]]["features"].compute([seqs[i] for i in idx])):
            out[i] = s
    return out


def cache_bytes(target, n_tokens: int) -> int:
    """The feature cache's size for ``n_tokens`` sequence tokens: feats and hidden in fp16, lse in fp32, ids int32."""
    per = 2 * len(target.feature_layers) * target.hidden_size + 2 * target.hidden_size + 4 + 4
    return per * n_tokens


def cache_fits(need: int, cache_dir: str | Path) -> tuple[bool, str]:
    """Whether a feature cache of ``need`` bytes fits at ``cache_dir``: on its disk (free space) and in the page
    cache the trainer reads it through (physical memory). → (fits, the sizes in words)."""
    where = Path(cache_dir)
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    words = f"a feature cache of {need / 1e9:.1f} GB against {free / 1e9:.1f} GB free disk and {ram / 1e9:.1f} GB memory"
    return need <= min(free, ram), words


__all__ = ["CorpusFeatures", "FEATURE_BATCH", "FEATURE_BATCH_GPU", "cache_bytes", "cache_fits", "with_features"]
