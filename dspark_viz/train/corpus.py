"""The training corpus: the target's own answers to the training prompts, as token ids, sharded.

Legend: N records in a shard, P / A total prompt / answer tokens in a shard.

The paper (§4.1) trains on prompts whose answers the target regenerates, so drafters learn the target's
own continuations. ``make_answers`` samples those answers many at once (``sample.sample_stream``) and writes
one compressed shard per ``batch_size`` answers, resumable, until a budget of answer tokens that end on the target's stop
token is reached. A shard (``shard_00000.npz``, numpy arrays, no pickle):

    prompt (P,) / answer (A,)        token ids, concatenated; uint16 when the vocabulary fits, else int32
    prompt_len (N,) / answer_len (N,)  lengths, to split them again
    finished (N,) bool               the answer ends on a stop token (only these are trained on)
    domain (N,) uint8                index into the manifest's ``domains``
    key (N,) uint64                  the prompt's key (a hash of its text): answered prompts are skipped

Prompt files may grow between runs (the self-written suite is filtered again as raw shards arrive): each run
answers the prompts not answered yet, in file order or in a seeded hash order that a file's growth does not
reorder. ``manifest.json`` holds the settings, the target's name and vocabulary hash, the prompt files each
run read (with their SHA-256) and one line per shard. Features for training are a separate, rebuildable cache
(train/data.py).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from tqdm import tqdm

from .sample import sample_stream

DOMAINS = ("math", "code", "chat", "mixed")


def read_prompt_records(path: str | Path) -> list[dict]:
    """Records of a JSONL prompt file, plain or gzip (``{"turns": [...], "domain"?: ...}``)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"prompt file not found: {p}")
    with (gzip.open(p, "rt", encoding="utf-8") if p.suffix == ".gz" else p.open(encoding="utf-8")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    for r in recs:
        if not r.get("turns") or not isinstance(r["turns"][0], str):
            raise ValueError(f"{p}: a record without a first user turn: {str(r)[:80]}")
    return recs


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def prompt_key(text: str) -> int:
    """A prompt's 64-bit key: the first 8 bytes of its text's SHA-256."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def prompt_order(files: list[Path], seed: int, shuffle: bool = True) -> list[dict]:
    """Every distinct prompt of the files (first occurrence kept), with its ``key``: in file order, or sorted
    by a seeded hash of the text — an order in which prompts appended to a file never move the others."""
    recs, seen = [], set()
    for f in files:
        for r in read_prompt_records(f):
            k = prompt_key(r["turns"][0])
            if k not in seen:
                seen.add(k)
                recs.append({**r, "key": k})
    if not shuffle:
        return recs
    rank = {r["key"]: hashlib.sha256(f"{seed}:{r['key']}".encode()).digest() for r in recs}
    return sorted(recs, key=lambda r: rank[r["key"]])


def answered_keys(out_dir: str | Path, man: dict) -> set[int]:
    """Keys of every prompt the corpus has answered."""
    keys: set[int] = set()
    for sh in man["shards"]:
        with np.load(Path(out_dir) / sh["file"], allow_pickle=False) as z:
            keys.update(int(k) for k in z["key"])
    return keys


def load_manifest(out_dir: str | Path) -> dict | None:
    p = Path(out_dir) / "manifest.json"
    return json.loads(p.read_text()) if p.is_file() else None


def _write_json(path: Path, obj: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)


def answer_seed(seed: int, key: int) -> int:
    """The sampling seed of one prompt's answer: its draws depend on the corpus seed and the prompt alone, not on
    the batch it is answered in."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{key}:answer".encode()).digest()[:8], "little")


def open_manifest(out: Path, settings: dict) -> dict:
    """The corpus manifest in ``out`` to add shards to (a new one if there is none); a corpus made with other
    sampling settings is refused, naming them."""
    man = load_manifest(out)
    if man is not None and man["settings"] != settings:
        diff = sorted(k for k in settings if man["settings"].get(k) != settings[k])
        raise ValueError(f"{out} holds a corpus made with other settings ({', '.join(diff)}): "
                         "use another --out or the same settings")
    return man or {"settings": settings, "domains": list(DOMAINS), "shards": []}


def write_shard(path: Path, target, rows: list[dict], prompts: list[list[int]], answers: list[list[int]],
                dt) -> dict:
    """One shard of answers (their prompt records ``rows``, prompt and answer ids, stored as ``dt``) written
    atomically to ``path`` → its manifest entry without the timing (file, n, finished, tokens, dtype)."""
    fin = np.array([bool(a) and a[-1] in target.stop_ids for a in answers])
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(
        tmp, prompt=np.concatenate([np.asarray(p, dt) for p in prompts]),
        answer=np.concatenate([np.asarray(a, dt) for a in answers]),
        prompt_len=np.array([len(p) for p in prompts], np.int32),
        answer_len=np.array([len(a) for a in answers], np.int32), finished=fin,
        domain=np.array([DOMAINS.index(r["domain"]) if r.get("domain") in DOMAINS
                         else DOMAINS.index("mixed") for r in rows], np.uint8),
        key=np.array([r["key"] for r in rows], np.uint64))
    tmp.replace(path)
    return {"file": path.name, "n": len(answers), "finished": int(fin.sum()),
            "finished_tokens": int(sum(len(a) for a, f in zip(answers, fin) if f)),
            "answer_tokens": int(sum(map(len, answers))), "dtype": str(target.dtype).replace("torch.", "")}


