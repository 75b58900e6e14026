"""The feature cache: target features of every corpus sequence, sharded and memory-mapped.

Legend: n sequence length (prompt + answer), T tokens in a shard, S sequences in a shard,
m feature layers, d hidden size.

A corpus (train/corpus.py: prompt and answer token ids) is fed through the target once; each shard
(``feat_00000.pt``, tensors only, read back with ``torch.load(weights_only=True, mmap=True)``) holds

    ids (T,) int32          the sequences, concatenated
    feats (T, m·d) fp16     raw outputs of the chosen target layers
    hidden (T, d) fp16      the final-norm hidden state (the LM head's input)
    lse (T,) fp32           log Σ_v exp(logit_v) over the full vocabulary, so p_target restricted to any
                            draft vocabulary is exp(hidden·W_v − lse) exactly without the LM head later
    offsets (S+1,) int64    sequence s is rows offsets[s]:offsets[s+1]
    prompt_len (S,) int32   and its first prompt_len rows are the prompt
    domain (S,) uint8       index into train.corpus.DOMAINS

The cache is rebuilt from the corpus at will (``$DSPARK_CACHE/data/…``); the trainer maps shards
instead of reading them into memory (≈ 7 KB a token: 2M tokens would not fit in RAM).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from tqdm import tqdm

from ..datasets.prompts import load_prompts
from ..model.dtypes import NAMES
from ..settings import cache_dir
from . import corpus as corpus_mod

FORMAT = 2


@torch.no_grad()
def features_batch(target, seqs: list[list[int]], to_cpu: bool = True):
    """Right-padded batch forward → per sequence (feats (n, m·d) fp16, hidden (n, d) fp16, lse (n,) fp32), on the
    CPU (the cache) or, with ``to_cpu=False``, where the target runs (features computed while training)."""
    L = max(map(len, seqs))
    inp = torch.tensor([s + [0] * (L - len(s)) for s in seqs], device=target.device)      # (b, L)
    att = torch.tensor([[1] * len(s) + [0] * (L - len(s)) for s in seqs], device=target.device)
    out = target.model(input_ids=inp, attention_mask=att, output_hidden_states=True, use_cache=False)
    hs = out.hidden_states
    feats = torch.cat([hs[l] for l in target.feature_layers], dim=-1)                    # (b, L, m·d)
    lse = torch.logsumexp(out.logits.float(), dim=-1)                                    # (b, L)
    put = (lambda t: t.cpu().contiguous()) if to_cpu else (lambda t: t.contiguous())  # noqa: E731
    return [(put(feats[i, :len(s)].half()), put(hs[-1][i, :len(s)].half()), put(lse[i, :len(s)].float()))
            for i, s in enumerate(seqs)]


MIN_ANSWER = 3        # a sequence trains on blocks inside its answer: shorter answers are skipped


def check_corpus(target, corpus_dir: str | Path) -> dict:
    """The corpus's manifest, refused when it is missing or was made by another target."""
    man = corpus_mod.load_manifest(corpus_dir)
    if man is None:
        raise ValueError(f"no corpus in {corpus_dir} (manifest.json missing)")
    if man["settings"]["vocab_hash"] != target.vocab_hash:
        raise ValueError(f"the corpus in {corpus_dir} was made by another target "
                         f"({man['settings']['target']}), not {target.name}")
    return man


def split_sequences(seqs: list[dict], val_frac: float = 0.03) -> tuple[list[dict], list[dict]]:
    """Deterministic split: every ⌈1/val_frac⌉-th sequence is held out (at least one of two or more)."""
    every = max(2, min(round(1 / val_frac), len(seqs)))
    return ([s for i, s in enumerate(seqs) if i % every != every - 1],
            [s for i, s in enumerate(seqs) if i % every == every - 1])


