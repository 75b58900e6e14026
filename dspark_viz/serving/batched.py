"""Real batched speculative decoding for a few requests (R ≤ 8): one target forward verifies every
request's block, the policy allocates lengths across requests — the simulation (serving.simulate) checked
against the real thing.

Legend: R requests, W = 1 + max_r ℓ_r block width, L cache columns, ℓ_r verified length, m_r accepted.

One batched KV cache holds every request. Prompts are left-padded; each round appends W columns per row:
[x0_r, x_{r,1..ℓ_r}, pad…]. The 2-D attention mask (R, L) marks which columns a row may attend to: pads and,
after verification, the rejected slots are switched off for good (holes), so each row sees exactly its
committed tokens; position_ids carry every row's own positions (RoPE); finished requests leave the batch. Each request keeps its own drafter
state, generator and Trace (the same Round records as decode.py), so every request's output law is the
target's (verify_block per row), whatever the other requests do.

Outside the width-invariance promise of the few-token path (dspark_viz/fast): a batch of several rows with its
padding mask takes the lean Python layers — torch's SDPA under the mask, and torch's GEMM once the batch holds
more than 8 tokens — whose summation orders depend on the batch and block shape, so a request's logits may
differ in the last bits from the same request decoded alone, and a greedy output may then differ from
single-request greedy decoding.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..decode import calibrated_confidence, check_settings, draft_tokens
from ..cost import profile_for
from ..protocol import Context
from ..sampling import probs_from_logits, sample, verify_block
from ..scheduler import FixedLength
from ..trace import Round, Trace

MAX_BATCH = 8


@dataclass
class BatchRound:
    """One batched verification: what the scheduler chose and what it cost (for the sim-vs-real gap)."""
    lengths: list[int]          # (R_live,) ℓ_r
    accepted: list[int]         # (R_live,) m_r
    B: int                      # Σ (1 + ℓ_r): tokens the engine verified
    width: int                  # W: padded block width actually run
    t_draft: float              # seconds drafting (all requests, one after another)
    t_verify: float             # seconds in the batched target forward + acceptance
    committed: int              # tokens committed this round (all requests)


@dataclass
class BatchResult:
    traces: list[Trace]
    rounds: list[BatchRound] = field(default_factory=list)
    t_total: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(r.committed for r in self.rounds)

    @property
    def throughput(self) -> float:
        """Committed tokens per second over the decoding rounds (prefill excluded)."""
        t = sum(r.t_draft + r.t_verify for r in self.rounds)
        return self.tokens / t if t > 0 else float("nan")


def batched_generate(target, drafter, prompts: list[str] | None = None, *, prompt_ids: list[list[int]] | None = None,
                     policy=None, sps=None, temperature: float = 0.0, max_new_tokens: int = 64,
                     seed: int = 0) -> BatchResult:
    """Decode R ≤ 8 requests together, one batched verification per round; returns a Trace per request."""

    check_settings(max_new_tokens, temperature)
    if prompt_ids is None:
        if not prompts:
            raise ValueError("give prompts or prompt_ids")
        prompt_ids = [target.chat_ids(p) for p in prompts]
    R = len(prompt_ids)
    if not 1 <= R <= MAX_BATCH:
        raise ValueError(f"real batched mode runs 1…{MAX_BATCH} requests, got {R}")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("a prompt is empty")
    L0 = max(map(len, prompt_ids))
    if L0 + (1 + drafter.gamma) * max_new_tokens > target.max_context:
        raise ValueError("prompts + rounds would exceed the target's context; use fewer new tokens")
    policy = policy or FixedLength(drafter.gamma)
    sps = sps if sps is not None else profile_for(target)
    T, dev, feats = float(temperature), target.device, drafter.needs_features
    pad = min(target.stop_ids) if target.stop_ids else 0
    gens = [torch.Generator(device=str(dev)).manual_seed(seed + r) for r in range(R)]
    t_start = time.perf_counter()

    # -- prefill: left-padded batch ----------------------------------------------------------------
    inp = torch.tensor([[pad] * (L0 - len(p)) + list(p) for p in prompt_ids])                # (R, L0)
    mask = torch.tensor([[0] * (L0 - len(p)) + [1] * len(p) for p in prompt_ids])           # (R, L0)
    posn = (mask.cumsum(-1) - 1).clamp_min(0)
    cache = target.new_cache()
    out = target.forward(inp, cache, features=feats, attention_mask=mask, position_ids=posn)
    traces, states, x0, pos = [], [], [], []
    for r, p in enumerate(prompt_ids):
        tr = Trace(meta=dict(target=target.name, drafter=drafter.name, policy=getattr(policy, "name", ""),
                             temperature=T, seed=seed + r, device=str(dev), gamma=drafter.gamma,
                             max_new_tokens=max_new_tokens, batched=R), prompt_ids=list(p), first_token=-1)
        x = sample(probs_from_logits(out.logits[r, -1], T), gens[r])
        tr.first_token, tr.first_text = x, target.token_text(x)
        f = out.features[r, L0 - len(p):] if feats else None                                  # (n, m·d)
        states.append(drafter.begin(Context(list(p), f)))
        traces.append(tr)
        x0.append(x)
        pos.append(len(p))
    res = BatchResult(traces)
    n_gen = [1] * R
    live = [r for r in range(R) if x0[r] not in target.stop_ids and max_new_tokens > 1]

    if len(live) < R:                                           # requests done at the prefill leave the batch
        keep = torch.tensor(live)
        cache.batch_select_indices(keep)
        mask = mask[keep]
    while live:                                                 # batch row i ↔ request live[i]
        n = len(live)
        t0 = time.perf_counter()
        drafts = [drafter.propose(states[r], x0[r], pos[r], T, gens[r]) for r in live]
        t1 = time.perf_counter()
        conf = [d.confidence for d in drafts]
        cal = [calibrated_confidence(d, getattr(drafter, "calibration", None)) for d in drafts]
        used = [k if k is not None else c for c, k in zip(conf, cal)]
        sched = policy.choose(used, sps)
        ells = [max(0, min(e, max_new_tokens - n_gen[r] - 1, len(d.tokens)))
                for e, r, d in zip(sched.lengths, live, drafts)]
        W = 1 + max(ells)
        ids = torch.tensor([[x0[r]] + d.tokens[:e] + [pad] * (W - 1 - e) for r, d, e in zip(live, drafts, ells)])
        new_mask = (torch.arange(W)[None, :] <= torch.tensor(ells)[:, None]).to(mask.dtype)   # (n, W)
        new_pos = torch.tensor(pos)[live][:, None] + torch.arange(W)                          # (n, W)
        mask = torch.cat([mask, new_mask], 1)                                                 # (n, L + W)
        out = target.forward(ids, cache, features=feats, attention_mask=mask, position_ids=new_pos)
        verdicts = []
        for i, r in enumerate(live):
            e = ells[i]
            p_t = probs_from_logits(out.logits[i, : e + 1], T)                                # (ℓ+1, V)
            v = verify_block(drafts[i].tokens[:e], drafts[i].p_draft[:e] if e else None, p_t, gens[r],
                             target.stop_ids)
            verdicts.append(v)
            mask[i, mask.shape[1] - W + 1 + v.accepted:] = 0                                 # rejected: holes
        t2 = time.perf_counter()
        still, committed = [], 0
        for i, r in enumerate(live):
            v, d, e = verdicts[i], drafts[i], ells[i]
            m = v.accepted
            drafter.commit(states[r], [x0[r]] + d.tokens[:m], out.features[i, : m + 1] if feats else None)
            rd = Round(index=len(traces[r].rounds), anchor=x0[r], anchor_pos=pos[r],
                       drafts=draft_tokens(target, d, conf[i], cal[i], e, m, v.p_target_at), ell=e, accepted=m,
                       bonus=v.bonus, bonus_text=target.token_text(v.bonus) if v.bonus is not None else "",
                       bonus_source=v.bonus_source, source=d.source, t_draft=(t1 - t0) / n,
                       t_verify=(t2 - t1) / n, stopped=v.stopped)
            traces[r].rounds.append(rd)
            n_gen[r] += rd.n_committed
            committed += rd.n_committed
            pos[r] += m + 1
            if v.bonus is not None:
                x0[r] = v.bonus
            if not v.stopped and n_gen[r] < max_new_tokens:
                still.append(i)
        res.rounds.append(BatchRound(lengths=ells, accepted=[v.accepted for v in verdicts],
                                     B=sum(1 + e for e in ells), width=W, t_draft=t1 - t0, t_verify=t2 - t1,
                                     committed=committed))
        if len(still) < n and still:                                              # finished rows leave the batch
            keep = torch.tensor(still)
            cache.batch_select_indices(keep)
            mask = mask[keep]
        live = [live[i] for i in still]
    res.t_total = time.perf_counter() - t_start
    for tr in traces:
        tr.t_total = res.t_total
    return res


def sim_vs_real(res: BatchResult, sps, draft_s: float | None = None) -> dict:
    """Predicted (profile) vs measured round times of a real batched run: the simulation's error.

    predicted round = 1/SPS(B) + draft time (measured draft time of that round unless draft_s is given)."""
    import numpy as np

    meas = np.array([r.t_draft + r.t_verify for r in res.rounds])
    pred = np.array([float(sps.step_time(r.B)) + (r.t_draft if draft_s is None else draft_s * len(r.lengths))
                     for r in res.rounds])
    verify_meas = np.array([r.t_verify for r in res.rounds])
    verify_pred = np.array([float(sps.step_time(r.B)) for r in res.rounds])
    return dict(rounds=len(res.rounds), tokens=res.tokens, real_throughput=res.throughput,
                predicted_throughput=res.tokens / pred.sum() if pred.sum() > 0 else float("nan"),
                round_time_ratio=float(np.median(meas / pred)) if len(meas) else float("nan"),
                verify_time_ratio=float(np.median(verify_meas / verify_pred)) if len(meas) else float("nan"),
                mean_B=float(np.mean([r.B for r in res.rounds])) if res.rounds else float("nan"),
                mean_width=float(np.mean([r.width for r in res.rounds])) if res.rounds else float("nan"))


__all__ = ["batched_generate", "BatchResult", "BatchRound", "sim_vs_real", "MAX_BATCH"]
