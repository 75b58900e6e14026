"""Batched sampling from the target for data making (prompts and answers), not for speculative decoding.

Legend: B rows in the batch, b rows still live, L longest prompt, V vocabulary.

Rows are left-padded. A finished row (it emitted a stop token) is carried along, its output ignored, until an
eighth of the batch has finished; then the batch is compacted — dropping rows copies the whole cache, so it is
done a few times per batch rather than once per finished row. The cache grows by doubling (``GrowingCache``):
appending a step writes in place, where transformers' DynamicCache concatenates the whole cache every step.
Settings are explicit (the temperature; no top-p or top-k truncation); nothing is taken from the model's own
generation defaults.
"""
from __future__ import annotations

import torch

from ..model.cache import GrowingCache


COMPACT_AT = 8                     # compact the batch once 1/8 of its rows have finished


def next_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator,
                u: torch.Tensor | None = None) -> torch.Tensor:
    """One token per row from ``softmax(logits / T)``; T = 0 is greedy. logits (b, V) → (b,) token ids;
    ``u`` (b,): the rows' uniforms in [0, 1), drawn from ``generator`` when not given.

    The draw inverts the cumulative distribution (one uniform per row): exact, and on a CPU far cheaper
    than ``torch.multinomial`` or a sort over a 49k vocabulary (which would cost more than the forward)."""
    if temperature <= 0:
        return logits.argmax(-1)
    p_target = torch.softmax(logits.float() / temperature, -1)                          # (b, V)
    cdf = p_target.cumsum(-1)                                                            # (b, V)
    if u is None:
        u = torch.rand(cdf.shape[0], generator=generator)
    u = u.to(cdf.device)[:, None] * cdf[:, -1:]
    return torch.searchsorted(cdf, u)[:, 0].clamp_max(cdf.shape[-1] - 1)


@torch.inference_mode()
def sample_rows(target, prompts: list[list[int]], temperature: float, max_new_tokens: int,
                generator: torch.Generator) -> list[list[int]]:
    """Continue each prompt until a stop token (kept as the last id) or ``max_new_tokens``."""
    if not prompts or any(not p for p in prompts):
        raise ValueError("every prompt needs at least one token")
    model, dev = target.model, target.device
    pad = min(target.stop_ids) if target.stop_ids else 0
    B, L = len(prompts), max(map(len, prompts))
    inp = torch.tensor([[pad] * (L - len(x)) + x for x in prompts], device=dev)         # (B, L)
    att = torch.tensor([[0] * (L - len(x)) + [1] * len(x) for x in prompts], device=dev)
    pos = (att.cumsum(-1) - 1).clamp_min(0)
    cache = GrowingCache()
    out = model(input_ids=inp, attention_mask=att, position_ids=pos, cache=cache, use_cache=True,
                logits_to_keep=1)
    live = torch.arange(B)                                   # original row of each batch row
    alive = torch.ones(B, dtype=torch.bool)                  # batch rows still sampling
    resp: list[list[int]] = [[] for _ in range(B)]
    p_last = pos[:, -1:]
    stops = torch.tensor(sorted(target.stop_ids), device=dev) if target.stop_ids else None
    for _ in range(max_new_tokens):
        u = torch.rand(B, generator=generator)[live]        # one uniform per original row: the draws do not
        nxt = next_tokens(out.logits[:, -1], temperature, generator, u)           # depend on compaction; (b,)
        for row, t, a in zip(live.tolist(), nxt.tolist(), alive.tolist()):
            if a:
                resp[row].append(t)
        done = torch.isin(nxt, stops) if stops is not None else torch.zeros_like(nxt, dtype=torch.bool)
        alive &= ~done.cpu()
        if not bool(alive.any()):
            break
        if int((~alive).sum()) * COMPACT_AT >= len(alive):  # compact: 1/COMPACT_AT of the batch has finished
            k = alive.nonzero()[:, 0]
            cache.batch_select_indices(k.to(dev))
            live, nxt, att, p_last, alive = live[k], nxt[k.to(dev)], att[k.to(dev)], p_last[k.to(dev)], alive[k]
        att = torch.cat([att, torch.ones(len(live), 1, dtype=att.dtype, device=dev)], 1)
        p_last = p_last + 1
        out = model(input_ids=nxt[:, None], attention_mask=att, position_ids=p_last, cache=cache,
                    use_cache=True)
    return resp