def make_answers(target, prompt_files: list[str | Path], out_dir: str | Path, token_budget: int | None,
                 batch_size: int = 128, temperature: float = 0.7, max_new_tokens: int = 384,
                 seed: int = 0, shuffle: bool = True, max_shards: int | None = None, slots: int = 64,
                 max_seconds: float | None = None) -> dict:
    """Sample answers until ``token_budget`` finished answer tokens (None: every prompt once), ``max_shards``
    new shards or the first shard that ends after ``max_seconds``, writing one shard per ``batch_size`` answers; resumable, and prompt files may have grown since the
    last run. ``slots`` sequences are decoded at once (``sample.sample_stream``: continuous batching, a slot
    refilled as soon as its answer ends); answers land in shards in the order they finish.

    Sampling: T = 0.7, no top-p / top-k, no repetition penalty — between the two temperatures drafters
    are evaluated at (T = 0, T = 1); a greedy 135M model loops into long repeated spans, and at T = 1
    long answers drift. Answers cut by ``max_new_tokens`` are kept in the shard, flagged unfinished."""
    files = [Path(f) for f in prompt_files]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"target": target.name, "vocab_hash": target.vocab_hash, "temperature": temperature,
                "top_p": 1.0, "top_k": 0, "repetition_penalty": 1.0, "max_new_tokens": max_new_tokens,
                "batch_size": batch_size, "seed": seed, "shuffle": shuffle}
    man = open_manifest(out, settings)
    done = answered_keys(out, man)
    recs = [r for r in prompt_order(files, seed, shuffle) if r["key"] not in done]
    man.setdefault("runs", []).append({"prompt_files": [{"name": f.name, "sha256": _sha256(f)} for f in files],
                                       "prompts": len(recs) + len(done), "answered_before": len(done)})
    dt = np.uint16 if target.vocab_size <= 65536 else np.int32
    done_tokens = sum(s["finished_tokens"] for s in man["shards"])
    budget = token_budget if token_budget is not None else float("inf")
    bar = tqdm(total=token_budget or len(recs) + len(done), desc="answers",
               unit="tok" if token_budget else "prompt")
    bar.update(min(done_tokens, token_budget) if token_budget else len(done))
    s = s0 = len(man["shards"])
    by_key = {r["key"]: r for r in recs}
    prompt_of: dict[int, list[int]] = {}                      # prompt ids of the answers in flight, by key

    def items():
        for r in recs:
            prompt_of[r["key"]] = ids = target.chat_ids(r["turns"][0])
            yield r["key"], ids, answer_seed(seed, r["key"])

    stream = sample_stream(target, items(), temperature, max_new_tokens, slots=slots)
    answered, t_run = 0, time.perf_counter()
    while done_tokens < budget and answered < len(recs) and (max_shards is None or s - s0 < max_shards):
        if max_seconds is not None and time.perf_counter() - t_run >= max_seconds:
            break
        t0 = time.perf_counter()
        batch = [x for _, x in zip(range(batch_size), stream)]                  # (key, answer) as they finish
        secs = time.perf_counter() - t0
        if not batch:
            break
        answered += len(batch)
        entry = write_shard(out / f"shard_{s:05d}.npz", target, [by_key[k] for k, _ in batch],
                            [prompt_of.pop(k) for k, _ in batch], [a for _, a in batch], dt)
        man["shards"].append(entry | {"seconds": round(secs, 1), "slots": slots})
        _write_json(out / "manifest.json", man)
        fin_tok = entry["finished_tokens"]
        done_tokens += fin_tok
        bar.update(min(fin_tok, max(token_budget - bar.n, 0)) if token_budget else len(batch))
        s += 1
    stream.close()
    bar.close()
    return {**summary(man), "unanswered": len(recs) - answered, "budget_met": done_tokens >= budget}


def summary(man: dict) -> dict:
    sh = man["shards"]
    secs = sum(s["seconds"] for s in sh)
    tok = sum(s["answer_tokens"] for s in sh)
    return {"shards": len(sh), "answers": sum(s["n"] for s in sh), "finished": sum(s["finished"] for s in sh),
            "finished_tokens": sum(s["finished_tokens"] for s in sh), "answer_tokens": tok,
            "seconds": round(secs, 1), "tokens_per_s": round(tok / secs, 1) if secs else None}


def iter_corpus(out_dir: str | Path, finished_only: bool = True) -> Iterator[tuple[list[int], list[int], str]]:
    """(prompt ids, answer ids, domain) for every answer of the corpus, shard by shard."""
    out = Path(out_dir)
    man = load_manifest(out)
    if man is None:
        raise ValueError(f"no corpus in {out} (manifest.json missing): build one with `dspark-viz corpus answers`")
    for sh in man["shards"]:
        with np.load(out / sh["file"], allow_pickle=False) as z:
            pe, ae = np.cumsum(z["prompt_len"]), np.cumsum(z["answer_len"])
            for i in range(len(pe)):
                if finished_only and not z["finished"][i]:
                    continue
                p = z["prompt"][pe[i] - z["prompt_len"][i]:pe[i]].tolist()
                a = z["answer"][ae[i] - z["answer_len"][i]:ae[i]].tolist()
                yield p, a, man["domains"][int(z["domain"][i])]


def repeated_span_share(out_dir: str | Path, span: int = 32) -> float:
    """Share of finished answers in which some span of ``span`` tokens occurs twice (a loop)."""
    n = rep = 0
    for _, a, _ in iter_corpus(out_dir):
        n += 1
        seen: set[tuple[int, ...]] = set()
        for i in range(len(a) - span + 1):
            w = tuple(a[i:i + span])
            if w in seen:
                rep += 1
                break
            seen.add(w)
    return rep / n if n else 0.0
