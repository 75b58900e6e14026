"""Self-synthesised training prompts (Magpie-style): the target writes user requests itself.

No dataset is downloaded. The target gets its chat template up to an open user turn — a system
message and, to steer the domain, the first words of the request — and continues it until it closes
the turn. What it writes is a request in the target's own style. The steers follow the paper's mix
(§4.1: math, code and general chat; here ≈ 40 / 40 / 20, chat with some instruction following).

Filters, in order (``clean``): the turn must close with the stop token; length 24–1,200 characters and
≥ 5 words; English-looking (≥ 97 % ASCII letters among letters, common English words present); no
assistant-style opening ("Sure", "As an AI", …); then exact duplicates (normalised text) and near
duplicates (MinHash over word 3-gram shingles, Jaccard ≥ 0.6 by LSH); last, decontamination: a request
sharing a word 8-gram with any prompt of the files given to avoid (public benchmarks, the evaluation
suite), or near-duplicating one, is dropped.

Raw generations are written one shard per batch (gzip JSONL, resumable); ``filter_prompts`` turns all
shards into the final suite deterministically.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from .sample import sample_rows

# domain → (system message, openings). An opening is the first words of the user turn ("" = none):
# the target continues them, which steers the topic without writing the request for it.
STEERS: dict[str, tuple[str, list[str]]] = {
    "math": ("You are a helpful AI assistant. Users ask you math word problems and arithmetic questions, "
             "and you solve them step by step.",
             ["", "", "A ", "If ", "What is ", "How many ", "Calculate ", "Solve ", "John has ", "A store sells ",
              "Find the ", "There are ", "Sarah ", "A train ", "What is the probability ", "Simplify ",
              "The sum of ", "A rectangle ", "How much ", "Tom bought "]),
    "code": ("You are a helpful AI assistant. Users ask you programming questions: writing Python functions, "
             "fixing bugs, explaining code and algorithms.",
             ["", "", "Write a Python function ", "How do I ", "What does this Python code ", "Fix the bug ",
              "Write a function that ", "Explain ", "How can I ", "In Python, ", "Implement ",
              "What is the difference between ", "Write a program ", "Can you write ", "Why does my ",
              "Write a SQL query ", "Given a list ", "Write a class "]),
    "chat": ("You are a helpful AI assistant named SmolLM, trained by Hugging Face",
             ["", "", "", "Can you ", "What are ", "How ", "Write a short ", "Give me ", "Explain ",
              "Summarize ", "Rewrite the following ", "List ", "I need ", "What is the best way to ",
              "Write an email ", "Describe ", "Translate ", "Suggest "]),
}
MIX = {"math": 0.4, "code": 0.4, "chat": 0.2}

_ASSISTANT_OPENINGS = ("sure", "certainly", "as an ai", "i'm sorry", "i am sorry", "of course", "hello! how",
                       "hi! how", "absolutely")
_COMMON = {"the", "a", "an", "is", "of", "to", "and", "in", "for", "how", "what", "i", "you", "my", "can",
           "that", "with", "this", "it", "are", "on", "do", "write", "if", "has", "me"}


def user_turn_head(target, system: str, opening: str) -> list[int]:
    """Token ids of the chat template up to the open user turn, then the opening words."""
    if "<|im_start|>" in (getattr(target.tokenizer, "chat_template", "") or ""):
        return target.encode(f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{opening}")
    text = target.tokenizer.apply_chat_template(
        [{"role": "system", "content": system}, {"role": "user", "content": "\x00"}], tokenize=False)
    return target.encode(text.split("\x00")[0] + opening)


# -- filters -------------------------------------------------------------------------------------------
def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def clean(text: str) -> str | None:
    """The request when it passes the length, language and style filters, else None."""
    text = text.strip()
    if not 24 <= len(text) <= 1200 or len(text.split()) < 5:
        return None
    letters = [c for c in text if c.isalpha()]
    if not letters or sum(c.isascii() for c in letters) < 0.97 * len(letters):
        return None
    words = normalise(text).split()
    if sum(w in _COMMON for w in words) < max(2, 0.1 * len(words)):
        return None
    if text.lower().startswith(_ASSISTANT_OPENINGS) or "<|" in text:
        return None
    return text


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    w = normalise(text).split()
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


class NearDuplicates:
    """MinHash (``n_hash`` permutations) over word 3-gram shingles with LSH banding (``bands`` × rows):
    ``seen(text)`` says whether a text of estimated Jaccard ≥ ``threshold`` was added before."""

    def __init__(self, n_hash: int = 64, bands: int = 16, threshold: float = 0.6, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, 2**61 - 1, n_hash, dtype=np.uint64)
        self.b = rng.integers(0, 2**61 - 1, n_hash, dtype=np.uint64)
        self.bands, self.rows, self.threshold = bands, n_hash // bands, threshold
        self.buckets: dict[tuple[int, bytes], list[int]] = {}
        self.sigs: list[np.ndarray] = []

    def signature(self, text: str) -> np.ndarray:
        sh = word_ngrams(text, 3) or {tuple(normalise(text).split())}
        x = np.array([int.from_bytes(hashlib.blake2b(" ".join(s).encode(), digest_size=8).digest(), "little")
                      for s in sh], dtype=np.uint64)                                   # (S,)
        return (self.a[:, None] * x[None, :] + self.b[:, None]).min(axis=1)             # (n_hash,)

    def seen(self, text: str, add: bool = True) -> bool:
        sig = self.signature(text)
        keys = [(i, sig[i * self.rows:(i + 1) * self.rows].tobytes()) for i in range(self.bands)]
        cands = {j for k in keys for j in self.buckets.get(k, ())}
        if any(np.mean(self.sigs[j] == sig) >= self.threshold for j in cands):
            return True
        if add:
            for k in keys:
                self.buckets.setdefault(k, []).append(len(self.sigs))
            self.sigs.append(sig)
        return False


class Contamination:
    """Prompts to stay away from (benchmarks, evaluation suites): a word 8-gram in common or a near duplicate."""

    def __init__(self, texts: list[str], n: int = 8):
        self.n = n
        self.grams: set[tuple[str, ...]] = set()
        self.near = NearDuplicates(threshold=0.5)
        for t in texts:
            self.grams |= word_ngrams(t, n)
            self.near.seen(t)

    def hits(self, text: str) -> bool:
        return bool(word_ngrams(text, self.n) & self.grams) or self.near.seen(text, add=False)


def read_avoid_texts(paths: list[str | Path]) -> list[str]:
    """Every turn of every record in JSONL prompt files (plain or .gz)."""
    out: list[str] = []
    for p in paths:
        p = Path(p)
        if not p.is_file():
            raise ValueError(f"file of prompts to avoid not found: {p}")
        with (gzip.open(p, "rt", encoding="utf-8") if p.suffix == ".gz" else p.open(encoding="utf-8")) as f:
            for line in f:
                if line.strip():
                    out += [t for t in json.loads(line).get("turns", []) if isinstance(t, str)]
    return out


# -- generation ----------------------------------------------------------------------------------------
def plan_steers(n_batches: int, batch_size: int, seed: int) -> list[list[tuple[str, str]]]:
    """(domain, opening) for each row of each batch; domains in the MIX proportions, openings uniform."""
    rng = np.random.default_rng(seed)
    doms = list(MIX)
    plan = []
    for _ in range(n_batches):
        d = rng.choice(len(doms), size=batch_size, p=[MIX[x] for x in doms])
        plan.append([(doms[i], STEERS[doms[i]][1][rng.integers(len(STEERS[doms[i]][1]))]) for i in d])
    return plan


def synthesise(target, out_dir: str | Path, n_batches: int, batch_size: int = 128, temperature: float = 0.8,
               max_new_tokens: int = 96, seed: int = 0) -> Path:
    """Raw requests, one gzip JSONL shard per batch in ``out_dir`` (existing shards are kept: resumable).

    Sampling: T = 0.8, no truncation — at T = 1 a 135M model's requests drift into word salad; lower
    temperatures make the same few requests over and over."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = plan_steers(n_batches, batch_size, seed)
    bar = tqdm(total=n_batches * batch_size, desc="prompts", unit="req")
    for s, rows in enumerate(plan):
        path = out_dir / f"raw_{s:05d}.jsonl.gz"
        if path.exists():
            bar.update(len(rows))
            continue
        heads = [user_turn_head(target, STEERS[d][0], o.rstrip()) for d, o in rows]
        g = torch.Generator().manual_seed(seed * 1_000_003 + s)
        outs = sample_rows(target, heads, temperature, max_new_tokens, g, slots=min(128, len(heads)))
        tmp = path.with_suffix(".tmp")
        with gzip.open(tmp, "wt", encoding="utf-8") as f:
            for (d, o), ids in zip(rows, outs):
                done = bool(ids) and ids[-1] in target.stop_ids
                text = o.rstrip() + target.decode(ids[:-1] if done else ids)
                f.write(json.dumps({"domain": d, "opening": o, "text": text, "closed": done}) + "\n")
        tmp.replace(path)
        bar.update(len(rows))
    bar.close()
    return out_dir


