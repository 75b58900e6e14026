"""The decode loop of one request: prefill, then one speculative round (round.py) after another.

Legend: γ block size, ℓ verified length, m accepted drafts, V vocabulary, T temperature.

    rounds = generate_rounds(target, drafter, "prompt", policy=FixedLength(7))
    for r in rounds: ...          # one Round per verification
    rounds.trace                  # the Trace built so far (complete after the loop)

``drafter=None`` is plain autoregressive decoding through the same wrapper (rounds with ℓ = 0).
Default policy: HardwareAware (Algorithm 1, R = 1) on the target's profile (cost.profile_for) for a
drafter with a confidence head, FixedLength(γ) for one without.

``fallback``: the speculation gate (gate.SpeculationGate) in front of the policy: a round it skips drafts nothing
and is one plain target step (ℓ = 0, ``Round.skipped``). ``True`` / ``False`` / a gate; the default (None) turns it
on where the loop picks its default policy on a CPU target (a draft costs a large share of a step there) and off
otherwise (a given policy, a GPU).
"""
from __future__ import annotations

import time
from typing import Iterator

import torch

from . import settings
from .gate import SpeculationGate
from .cost import profile_for
from .protocol import Context, Drafter
from .round import OneRequest, Request, Speculation, speculative_round, timed
from .sampling import probs_from_logits, sample
from .scheduler import FixedLength, HardwareAware
from .threads import gives_back
from .trace import Round, Trace

MAX_NEW_TOKENS = 4096


def check_settings(max_new_tokens: int, temperature: float) -> None:
    if not isinstance(max_new_tokens, int) or max_new_tokens <= 0:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if max_new_tokens > MAX_NEW_TOKENS:
        raise ValueError(f"max_new_tokens={max_new_tokens} is too large (at most {MAX_NEW_TOKENS})")
    if not isinstance(temperature, (int, float)) or temperature != temperature or temperature < 0:
        raise ValueError(f"temperature must be ≥ 0 (0 = greedy), got {temperature!r}")
    if temperature > 10:
        raise ValueError(f"temperature {temperature} is out of range (0–10)")


class generate_rounds:
    """Iterable over the Rounds of one request; ``.trace`` holds the Trace as it grows."""

    def __init__(self, target, drafter: Drafter | None, prompt: str | None = None, *,
                 prompt_ids: list[int] | None = None, policy=None, temperature: float = 0.0,
                 max_new_tokens: int = 128, seed: int = 0, calibration=None, sps=None,
                 meta: dict | None = None, fallback: bool | SpeculationGate | None = None, clock=time.perf_counter):
        check_settings(max_new_tokens, temperature)
        if prompt_ids is None:
            if prompt is None:
                raise ValueError("give a prompt or prompt_ids")
            prompt_ids = target.chat_ids(prompt)
        if not prompt_ids:
            raise ValueError("the prompt is empty")
        if len(prompt_ids) + max_new_tokens > target.max_context:
            raise ValueError(f"prompt ({len(prompt_ids)} tokens) + max_new_tokens ({max_new_tokens}) "
                             f"exceeds the target's context of {target.max_context} tokens")
        default_policy = drafter is not None and policy is None
        if default_policy:                              # single user: Algorithm 1 with R = 1 on this device
            if drafter.has_confidence:
                policy, sps = HardwareAware(), sps if sps is not None else profile_for(target)
            else:
                policy = FixedLength(drafter.gamma)
        self.target, self.drafter, self.policy = target, drafter, policy
        self.temperature, self.max_new_tokens = float(temperature), max_new_tokens
        if calibration is None and drafter is not None:        # the drafter's saved STS, unless False
            calibration = getattr(drafter, "calibration", None)
        self.calibration, self.sps = (calibration or None), sps
        self.gate = make_gate(fallback, drafter, target, sps, default_policy)
        self.clock = clock
        self.generator = torch.Generator(device=str(target.device)).manual_seed(seed)
        self.trace = Trace(meta=dict(
            target=target.name, drafter=drafter.name if drafter else "plain",
            policy=getattr(policy, "name", "none") if drafter else "none", temperature=self.temperature,
            seed=seed, prompt=prompt, device=str(target.device), dtype=str(target.dtype).replace("torch.", ""),
            gamma=drafter.gamma if drafter else 0, max_new_tokens=max_new_tokens,
            fallback=self.gate is not None,
        ) | dict(meta or {}), prompt_ids=list(prompt_ids), first_token=-1)

    def __iter__(self) -> Iterator[Round]:
        tgt, dr, T, tr = self.target, self.drafter, self.temperature, self.trace
        feats = dr is not None and dr.needs_features
        t_start = self.clock()
        cache, out = tgt.prefill(tr.prompt_ids, features=feats, last_only=True)   # logits (1, 1, V)
        x0 = sample(probs_from_logits(out.logits[0, -1], T), self.generator)
        tr.first_token, tr.first_text = x0, tgt.token_text(x0)
        tr.t_prefill = self.clock() - t_start
        state = dr.begin(Context(tr.prompt_ids, out.features[0] if feats else None)) if dr else None
        spec = Speculation(tgt, dr, self.policy, self.sps, T, self.calibration)
        req = Request(state, x0, len(tr.prompt_ids), self.max_new_tokens - 1, self.generator, self.gate,
                      stopped=x0 in tgt.stop_ids)
        verifier = OneRequest(tgt, cache, req.pos)
        while not req.done:                      # one round: draft → calibrate → ℓ → verify → commit
            r, = speculative_round(spec, [req], verifier, timed(self.clock))
            tr.rounds.append(r)
            tr.t_total = self.clock() - t_start
            yield r
        tr.t_total = self.clock() - t_start


def make_gate(fallback, drafter, target, sps, default_policy: bool) -> SpeculationGate | None:
    """The loop's speculation gate: None without a drafter or when off; ``fallback=None`` is on exactly where the
    loop picked its default policy for a CPU target (unless ``DSPARK_FALLBACK=0``)."""
    if drafter is None or fallback is False:
        return None
    if isinstance(fallback, SpeculationGate):
        fallback.reset()
        return fallback
    if fallback is None and not (default_policy and str(getattr(target, "device", "cpu")).startswith("cpu")
                                 and settings.fallback_default()):
        return None
    if fallback not in (None, True):
        raise ValueError(f"fallback must be True, False, None or a SpeculationGate, got {fallback!r}")
    return SpeculationGate(sps if sps is not None else profile_for(target))


@gives_back
def speculative_generate(target, drafter: Drafter | None, prompt: str | None = None, **kw) -> Trace:
    """Decode one request to the end and return its Trace."""
    rounds = generate_rounds(target, drafter, prompt, **kw)
    for _ in rounds:
        pass
    return rounds.trace


def plain_generate(target, prompt: str | None = None, **kw) -> Trace:
    """Autoregressive decoding through the same wrapper (one token per round)."""
    return speculative_generate(target, None, prompt, **kw)