def build_features(target, corpus_dir: str | Path, out_dir: str | Path, seqs_per_shard: int = 256,
                   feat_batch: int = 8, max_seqs: int | None = None, max_len: int | None = None,
                   finished_only: bool = True) -> Path:
    """Features of every finished corpus answer (every answer with ``finished_only=False``), one shard per
    ``seqs_per_shard`` sequences; resumable."""
    check_corpus(target, corpus_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    max_len = max_len or target.max_context
    recs = [(p, a, d) for p, a, d in corpus_mod.iter_corpus(corpus_dir, finished_only)
            if len(p) + len(a) <= max_len]
    recs = recs[:max_seqs] if max_seqs else recs
    n_shards = (len(recs) + seqs_per_shard - 1) // seqs_per_shard
    bar = tqdm(total=len(recs), desc="features", unit="seq")
    t0 = time.perf_counter()
    write_index(target, out, corpus_dir, 0.0)
    for s in range(n_shards):
        path = out / f"feat_{s:05d}.pt"
        chunk = recs[s * seqs_per_shard:(s + 1) * seqs_per_shard]
        # a shard holding fewer sequences than its place now takes was the last one of a smaller --max-seqs:
        # rebuilt whole, so that the cache keeps the corpus's first answers in order, without a gap
        if not path.exists() or shard_size(path) < len(chunk):
            rows = []
            order = sorted(range(len(chunk)), key=lambda i: len(chunk[i][0]) + len(chunk[i][1]))  # less padding
            for b in range(0, len(order), feat_batch):
                idx = order[b:b + feat_batch]
                rows += zip(idx, features_batch(target, [chunk[i][0] + chunk[i][1] for i in idx]))
            rows.sort(key=lambda r: r[0])
            save_shard(path, [{"ids": p + a, "prompt_len": len(p), "domain": d, "feats": f, "hidden": h, "lse": l}
                              for (p, a, d), (_, (f, h, l)) in zip(chunk, rows)])
        write_index(target, out, corpus_dir, time.perf_counter() - t0)
        bar.update(len(chunk))
    bar.close()
    return out


def shard_size(path: Path) -> int:
    """How many sequences a feature shard holds."""
    return int(torch.load(path, weights_only=True, mmap=True)["prompt_len"].numel())


def save_shard(path: Path, seqs: list[dict]) -> None:
    """One shard from sequences {ids (list), prompt_len, domain, feats (n, m·d), hidden (n, d), lse (n,)}."""
    lens = torch.tensor([len(q["ids"]) for q in seqs])
    shard = {"ids": torch.tensor([t for q in seqs for t in q["ids"]], dtype=torch.int32),
             "feats": torch.cat([q["feats"].half() for q in seqs]), "hidden": torch.cat([q["hidden"].half() for q in seqs]),
             "lse": torch.cat([q["lse"].float() for q in seqs]),
             "offsets": torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)]),
             "prompt_len": torch.tensor([q["prompt_len"] for q in seqs], dtype=torch.int32),
             "domain": torch.tensor([corpus_mod.DOMAINS.index(q["domain"]) for q in seqs], dtype=torch.uint8)}
    torch.save(shard, str(path) + ".tmp")
    Path(str(path) + ".tmp").replace(path)


def _dtype_name(target) -> str:
    """The short name (fp32, bf16, fp16) of the target's weights' dtype, as model/dtypes.NAMES spells it."""
    dt = next(target.model.parameters()).dtype
    return next((k for k, v in NAMES.items() if v == dt and k.startswith(("fp", "bf"))), str(dt))


def check_cache_dtype(out_dir: str | Path, dtype: str) -> None:
    """Refuse to extend a feature cache whose shards were computed in another dtype (one cache, one arithmetic)."""
    index = Path(out_dir) / "index.json"
    if not index.exists():
        return
    made = json.loads(index.read_text()).get("dtype", "fp32")
    if made != dtype and any(Path(out_dir).glob("feat_*.pt")):
        raise ValueError(f"the feature cache in {out_dir} was computed in {made}; extend it with --dtype {made}, "
                         f"or give a new --out for {dtype} features")


