"""Batched sampling from the target for data making (prompts and answers), not for speculative decoding.

Legend: B rows in the batch, b rows still live, L longest prompt, V vocabulary.

Rows are left-padded; a row leaves the batch as soon as it emits a stop token, so no step is spent on
finished rows. Settings are explicit (the temperature; no top-p or top-k truncation); nothing is taken from the model's own
generation defaults.
"""
from __future__ import annotations

import torch


def next_tokens(logits: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    """One token per row from ``softmax(logits / T)``; T = 0 is greedy. logits (b, V) → (b,) token ids.

    The draw inverts the cumulative distribution (one uniform per row): exact, and on a CPU far cheaper
    than ``torch.multinomial`` or a sort over a 49k vocabulary (which would cost more than the forward)."""
    if temperature <= 0:
        return logits.argmax(-1)
    p_target = torch.softmax(logits.float() / temperature, -1)                          # (b, V)
    cdf = p_target.cumsum(-1)                                                            # (b, V)
    u = torch.rand(cdf.shape[0], 1, generator=generator, device=cdf.device) * cdf[:, -1:]
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
    cache = target.new_cache()
    out = model(input_ids=inp, attention_mask=att, position_ids=pos, cache=cache, use_cache=True,
                logits_to_keep=1)
    live = torch.arange(B)                                   # original row of each live batch row
    resp: list[list[int]] = [[] for _ in range(B)]
    p_last = pos[:, -1:]
    stops = torch.tensor(sorted(target.stop_ids), device=dev) if target.stop_ids else None
    for _ in range(max_new_tokens):
        nxt = next_tokens(out.logits[:, -1], temperature, generator)             # (b,)
        for row, t in zip(live.tolist(), nxt.tolist()):
            resp[row].append(t)
        done = torch.isin(nxt, stops) if stops is not None else torch.zeros_like(nxt, dtype=torch.bool)
        if bool(done.all()):
            break
        if bool(done.any()):
            k = (~done).nonzero()[:, 0]
            cache.batch_select_indices(k.to(dev))
            live, nxt, att, p_last = live[k.cpu()], nxt[k], att[k], p_last[k]
        att = torch.cat([att, torch.ones(len(live), 1, dtype=att.dtype, device=dev)], 1)
        p_last = p_last + 1
        out = model(input_ids=nxt[:, None], attention_mask=att, position_ids=p_last, cache=cache,
                    use_cache=True)
    return resp