def filter_prompts(raw_dir: str | Path, out_path: str | Path, avoid: list[str] | None = None) -> dict:
    """All raw shards → the final suite (gzip JSONL of ``{"turns", "domain", "source"}``); returns counts."""
    raw = sorted(Path(raw_dir).glob("raw_*.jsonl.gz"))
    if not raw:
        raise ValueError(f"no raw prompt shards in {raw_dir}")
    cont = Contamination(avoid or [])
    near, exact = NearDuplicates(), set()
    counts = {"generated": 0, "unclosed": 0, "filtered": 0, "duplicate": 0, "near_duplicate": 0,
              "contaminated": 0, "kept": 0}
    per_domain: dict[str, int] = {}
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    with gzip.GzipFile(tmp, "wb", mtime=0) as gz:
        for p in raw:
            with gzip.open(p, "rt", encoding="utf-8") as f:
                for line in f:
                    r = json.loads(line)
                    counts["generated"] += 1
                    if not r["closed"]:
                        counts["unclosed"] += 1
                        continue
                    text = clean(r["text"])
                    if text is None:
                        counts["filtered"] += 1
                        continue
                    key = normalise(text)
                    if key in exact:
                        counts["duplicate"] += 1
                        continue
                    exact.add(key)
                    if cont.hits(text):
                        counts["contaminated"] += 1
                        continue
                    if near.seen(text):
                        counts["near_duplicate"] += 1
                        continue
                    counts["kept"] += 1
                    per_domain[r["domain"]] = per_domain.get(r["domain"], 0) + 1
                    rec = {"turns": [text], "domain": r["domain"], "source": "magpie"}
                    gz.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
    tmp.replace(out_path)
    return {**counts, "per_domain": per_domain}