def write_index(target, out_dir: Path, corpus_dir, seconds: float) -> None:
    shards = sorted(p.name for p in out_dir.glob("feat_*.pt"))
    index = {"format": FORMAT, "target": target.name, "dtype": _dtype_name(target), "vocab_hash": target.vocab_hash,
             "feature_layers": target.feature_layers, "hidden_size": target.hidden_size, "corpus": str(corpus_dir),
             "shards": shards, "bytes": sum((out_dir / s).stat().st_size for s in shards),
             "build_seconds_last_run": round(seconds, 1)}
    tmp = out_dir / "index.json.tmp"
    tmp.write_text(json.dumps(index, indent=1))
    tmp.replace(out_dir / "index.json")


def build_dataset(target, prompts_path: str | Path, out_dir: str | Path, temperature: float = 0.7,
                  max_new_tokens: int = 160, batch_size: int = 32, seed: int = 0, limit: int | None = None,
                  feat_batch: int = 8, token_budget: int | None = None, finished_only: bool = False) -> Path:
    """Prompts → the target's answers (a corpus in ``out_dir/corpus``) → the feature cache in ``out_dir``.
    ``limit`` takes the first prompts of the file; both steps are resumable. Answers cut by ``max_new_tokens``
    are kept unless ``finished_only``: every token of them is still the target's own continuation."""
    recs = load_prompts(prompts_path, limit=limit)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pfile = out / "prompts.jsonl"
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)
    if not pfile.exists() or pfile.read_text(encoding="utf-8") != text:
        pfile.write_text(text, encoding="utf-8")
    corpus_mod.make_answers(target, [pfile], out / "corpus", token_budget, batch_size, temperature,
                            max_new_tokens, seed, shuffle=False)
    return build_features(target, out / "corpus", out, feat_batch=feat_batch, finished_only=finished_only)


class FeatureStore:
    """The feature cache, memory-mapped: ``seqs`` is a list of dicts of views
    (ids (n,) int64, feats (n, m·d) fp16, hidden (n, d) fp16, lse (n,), n, prompt_len, domain, id).

    ``refresh()`` maps shards written since (feature building may still be running)."""

    def __init__(self, feat_dir: str | Path, limit: int | None = None):
        self.feat_dir, self.limit = Path(feat_dir), limit
        if not (self.feat_dir / "index.json").exists():
            raise FileNotFoundError(f"no feature cache at {self.feat_dir}: run `dspark-viz data` first")
        self.seqs: list[dict] = []
        self.loaded: set[str] = set()
        self.refresh()

    def refresh(self) -> int:
        """Map shards not mapped yet; returns how many sequences were added."""
        self.index = json.loads((self.feat_dir / "index.json").read_text())
        if self.index.get("format") != FORMAT:
            raise ValueError(f"{self.feat_dir} holds a feature cache of an older format: delete it and run "
                             "`dspark-viz data` again (it is rebuilt from the corpus)")
        before = len(self.seqs)
        for name in self.index["shards"]:
            if name in self.loaded or (self.limit and len(self.seqs) >= self.limit):
                continue
            sh = torch.load(self.feat_dir / name, weights_only=True, mmap=True)
            off, pl = sh["offsets"].tolist(), sh["prompt_len"].tolist()
            ids = sh["ids"].long()                                   # small: kept in memory
            for i in range(len(pl)):
                a, b = off[i], off[i + 1]
                if b - a - pl[i] < MIN_ANSWER or (self.limit and len(self.seqs) >= self.limit):
                    continue
                self.seqs.append({"id": f"{name}:{i}", "n": b - a, "prompt_len": pl[i],
                                  "domain": corpus_mod.DOMAINS[int(sh["domain"][i])], "ids": ids[a:b],
                                  "feats": sh["feats"][a:b], "hidden": sh["hidden"][a:b], "lse": sh["lse"][a:b]})
            self.loaded.add(name)
        return len(self.seqs) - before

    def split(self, val_frac: float = 0.03) -> tuple[list[dict], list[dict]]:
        return split_sequences(self.seqs, val_frac)

    def n_tokens(self) -> int:
        return sum(s["n"] - s["prompt_len"] for s in self.seqs)


def default_data_dir() -> Path:
    return cache_dir() / "data" / "train"
