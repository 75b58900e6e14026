"""Batched speculative decoding of a few requests (R ≤ 8) as one call: the live engine (serving/engine.py) run to
the end in the calling thread — one target forward verifies every request's block each round, the policy allocates
lengths across the requests — and the simulation (serving.simulate) checked against the real thing.

Legend: R requests, ℓ_r verified length, m_r accepted, B = Σ_r (1 + ℓ_r) tokens a forward verifies.

Each request keeps its own drafter state, generator and Trace (the same Round records as decode.py), so every
request's output law is the target's (verify_block per row), whatever the other requests do; where the engine is
exact (the target on the fused native layers) each request's tokens are those of decoding it alone with the same
seed and lengths (tests/test_batched.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..cost import profile_for
from ..decode import check_settings, make_gate
from ..scheduler import FixedLength
from ..threads import gives_back
from ..trace import Trace
from .engine import EngineRound, LiveEngine

MAX_BATCH = 8


@dataclass
class BatchResult:
    traces: list[Trace]
    rounds: list[EngineRound] = field(default_factory=list)
    t_total: float = 0.0

    @property
    def tokens(self) -> int:
        return sum(r.committed for r in self.rounds)

    @property
    def throughput(self) -> float:
        """Committed tokens per second over the decoding rounds (prefill excluded)."""
        t = sum(r.t_draft + r.t_verify for r in self.rounds)
        return self.tokens / t if t > 0 else float("nan")


@gives_back
def batched_generate(target, drafter, prompts: list[str] | None = None, *, prompt_ids: list[list[int]] | None = None,
                     policy=None, sps=None, temperature: float = 0.0, max_new_tokens: int = 64,
                     seed: int = 0, fallback: bool = False) -> BatchResult:
    """Decode R ≤ 8 requests together, one verification forward per round; request r samples from seed + r. → a
    Trace per request and the engine's rounds. ``fallback=True`` gives each request its own speculation gate."""
    check_settings(max_new_tokens, temperature)
    if fallback not in (True, False):
        raise ValueError(f"fallback must be True or False in batched decoding, got {fallback!r}")
    if prompt_ids is None:
        if not prompts:
            raise ValueError("give prompts or prompt_ids")
        prompt_ids = [target.chat_ids(p) for p in prompts]
    R = len(prompt_ids)
    if not 1 <= R <= MAX_BATCH:
        raise ValueError(f"batched decoding runs 1…{MAX_BATCH} requests, got {R}")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("a prompt is empty")
    sps = sps if sps is not None else profile_for(target)
    eng = LiveEngine(target, drafter, policy=policy or FixedLength(drafter.gamma), sps=sps,
                     temperature=temperature, max_live=R)
    t_start = time.perf_counter()
    jobs = [eng.submit(prompt_ids=list(p), max_new_tokens=max_new_tokens, seed=seed + r, meta={"batched": R},
                       gate=make_gate(fallback, drafter, target, sps, False)) for r, p in enumerate(prompt_ids)]
    eng.run_until_idle()
    traces = [j.result() for j in jobs]
    return BatchResult(traces, list(eng.history), time.perf_counter() - t_start)


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


__all__ = ["batched_generate", "BatchResult", "sim_vs_real", "MAX_BATCH"]
