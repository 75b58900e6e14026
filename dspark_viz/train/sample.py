"""Sampling from the target for data making (prompts and answers), not for speculative decoding.

Legend: S slots (sequences decoded at once), N rows in a forward, R rows whose next token is drawn, V vocabulary,
C a slot's capacity in tokens.

Continuous batching on the ragged forward (fast/ragged.py): S sequences live in S slots of one KV cache; each
forward carries every live sequence's newest token, plus the whole prompts of sequences admitted into slots that
freed up, with nothing padded and no mask. A sequence that emits a stop token (kept as its last id) or reaches
``max_new_tokens`` leaves at once and its slot takes the next prompt, so the forward stays full until the prompts
run out. Bookkeeping is tensor-wide (no per-row Python per step).

Every row's k-th token is drawn by inverting the CDF of softmax(logits / T) at one uniform that depends only on
the row's own seed and k (a counter hash, ``uniforms``), never on which other rows share the forward or how many
slots there are. Settings are explicit (the temperature; no top-p or top-k truncation); nothing is taken from the
model's own generation defaults. Targets the ragged forward does not cover run one left-padded batch at a time
through their own Hugging Face forward (``_padded``), with the same draws.
"""
from __future__ import annotations

from typing import Hashable, Iterable, Iterator

import numpy as np
import torch

from ..fast import ragged
from ..model.cache import GrowingCache

PREFILL_ROWS = 2048                # admit prompts while a forward holds fewer rows than this


