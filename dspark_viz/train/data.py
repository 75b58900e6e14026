"""Training data: target-regenerated responses, then one pass that caches target features.

Legend: n sequence length (prompt + response), m feature layers, d hidden size.

Step 1  ``generate_responses``: the target answers each prompt through its chat template
        (T = 0.7, batched, left-padded); records are appended to ``responses.jsonl`` so an
        interrupted run resumes where it stopped.
Step 2  ``cache_features``: one forward per sequence stores, in safetensors shards,
        feats (n, m·d) fp16 — raw outputs of the chosen target layers,
        hidden (n, d) fp16 — the final-norm hidden state (the LM head's input),
        lse (n,) fp32 — log Σ_v exp(logit_v) over the full vocabulary, so p_target restricted to
        any draft vocabulary is exp(hidden·W_v − lse) exactly without the full LM head later.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from tqdm import tqdm

from .prompts import load_prompts


def _done_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    done = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                done.add(json.loads(line)["id"])
            except (json.JSONDecodeError, KeyError):
                continue          # a torn last line from an interrupted run
    return done


def generate_responses(target, prompts_path: str | Path, out_path: str | Path, temperature: float = 0.7,
                       max_new_tokens: int = 256, batch_size: int = 16, seed: int = 0,
                       limit: int | None = None) -> Path:
    """Append {id, domain, prompt, prompt_ids, response_ids} records; resumable."""
    recs = load_prompts(prompts_path, limit=limit)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = _done_ids(out_path)
    todo = [(f"{i:06d}", r) for i, r in enumerate(recs) if f"{i:06d}" not in done]
    model, tok = target.model, target.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else min(target.stop_ids)
    eos = sorted(target.stop_ids)
    bar = tqdm(total=len(recs), initial=len(recs) - len(todo), desc="responses", unit="prompt")
    n_tok, t0 = 0, time.perf_counter()
    with open(out_path, "a", encoding="utf-8") as f:
        for b in range(0, len(todo), batch_size):
            batch = todo[b:b + batch_size]
            ids = [target.chat_ids(r["turns"][0]) for _, r in batch]
            L = max(map(len, ids))
            inp = torch.tensor([[pad] * (L - len(x)) + x for x in ids])                   # (b, L) left-padded
            att = torch.tensor([[0] * (L - len(x)) + [1] * len(x) for x in ids])
            torch.manual_seed(seed * 1_000_003 + int(batch[0][0]))
            with torch.inference_mode():
                gen = model.generate(input_ids=inp.to(target.device), attention_mask=att.to(target.device),
                                     do_sample=temperature > 0, temperature=temperature or None, top_k=0,
                                     top_p=1.0, max_new_tokens=max_new_tokens, eos_token_id=eos,
                                     pad_token_id=pad)
            for (rid, r), x, g in zip(batch, ids, gen[:, L:].tolist()):
                resp = []
                for t in g:
                    resp.append(t)
                    if t in target.stop_ids:
                        break
                n_tok += len(resp)
                f.write(json.dumps({"id": rid, "domain": r.get("domain", "mixed"), "prompt": r["turns"][0],
                                    "prompt_ids": x, "response_ids": resp}, ensure_ascii=False) + "\n")
            f.flush()
            bar.update(len(batch))
            bar.set_postfix(tok_s=f"{n_tok / (time.perf_counter() - t0):.0f}")
    bar.close()
    return out_path


def read_responses(path: str | Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def cache_features(target, responses_path: str | Path, out_dir: str | Path, shard_size: int = 64,
                   batch_size: int = 8) -> Path:
    """Write shard_XXXXX.safetensors with feats/hidden/lse per sequence (+ index.json); resumable."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    recs = read_responses(responses_path)
    n_shards = (len(recs) + shard_size - 1) // shard_size
    bar = tqdm(total=len(recs), desc="features", unit="seq")
    for s in range(n_shards):
        path = out_dir / f"shard_{s:05d}.safetensors"
        chunk = recs[s * shard_size:(s + 1) * shard_size]
        if path.exists() and len(chunk) == shard_size:
            bar.update(len(chunk))
            continue
        tensors, meta = {}, []
        for b in range(0, len(chunk), batch_size):
            sub = chunk[b:b + batch_size]
            seqs = [r["prompt_ids"] + r["response_ids"] for r in sub]
            for j, (r, seq, out) in enumerate(zip(sub, seqs, _features_batch(target, seqs))):
                key = r["id"]
                tensors[f"{key}.ids"] = torch.tensor(seq, dtype=torch.int32)
                tensors[f"{key}.feats"], tensors[f"{key}.hidden"], tensors[f"{key}.lse"] = out
                meta.append({"id": key, "domain": r["domain"], "n": len(seq), "prompt_len": len(r["prompt_ids"])})
            bar.update(len(sub))
        save_file(tensors, str(path) + ".tmp", metadata={"index": json.dumps(meta)})
        Path(str(path) + ".tmp").rename(path)
    bar.close()
    index = {"target": target.name, "vocab_hash": target.vocab_hash, "feature_layers": target.feature_layers,
             "hidden_size": target.hidden_size, "shards": sorted(p.name for p in out_dir.glob("shard_*.safetensors"))}
    (out_dir / "index.json").write_text(json.dumps(index, indent=1))
    return out_dir


@torch.inference_mode()
def _features_batch(target, seqs: list[list[int]]):
    """Right-padded batch forward → per sequence (feats (n, m·d) fp16, hidden (n, d) fp16, lse (n,) fp32)."""
    L = max(map(len, seqs))
    pad = 0
    inp = torch.tensor([s + [pad] * (L - len(s)) for s in seqs], device=target.device)    # (b, L)
    att = torch.tensor([[1] * len(s) + [0] * (L - len(s)) for s in seqs], device=target.device)
    out = target.model(input_ids=inp, attention_mask=att, output_hidden_states=True, use_cache=False)
    hs = out.hidden_states
    feats = torch.cat([hs[l] for l in target.feature_layers], dim=-1)                    # (b, L, m·d)
    lse = torch.logsumexp(out.logits.float(), dim=-1)                                    # (b, L)
    res = []
    for i, s in enumerate(seqs):
        n = len(s)
        res.append((feats[i, :n].half().cpu().contiguous(), hs[-1][i, :n].half().cpu().contiguous(),
                    lse[i, :n].float().cpu().contiguous()))
    return res


def main(argv=None) -> None:
    import argparse

    from ..target import load_target

    ap = argparse.ArgumentParser(description="generate target responses and cache target features")
    ap.add_argument("--prompts", default="assets/prompts/train.jsonl")
    ap.add_argument("--out", default="data/train")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--stage", choices=["all", "responses", "features"], default="all")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    t = load_target()
    out = Path(a.out)
    if a.stage in ("all", "responses"):
        generate_responses(t, a.prompts, out / "responses.jsonl", a.temperature, a.max_new_tokens, a.batch_size,
                           limit=a.limit)
    if a.stage in ("all", "features"):
        cache_features(t, out / "responses.jsonl", out / "features")


if __name__ == "__main__":
    main()
