"""Real batched speculative decoding for a few requests (R ≤ 8): one target forward verifies every
request's block, the policy allocates lengths across requests — the simulation (serving.simulate) checked
against the real thing.

Legend: R requests, W = 1 + max_r ℓ_r block width, L cache columns, ℓ_r verified length, m_r accepted.

One batched KV cache holds every request. Prompts are left-padded; each round is round.speculative_round, the
round single-request decoding runs, with ``PaddedBatch`` as its Verifier: W columns per row, [x0_r, x_{r,1..ℓ_r},
pad…]; the 2-D attention mask (R, L) marks which columns a row may attend to: pads and, after verification, the
rejected slots are switched off for good (holes), so each row sees exactly its committed tokens; position_ids carry
every row's own positions (RoPE); finished requests leave the batch. Each request keeps its own drafter state,
generator and Trace (the same Round records as decode.py), so every request's output law is the target's
(verify_block per row), whatever the other requests do.

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

from ..cost import profile_for
from ..decode import check_settings, make_gate
from ..protocol import Context
from ..round import Request, Speculation, speculative_round, timed
from ..sampling import probs_from_logits, sample
from ..scheduler import FixedLength
from ..threads import gives_back
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

    @classmethod
    def of(cls, rounds: list[Round], width: int, seconds: dict[str, float]) -> "BatchRound":
        """The batch's record of one speculative_round: its requests' Rounds and the round's seconds (t_draft:
        catching up + drafting; t_verify: scheduling + the forward + the verdicts; the commit is outside)."""
        return cls(lengths=[r.ell for r in rounds], accepted=[r.accepted for r in rounds],
                   B=sum(1 + r.ell for r in rounds), width=width,
                   t_draft=seconds.get("t_catch_up", 0.0) + seconds.get("t_draft", 0.0),
                   t_verify=seconds.get("t_schedule", 0.0) + seconds.get("t_verify", 0.0),
                   committed=sum(r.n_committed for r in rounds))


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


class PaddedBatch:
    """The Verifier of several requests in one batched KV cache (round.Verifier): each round appends W columns per
    row, [x0_r, x_{r,1..ℓ_r}, pad…]; the attention mask (n, L) switches pads and rejected slots off for good."""

    def __init__(self, target, cache, mask: torch.Tensor, pos: list[int], pad: int):
        self.target, self.cache, self.mask, self.pos, self.pad = target, cache, mask, list(pos), pad
        self.width = 0                                                                         # W of the last round

    def forward(self, blocks, features):
        W = self.width = max(map(len, blocks))
        lens = torch.tensor([len(b) for b in blocks])
        ids = torch.tensor([b + [self.pad] * (W - len(b)) for b in blocks])                   # (n, W)
        new_mask = (torch.arange(W)[None, :] < lens[:, None]).to(self.mask.dtype)             # (n, W)
        new_pos = torch.tensor(self.pos)[:, None] + torch.arange(W)                           # (n, W)
        self.mask = torch.cat([self.mask, new_mask], 1)                                       # (n, L + W)
        out = self.target.forward(ids, self.cache, features=features, attention_mask=self.mask, position_ids=new_pos)
        return [(out.logits[i, : len(b)], out.features[i, : len(b)] if out.features is not None else None)
                for i, b in enumerate(blocks)]

    def keep(self, accepted):
        L = self.mask.shape[1]
        for i, m in enumerate(accepted):
            self.mask[i, L - self.width + 1 + m:] = 0                                          # rejected: holes
            self.pos[i] += m + 1

    def select(self, rows: list[int]) -> None:
        """Keep only these rows (finished requests leave the batch)."""
        keep = torch.tensor(rows)
        self.cache.batch_select_indices(keep)
        self.mask, self.pos = self.mask[keep], [self.pos[i] for i in rows]


@gives_back
def batched_generate(target, drafter, prompts: list[str] | None = None, *, prompt_ids: list[list[int]] | None = None,
                     policy=None, sps=None, temperature: float = 0.0, max_new_tokens: int = 64,
                     seed: int = 0, fallback: bool = False) -> BatchResult:
    """Decode R ≤ 8 requests together, one batched verification per round (round.speculative_round); returns a
    Trace per request. ``fallback=True`` gives each request its own speculation gate (gate.SpeculationGate)."""
    check_settings(max_new_tokens, temperature)
    if fallback not in (True, False):
        raise ValueError(f"fallback must be True or False in batched decoding, got {fallback!r}")
    if prompt_ids is None:
        if not prompts:
            raise ValueError("give prompts or prompt_ids")
        prompt_ids = [target.chat_ids(p) for p in prompts]
    R = len(prompt_ids)
    if not 1 <= R <= MAX_BATCH:
        raise ValueError(f"real batched mode runs 1…{MAX_BATCH} requests, got {R}")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("a prompt is empty")
    if max(map(len, prompt_ids)) + (1 + drafter.gamma) * max_new_tokens > target.max_context:
        raise ValueError("prompts + rounds would exceed the target's context; use fewer new tokens")
    policy = policy or FixedLength(drafter.gamma)
    spec = Speculation(target, drafter, policy, sps if sps is not None else profile_for(target), float(temperature),
                       getattr(drafter, "calibration", None))
    t_start = time.perf_counter()
    traces, reqs, verifier = _prefill(spec, prompt_ids, max_new_tokens, seed, fallback)
    res = BatchResult(traces)
    live = [r for r in range(R) if not reqs[r].done]
    if len(live) < R:                                           # requests done at the prefill leave the batch
        verifier.select(live)
    while live:                                                 # batch row i ↔ request live[i]
        phase = timed()
        rounds = speculative_round(spec, [reqs[r] for r in live], verifier, phase)
        for r, rd in zip(live, rounds):
            traces[r].rounds.append(rd)
        res.rounds.append(BatchRound.of(rounds, verifier.width, phase.seconds))
        still = [i for i, r in enumerate(live) if not reqs[r].done]
        if still and len(still) < len(live):                   # finished rows leave the batch
            verifier.select(still)
        live = [live[i] for i in still]
    res.t_total = time.perf_counter() - t_start
    for tr in traces:
        tr.t_total = res.t_total
    return res


def _prefill(spec: Speculation, prompt_ids: list[list[int]], max_new_tokens: int, seed: int, fallback: bool):
    """One left-padded prefill of every prompt; → per request its Trace and Request, and the batch's Verifier."""
    target, drafter, T = spec.target, spec.drafter, spec.temperature
    feats, L0 = drafter.needs_features, max(map(len, prompt_ids))
    pad = min(target.stop_ids) if target.stop_ids else 0
    inp = torch.tensor([[pad] * (L0 - len(p)) + list(p) for p in prompt_ids])                # (R, L0)
    mask = torch.tensor([[0] * (L0 - len(p)) + [1] * len(p) for p in prompt_ids])           # (R, L0)
    posn = (mask.cumsum(-1) - 1).clamp_min(0)
    cache = target.new_cache()
    out = target.forward(inp, cache, features=feats, attention_mask=mask, position_ids=posn)
    traces, reqs = [], []
    for r, p in enumerate(prompt_ids):
        gen = torch.Generator(device=str(target.device)).manual_seed(seed + r)
        tr = Trace(meta=dict(target=target.name, drafter=drafter.name, policy=getattr(spec.policy, "name", ""),
                             temperature=T, seed=seed + r, device=str(target.device), gamma=drafter.gamma,
                             max_new_tokens=max_new_tokens, batched=len(prompt_ids), fallback=fallback),
                   prompt_ids=list(p), first_token=-1)
        x = sample(probs_from_logits(out.logits[r, -1], T), gen)
        tr.first_token, tr.first_text = x, target.token_text(x)
        f = out.features[r, L0 - len(p):] if feats else None                                  # (n, m·d)
        gate = make_gate(fallback, drafter, target, spec.sps, False)
        reqs.append(Request(drafter.begin(Context(list(p), f)), x, len(p), max_new_tokens - 1, gen, gate,
                            stopped=x in target.stop_ids))
        traces.append(tr)
    return traces, reqs, PaddedBatch(target, cache, mask, [len(p) for p in prompt_ids], pad)


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