def next_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator | None,
                u: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row from ``softmax(logits / T)``; T = 0 is greedy. logits (b, V) → (b,) token ids;
    ``u`` (b,): the rows' uniforms in [0, 1), drawn from ``generator`` when not given.

    The draw inverts the cumulative distribution (one uniform per row): exact, and on a CPU far cheaper
    than ``torch.multinomial`` or a sort over a 49k vocabulary (which would cost more than the forward). On a
    CPU with the native extension every row is drawn in one call (csrc/sample_rows.h, the same law)."""
    if temperature <= 0:
        return logits.argmax(-1)
    if u is None:
        u = torch.rand(logits.shape[0], generator=generator)
    drawn = ragged.sample_icdf(logits, temperature, u)
    if drawn is not None:
        return drawn
    p_target = torch.softmax(logits.float() / temperature, -1)                          # (b, V)
    cdf = p_target.cumsum(-1)                                                            # (b, V)
    u = u.to(device=cdf.device, dtype=cdf.dtype)[:, None] * cdf[:, -1:]
    return torch.searchsorted(cdf, u)[:, 0].clamp_max(cdf.shape[-1] - 1)


_M64 = (1 << 64) - 1


def uniforms(seeds: np.ndarray, steps: np.ndarray) -> torch.Tensor:
    """u (R,) in [0, 1), float32-exact (24 bits): splitmix64 of each row's seed and step — a row's k-th draw is
    the same whatever else is sampled beside it. seeds, steps (R,) uint64."""
    with np.errstate(over="ignore"):
        z = seeds.astype(np.uint64) + (steps.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return torch.from_numpy((z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24))


def row_seeds(generator: torch.Generator, n: int) -> list[int]:
    """n per-row seeds (63-bit) drawn from ``generator``."""
    return torch.randint(0, 2 ** 62, (n,), generator=generator, dtype=torch.long).tolist()


def _check(prompt, max_new_tokens: int) -> None:
    if not prompt:
        raise ValueError("every prompt needs at least one token")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be ≥ 1 (got {max_new_tokens})")


@torch.inference_mode()
def sample_stream(target, prompts: Iterable[tuple[Hashable, list[int], int]], temperature: float,
                  max_new_tokens: int, slots: int = 64) -> Iterator[tuple[Hashable, list[int]]]:
    """(tag, answer ids) for each (tag, prompt ids, seed) of ``prompts``, in the order answers finish; an answer
    ends on a stop token (kept) or after ``max_new_tokens``. ``slots`` sequences are decoded at once."""
    if slots < 1:
        raise ValueError(f"slots must be ≥ 1 (got {slots})")
    if not ragged.supports(target):
        yield from _padded_stream(target, prompts, temperature, max_new_tokens, slots)
        return
    fwd = ragged.forward_for(target)
    src = iter(prompts)
    pending: tuple | None = None
    cache = fwd.cache(slots, 256)
    stops = torch.tensor(sorted(target.stop_ids)) if target.stop_ids else torch.zeros(0, dtype=torch.long)
    tags: list = [None] * slots
    seed = np.zeros(slots, np.uint64)
    live = torch.zeros(slots, dtype=torch.bool)                  # (S,) a sequence holds the slot
    length = torch.zeros(slots, dtype=torch.long)                # (S,) tokens in the slot's cache
    last = torch.zeros(slots, dtype=torch.long)                  # (S,) newest token, not yet in the cache
    made = torch.zeros(slots, dtype=torch.long)                  # (S,) answer tokens drawn
    answer = torch.zeros(slots, max_new_tokens, dtype=torch.long)  # (S, max_new)
    exhausted = False
    while True:
        # rows of live sequences: one each, their newest token at position length
        cont = live.nonzero()[:, 0]
        ids, slot, pos = [last[cont]], [cont], [length[cont]]
        out_slot, n_rows = [cont], len(cont)
        free = (~live).nonzero()[:, 0].tolist()
        admitted = []
        while free and not exhausted and n_rows < PREFILL_ROWS:
            if pending is None:
                try:
                    pending = next(src)
                except StopIteration:
                    exhausted = True
                    break
            tag, p, s = pending
            _check(p, max_new_tokens)
            if admitted and n_rows + len(p) > PREFILL_ROWS:
                break
            pending = None
            j = free.pop(0)
            tags[j], seed[j] = tag, np.uint64(s & _M64)
            ids.append(torch.tensor(p, dtype=torch.long))
            slot.append(torch.full((len(p),), j, dtype=torch.long))
            pos.append(torch.arange(len(p)))
            admitted.append((j, len(p)))
            n_rows += len(p)
        if not n_rows:
            return
        for j, _ in admitted:
            live[j], made[j] = True, 0
        ids, slot, pos = torch.cat(ids), torch.cat(slot), torch.cat(pos)
        cache.reserve(int(pos.max()) + 1)
        ends = torch.cumsum(torch.tensor([1] * len(cont) + [n for _, n in admitted], dtype=torch.long), 0) - 1
        rows = torch.cat([cont, torch.tensor([j for j, _ in admitted], dtype=torch.long)])   # (R,) slot per drawn row
        logits = fwd(cache, ids, slot, pos, ends)                                            # (R, V)
        length[cont] += 1
        for j, n in admitted:
            length[j] = n
        u = uniforms(seed[rows.numpy()], made[rows].numpy().astype(np.uint64))
        tok = next_tokens(logits, temperature, None, u).cpu()                                # (R,)
        answer[rows, made[rows]] = tok
        made[rows] += 1
        last[rows] = tok
        done = torch.isin(tok, stops) | (made[rows] >= max_new_tokens)
        for j in rows[done].tolist():
            live[j] = False
            yield tags[j], answer[j, :int(made[j])].tolist()


@torch.inference_mode()
def _padded_stream(target, prompts, temperature: float, max_new_tokens: int, batch: int):
    """The stock Hugging Face forward over left-padded batches of ``batch`` prompts (same draws)."""
    src = iter(prompts)
    while True:
        group = [x for _, x in zip(range(batch), src)]
        if not group:
            return
        for tag, p, _ in group:
            _check(p, max_new_tokens)
        seeds = np.array([s & _M64 for _, _, s in group], np.uint64)
        for (tag, _, _), a in zip(group, _padded(target, [p for _, p, _ in group], temperature, max_new_tokens,
                                                 seeds)):
            yield tag, a


def _padded(target, prompts: list[list[int]], temperature: float, max_new_tokens: int,
            seeds: np.ndarray) -> list[list[int]]:
    model, dev = target.model, target.device
    pad = min(target.stop_ids) if target.stop_ids else 0
    B, L = len(prompts), max(map(len, prompts))
    inp = torch.tensor([[pad] * (L - len(x)) + x for x in prompts], device=dev)         # (B, L)
    att = torch.tensor([[0] * (L - len(x)) + [1] * len(x) for x in prompts], device=dev)
    pos = (att.cumsum(-1) - 1).clamp_min(0)
    cache = GrowingCache()
    out = model(input_ids=inp, attention_mask=att, position_ids=pos, cache=cache, use_cache=True,
                logits_to_keep=1)
    alive = torch.ones(B, dtype=torch.bool)
    resp: list[list[int]] = [[] for _ in range(B)]
    p_last = pos[:, -1:]
    stops = torch.tensor(sorted(target.stop_ids), device=dev) if target.stop_ids else None
    for k in range(max_new_tokens):
        u = uniforms(seeds, np.full(B, k, np.uint64))
        nxt = next_tokens(out.logits[:, -1], temperature, None, u)                       # (B,)
        for row, (t, a) in enumerate(zip(nxt.tolist(), alive.tolist())):
            if a:
                resp[row].append(t)
        if stops is not None:
            alive &= ~torch.isin(nxt, stops).cpu()
        if not bool(alive.any()):
            break
        att = torch.cat([att, torch.ones(B, 1, dtype=att.dtype, device=dev)], 1)
        p_last = p_last + 1
        out = model(input_ids=nxt[:, None], attention_mask=att, position_ids=p_last, cache=cache, use_cache=True)
    return resp


def sample_rows(target, prompts: list[list[int]], temperature: float, max_new_tokens: int,
                generator: torch.Generator, slots: int = 64) -> list[list[int]]:
    """Continue each prompt until a stop token (kept as the last id) or ``max_new_tokens``; the rows' seeds
    are drawn from ``generator``. Answers in the prompts' order."""
    if not prompts:
        raise ValueError("no prompts to continue")
    for p in prompts:
        _check(p, max_new_tokens)
    seeds = row_seeds(generator, len(prompts))
    out: list = [None] * len(prompts)
    for i, a in sample_stream(target, zip(range(len(prompts)), prompts, seeds), temperature, max_new_tokens,
                              slots):
        out[i] = a
    return out
