"""Training data: target-regenerated responses, then one pass that caches target features.

Legend: n sequence length (prompt + response), m feature layers, d hidden size.

Per batch of prompts (one shard each, so an interrupted run resumes at the next shard):
1. the target answers through its chat template (T = 0.7, batched, left-padded, finished rows
   leave the batch);
2. one forward over prompt + response stores, in a safetensors shard,
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

from ..datasets.prompts import load_prompts
from ..settings import cache_dir


def sample_batch(target, prompts: list[list[int]], temperature: float, max_new_tokens: int,
                 generator: torch.Generator) -> list[list[int]]:
    """Batched sampling (left-padded); finished rows leave the batch so no step is wasted."""
    model = target.model
    pad = min(target.stop_ids) if target.stop_ids else 0
    B, L = len(prompts), max(map(len, prompts))
    inp = torch.tensor([[pad] * (L - len(x)) + x for x in prompts])                       # (B, L)
    att = torch.tensor([[0] * (L - len(x)) + [1] * len(x) for x in prompts])
    pos = (att.cumsum(-1) - 1).clamp_min(0)
    cache = target.new_cache()
    out = model(input_ids=inp, attention_mask=att, position_ids=pos, cache=cache, use_cache=True, logits_to_keep=1)
    live = torch.arange(B)                                   # original row of each live batch row
    resp: list[list[int]] = [[] for _ in range(B)]
    p_last = pos[:, -1:]
    for _ in range(max_new_tokens):
        probs = torch.softmax(out.logits[:, -1].float() / max(temperature, 1e-6), -1)     # (b, V)
        nxt = torch.multinomial(probs, 1, generator=generator)                            # (b, 1)
        keep = []
        for i, (row, t) in enumerate(zip(live.tolist(), nxt[:, 0].tolist())):
            resp[row].append(t)
            if t not in target.stop_ids:
                keep.append(i)
        if not keep:
            break
        if len(keep) < len(live):
            k = torch.tensor(keep)
            cache.batch_select_indices(k)
            live, nxt, att, p_last = live[k], nxt[k], att[k], p_last[k]
        att = torch.cat([att, torch.ones(len(live), 1, dtype=att.dtype)], 1)
        p_last = p_last + 1
        out = model(input_ids=nxt, attention_mask=att, position_ids=p_last, cache=cache, use_cache=True)
    return resp


def build_dataset(target, prompts_path: str | Path, out_dir: str | Path, temperature: float = 0.7,
                  max_new_tokens: int = 160, batch_size: int = 32, seed: int = 0, limit: int | None = None,
                  feat_batch: int = 8) -> Path:
    """Generate responses and cache their features, one shard per batch of prompts; resumable.
    Each shard holds ids/feats/hidden/lse per sequence; ``index.json`` lists the finished shards."""
    from safetensors.torch import save_file

    recs = load_prompts(prompts_path, limit=limit)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    n_shards = (len(recs) + batch_size - 1) // batch_size
    bar = tqdm(total=len(recs), desc="data", unit="prompt")
    n_tok, t0 = 0, time.perf_counter()
    for s in range(n_shards):
        path = out_dir / f"shard_{s:05d}.safetensors"
        batch = [(f"{i:06d}", recs[i]) for i in range(s * batch_size, min(len(recs), (s + 1) * batch_size))]
        if path.exists():
            bar.update(len(batch))
            continue
        g = torch.Generator().manual_seed(seed * 1_000_003 + s)
        prompts = [target.chat_ids(r["turns"][0]) for _, r in batch]
        with torch.inference_mode():
            resps = sample_batch(target, prompts, temperature, max_new_tokens, g)
        tensors, meta = {}, []
        seqs = [p + r for p, r in zip(prompts, resps)]
        for b in range(0, len(seqs), feat_batch):
            for (rid, r), p, seq, out in zip(batch[b:b + feat_batch], prompts[b:b + feat_batch],
                                             seqs[b:b + feat_batch], _features_batch(target, seqs[b:b + feat_batch])):
                tensors[f"{rid}.ids"] = torch.tensor(seq, dtype=torch.int32)
                tensors[f"{rid}.feats"], tensors[f"{rid}.hidden"], tensors[f"{rid}.lse"] = out
                meta.append({"id": rid, "domain": r.get("domain", "mixed"), "n": len(seq), "prompt_len": len(p)})
        n_tok += sum(map(len, resps))
        save_file(tensors, str(path) + ".tmp", metadata={"index": json.dumps(meta)})
        Path(str(path) + ".tmp").rename(path)
        _write_index(target, out_dir)
        bar.update(len(batch))
        bar.set_postfix(tok_s=f"{n_tok / (time.perf_counter() - t0):.0f}")
    bar.close()
    return out_dir


def _write_index(target, out_dir: Path) -> None:
    index = {"target": target.name, "vocab_hash": target.vocab_hash, "feature_layers": target.feature_layers,
             "hidden_size": target.hidden_size, "shards": sorted(p.name for p in out_dir.glob("shard_*.safetensors"))}
    (out_dir / "index.json").write_text(json.dumps(index, indent=1))


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


def default_data_dir() -> Path:
    return cache_dir() / "data" / "train"
