"""The decode loop: draft → schedule → verify → commit, one Round at a time.

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
from .sampling import probs_from_logits, sample, verify_block, verify_greedy
from .scheduler import FixedLength, HardwareAware
from .trace import DraftToken, Round, Trace

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
        tgt, dr, T, g, tr = self.target, self.drafter, self.temperature, self.generator, self.trace
        feats = dr is not None and dr.needs_features
        t_start = self.clock()
        cache, out = tgt.prefill(tr.prompt_ids, features=feats, last_only=True)   # logits (1, 1, V)
        x0 = sample(probs_from_logits(out.logits[0, -1], T), g)
        tr.first_token, tr.first_text = x0, tgt.token_text(x0)
        tr.t_prefill = self.clock() - t_start
        state = dr.begin(Context(tr.prompt_ids, out.features[0] if feats else None)) if dr else None
        pos, n_gen, stop = len(tr.prompt_ids), 1, x0 in tgt.stop_ids
        while not stop and n_gen < self.max_new_tokens:
            r = self._round(cache, state, x0, pos, self.max_new_tokens - n_gen, len(tr.rounds))
            tr.rounds.append(r)
            tr.t_total = self.clock() - t_start
            yield r
            stop, n_gen, pos, x0 = r.stopped, n_gen + r.n_committed, pos + r.accepted + 1, r.bonus
        tr.t_total = self.clock() - t_start

    def _round(self, cache, state, x0: int, pos: int, budget: int, index: int) -> Round:
        """One round in four timed phases: draft, schedule, verify, commit (the Trace's time split). A round the
        gate skips drafts nothing (the drafter only sees the anchor) and verifies ℓ = 0: one plain target step."""
        clock = _Stopwatch(self.clock)
        decision = self.gate.decide() if self.gate is not None else None
        skip = decision is not None and not decision.draft
        if not skip and self.drafter is not None:      # the skipped rounds' positions: timed apart (t_catch_up)
            clock.time("catch_up", self.drafter.catch_up, state)
        draft = clock.time("draft", self._skip if skip else self._draft, state, x0, pos)
        conf, cal, ell, sched = clock.time("schedule", self._schedule, draft, budget)
        toks, out, v = clock.time("verify", self._verify, cache, x0, pos, draft, ell)
        drafts = clock.time("other", self._commit, state, x0, toks, out, v, draft, conf, cal, ell)
        clock.seconds["t_other"] += clock.seconds.get("t_catch_up", 0.0)     # the catch-up is part of t_other
        r = Round(
            index=index, anchor=x0, anchor_pos=pos, drafts=drafts, ell=ell, accepted=v.accepted, bonus=v.bonus,
            bonus_text=self.target.token_text(v.bonus) if v.bonus is not None else "", bonus_source=v.bonus_source,
            source=draft.source if draft else "none", stopped=v.stopped,
            schedule=_sched_diag(sched) if sched is not None else None, skipped=skip,
            gate=decision.to_dict() if decision is not None else None, **clock.seconds,
        )
        if self.gate is not None:
            self.gate.observe_round(r)
        return r

    def _draft(self, state, x0: int, pos: int):
        dr = self.drafter
        return dr.propose(state, x0, pos, self.temperature, self.generator) if dr else None

    def _skip(self, state, x0: int, pos: int):
        """No draft this round: the drafter sees the anchor as ``propose`` would, and proposes nothing."""
        if self.drafter is not None:
            self.drafter.skip(state, x0, pos)
        return None

    def _schedule(self, draft, budget: int):
        """→ raw c_k, calibrated c'_k, ℓ (≤ the drafts and the token budget), the policy's Schedule or None."""
        conf = draft.confidence if draft else None
        cal = calibrated_confidence(draft, self.calibration)
        sched = None
        if draft is None or not draft.tokens:
            ell = 0
        else:
            c_used = cal if cal is not None else conf
            s = self.policy.choose([c_used], self.sps)
            ell, sched = s.lengths[0], s
        ell = max(0, min(ell, budget - 1, len(draft.tokens) if draft else 0))  # commit ≤ budget
        return conf, cal, ell, sched

    def _verify(self, cache, x0: int, pos: int, draft, ell: int):
        """One target forward over [x0, x_1..x_ℓ], the lossless accept / reject, the cache cut after x_m."""
        tgt, dr = self.target, self.drafter
        toks = draft.tokens[:ell] if draft else []
        out = tgt.forward(torch.tensor([[x0] + toks]), cache, features=dr is not None and dr.needs_features,
                          last_only=ell == 0)
        if self.temperature == 0:                                              # the same verdict, from argmaxes
            v = verify_greedy(toks, out.logits[0], tgt.stop_ids)
        else:
            p_target = probs_from_logits(out.logits[0], self.temperature)     # (ℓ+1, V)
            v = verify_block(toks, draft.p_draft[:ell] if ell else None, p_target, self.generator, tgt.stop_ids)
        tgt.crop(cache, pos + v.accepted + 1)                                  # keep x0, x_1..x_m
        return toks, out, v

    def _commit(self, state, x0: int, toks, out, v, draft, conf, cal, ell: int) -> list[DraftToken]:
        """The drafter sees the committed positions; the Trace gets this round's drafted slots."""
        m = v.accepted
        if self.drafter is not None:
            feats = out.features[0, : m + 1] if out.features is not None else None
            self.drafter.commit(state, [x0] + toks[:m], feats)
            if draft is not None:               # a drafted round pays for its own positions (a skipped one defers)
                self.drafter.catch_up(state)
        return draft_tokens(self.target, draft, conf, cal, ell, m, v.p_target_at) if draft else []


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


class _Stopwatch:
    """Seconds per phase of a round, as the Round's t_<phase> fields (``clock``: seconds, monotonic)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float] = {}

    def time(self, phase: str, fn, *args):
        t0 = self.clock()
        result = fn(*args)
        self.seconds[f"t_{phase}"] = self.clock() - t0
        return result


def calibrated_confidence(draft, calibration) -> list[float] | None:
    """The calibrated c'_k a round schedules with: the drafter's own (Draft.calibrated, e.g. the hybrid's
    lookup estimates), else ``calibration`` applied to the raw confidences, else None."""
    if draft is None:
        return None
    if draft.calibrated is not None:
        return draft.calibrated
    conf = draft.confidence
    return calibration.apply(conf) if (conf is not None and calibration is not None) else None


def draft_tokens(target, draft, conf, cal, ell: int, m: int, p_at: list[float]) -> list[DraftToken]:
    """The Trace's view of one round's drafted slots: status, probabilities, confidences, survival."""
    used = cal if cal is not None else conf
    surv, a = [], 1.0
    for c in (used or []):
        a *= float(c)
        surv.append(a)
    rows = draft.p_draft
    out = []
    for i, x in enumerate(draft.tokens):
        k = i + 1
        status = ("accepted" if k <= m else "rejected" if k == m + 1 else "not_reached") if k <= ell else "pruned"
        out.append(DraftToken(
            k=k, token=int(x), text=target.token_text(int(x)), p_draft=float(rows[i, x]),
            p_target=p_at[i] if i < len(p_at) else None,
            confidence=float(conf[i]) if conf is not None else None,
            confidence_cal=float(cal[i]) if cal is not None else None,
            survival=surv[i] if surv else None, status=status,
            diag=draft.diag[i] if draft.diag else None,
        ))
    return out


def _sched_diag(s, max_path: int = 256) -> dict:
    """The policy's decision for the chart faces: lengths, admission path (up to the stop), info."""
    path = list(getattr(s, "path", []) or [])
    stop = getattr(s, "stop_at", None)
    keep = max(max_path, (stop or 0) + 2)
    return {"lengths": list(s.lengths), "path": path[:keep], "stop_at": stop,
            "theta_best": getattr(s, "theta_best", None), "info": dict(getattr(s, "info", {}) or {})}


def speculative_generate(target, drafter: Drafter | None, prompt: str | None = None, **kw) -> Trace:
    """Decode one request to the end and return its Trace."""
    rounds = generate_rounds(target, drafter, prompt, **kw)
    for _ in rounds:
        pass
    return rounds.trace


def plain_generate(target, prompt: str | None = None, **kw) -> Trace:
    """Autoregressive decoding through the same wrapper (one token per round)."""
    return speculative_generate(target, None, prompt, **kw)
