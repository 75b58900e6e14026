"""One speculative round, for one request or for several verified in one target forward.

Legend: γ block size, ℓ verified length, m accepted drafts, V vocabulary, T temperature, n requests in the round.

The paper's loop (§3; Algorithm 1 chooses ℓ), one step per line of ``speculative_round``:

    draft      each request's drafter proposes x_1..x_γ with exact p_draft rows and raw confidences c_k
    calibrate  c'_k = STS(c_k) (the drafter's own calibration, or the one the caller gives)
    choose ℓ   the policy allocates verification lengths across the round's requests (ℓ ≤ budget − 1, ≤ γ);
               where it would verify nothing whatever the confidences (Policy.verifies_nothing), none drafts
    forward    one target forward over every request's block [x0, x_1..x_ℓ]
    verify     the lossless accept / reject per request (greedy from argmaxes at T = 0), the caches cut after x_m
    commit     each drafter sees its committed positions; each request gets a Round and moves on

What differs between one request and a batch is only the ``Verifier``: how the blocks enter the target and how the
rejected slots leave its cache (``OneRequest`` here; the live engine's ``SlotVerifier`` in serving/engine.py).
Each request keeps its own generator and verdict, so its output law is the target's whatever else shares the
forward. Timing is the caller's: ``speculative_round`` runs each step through ``phase`` (``timed`` gives the Round's t_<step> fields).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import torch

from .gate import SpeculationGate
from .protocol import Draft, Drafter
from .sampling import Verdict, probs_from_logits, verify_block, verify_greedy
from .trace import DraftToken, Round


def cap_length(ell: int, budget: int, n_drafted: int) -> int:
    """ℓ as verified: at most the drafts there are, and at most budget − 1 so that the m accepted drafts and the
    bonus never commit more than the request's remaining ``budget`` tokens. The one place this cap lives."""
    return max(0, min(ell, budget - 1, n_drafted))


@dataclass
class Speculation:
    """What every request of a round shares: the target, the drafter (None: plain decoding), the policy and the
    device profile it schedules on, the temperature, the calibration applied to raw confidences."""
    target: Any
    drafter: Drafter | None
    policy: Any = None
    sps: Any = None
    temperature: float = 0.0
    calibration: Any = None


@dataclass
class Request:
    """One request between rounds: what a round reads, and what it advances."""
    state: Any                         # the drafter's per-request state (Drafter.begin), None without a drafter
    anchor: int                        # x0: the last committed token, not yet in the target's cache
    pos: int                           # x0's position in the sequence
    budget: int                        # tokens it may still commit (≥ 1)
    generator: torch.Generator
    gate: SpeculationGate | None = None
    rounds: int = 0                    # rounds decoded so far (the next Round's index)
    stopped: bool = False
    temperature: float | None = None   # this request's T (None: the round's, Speculation.temperature)

    @property
    def done(self) -> bool:
        return self.stopped or self.budget <= 0

    def T(self, spec: "Speculation") -> float:
        return spec.temperature if self.temperature is None else self.temperature


class Verifier(Protocol):
    """How a round's blocks enter the target and how the rejected slots leave its cache."""

    def forward(self, blocks: list[list[int]], features: bool) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """blocks: per request [x0, x_1..x_ℓ] → per request its logits (ℓ+1, V) and target features
        (ℓ+1, m·d) or None."""

    def keep(self, accepted: list[int]) -> None:
        """Cut each request's cache after x_m (m = accepted[i]): x0 and the accepted drafts stay."""


class OneRequest:
    """The Verifier of a single request: its own KV cache, the block as one row."""

    def __init__(self, target, cache, pos: int):
        self.target, self.cache, self.pos = target, cache, pos        # pos: the anchor's position

    def forward(self, blocks, features):
        out = self.target.forward(torch.tensor(blocks), self.cache, features=features,
                                  last_only=len(blocks[0]) == 1)                     # logits (1, ℓ+1, V)
        return [(out.logits[0], out.features[0] if out.features is not None else None)]

    def keep(self, accepted):
        self.target.crop(self.cache, self.pos + accepted[0] + 1)                     # keep x0, x_1..x_m
        self.pos += accepted[0] + 1


class untimed:
    """The default ``phase``: runs each step and records nothing."""

    def __call__(self, step: str, fn: Callable, *args):
        return fn(*args)

    def share(self, n: int) -> dict[str, float]:
        return {}


class timed(untimed):
    """A ``phase`` that records the seconds of each step; ``share(n)``: one request's Round fields t_<step>."""

    def __init__(self, clock=time.perf_counter):
        self.clock, self.seconds = clock, {}

    def __call__(self, step: str, fn: Callable, *args):
        t0 = self.clock()
        result = fn(*args)
        self.seconds[f"t_{step}"] = self.seconds.get(f"t_{step}", 0.0) + self.clock() - t0
        return result

    def share(self, n: int) -> dict[str, float]:
        secs = {k: s / n for k, s in self.seconds.items()}
        secs["t_other"] = secs.get("t_other", 0.0) + secs.get("t_catch_up", 0.0)   # the catch-up is part of t_other
        return secs


def speculative_round(spec: Speculation, reqs: list[Request], verifier: Verifier, phase: untimed | None = None
                      ) -> list[Round]:
    """One round for every request in ``reqs`` (one target forward); advances each request, returns its Round."""
    phase = phase if phase is not None else untimed()
    decisions = [q.gate.decide() if q.gate is not None else None for q in reqs]   # the speculation gate
    drafting = [spec.drafter is not None and not (d is not None and not d.draft) for d in decisions]
    if any(drafting) and getattr(spec.policy, "verifies_nothing", None) \
            and spec.policy.verifies_nothing(sum(drafting), spec.sps):
        drafting = [False] * len(reqs)            # the policy would verify no draft of any request: none drafts
    if any(drafting):
        phase("catch_up", catch_up, spec, reqs, drafting)
    drafts = phase("draft", draft, spec, reqs, drafting)                     # per request a Draft or None
    conf, cal = phase("schedule", calibrate, spec, drafts)                   # raw c_k, calibrated c'_k
    ells, sched = phase("schedule", choose_lengths, spec, reqs, drafts, conf, cal)
    blocks = [[q.anchor] + (d.tokens[:e] if d else []) for q, d, e in zip(reqs, drafts, ells)]
    outs = phase("verify", verifier.forward, blocks, spec.drafter is not None and spec.drafter.needs_features)
    verdicts = phase("verify", verify, spec, reqs, drafts, blocks, outs)
    phase("verify", verifier.keep, [v.accepted for v in verdicts])
    views = phase("other", commit, spec, reqs, drafts, blocks, outs, verdicts, conf, cal)
    secs = phase.share(len(reqs))                                            # each request's share of the seconds
    return [advance(spec, q, d, e, v, view, sched, g, secs)
            for q, d, e, v, view, g in zip(reqs, drafts, ells, verdicts, views, decisions)]


def catch_up(spec: Speculation, reqs: list[Request], drafting: list[bool]) -> None:
    """Before a drafted round the drafter folds in the commits it took lazily (after skipped rounds)."""
    for q, on in zip(reqs, drafting):
        if on:
            spec.drafter.catch_up(q.state)


def draft(spec: Speculation, reqs: list[Request], drafting: list[bool]) -> list[Draft | None]:
    """γ drafts per drafting request; a request the gate skips shows the drafter its anchor and gets None."""
    dr, out = spec.drafter, []
    for q, on in zip(reqs, drafting):
        if on:
            out.append(dr.propose(q.state, q.anchor, q.pos, q.T(spec), q.generator))
        else:
            if dr is not None:
                dr.skip(q.state, q.anchor, q.pos)
            out.append(None)
    return out


def calibrate(spec: Speculation, drafts: list[Draft | None]):
    """→ (raw c_k per request, calibrated c'_k per request); None where there is none."""
    return ([d.confidence if d else None for d in drafts],
            [calibrated_confidence(d, spec.calibration) for d in drafts])


def choose_lengths(spec: Speculation, reqs: list[Request], drafts, conf, cal):
    """ℓ per request: the policy's allocation over the requests that drafted (calibrated confidences where there
    are some), each capped by ``cap_length``; → (ℓ per request, the policy's Schedule or None)."""
    live = [i for i, d in enumerate(drafts) if d is not None and d.tokens]
    sched = (spec.policy.choose([cal[i] if cal[i] is not None else conf[i] for i in live], spec.sps)
             if live else None)
    ells = [0] * len(reqs)
    for j, i in enumerate(live):
        ells[i] = sched.lengths[j]
    return [cap_length(e, q.budget, len(d.tokens) if d else 0) for e, q, d in zip(ells, reqs, drafts)], sched


def verify(spec: Speculation, reqs: list[Request], drafts, blocks, outs) -> list[Verdict]:
    """The lossless verdict per request: rejection sampling against p_target (T > 0) or argmax agreement (T = 0)."""
    tgt, verdicts = spec.target, []
    for q, d, blk, (logits, _f) in zip(reqs, drafts, blocks, outs):
        toks, ell, T = blk[1:], len(blk) - 1, q.T(spec)
        if T == 0:
            verdicts.append(verify_greedy(toks, logits[: ell + 1], tgt.stop_ids))
        else:
            p_target = probs_from_logits(logits[: ell + 1], T)                        # (ℓ+1, V)
            verdicts.append(verify_block(toks, d.p_draft[:ell] if ell else None, p_target, q.generator,
                                         tgt.stop_ids))
    return verdicts


def commit(spec: Speculation, reqs: list[Request], drafts, blocks, outs, verdicts, conf, cal) -> list[list[DraftToken]]:
    """Each drafter sees its committed positions [x0, x_1..x_m] and their features; → the Trace's drafted slots."""
    dr, views = spec.drafter, []
    for q, d, blk, (_l, feats), v, c, k in zip(reqs, drafts, blocks, outs, verdicts, conf, cal):
        m = v.accepted
        if dr is not None:
            dr.commit(q.state, blk[: m + 1], feats[: m + 1] if feats is not None else None)
            if d is not None:               # a drafted round pays for its own positions (a skipped one defers)
                dr.catch_up(q.state)
        views.append(draft_tokens(spec.target, d, c, k, len(blk) - 1, m, v.p_target_at) if d else [])
    return views


def advance(spec: Speculation, q: Request, d, ell: int, v: Verdict, view, sched, decision, secs) -> Round:
    """The request's Round (with its share ``secs`` of the round's seconds); its next anchor, position, budget."""
    tgt = spec.target
    r = Round(
        index=q.rounds, anchor=q.anchor, anchor_pos=q.pos, drafts=view, ell=ell, accepted=v.accepted,
        bonus=v.bonus, bonus_text=tgt.token_text(v.bonus) if v.bonus is not None else "",
        bonus_source=v.bonus_source, source=d.source if d else "none", stopped=v.stopped,
        schedule=schedule_diag(sched) if (sched is not None and d is not None and d.tokens) else None,
        skipped=spec.drafter is not None and d is None,
        gate=decision.to_dict() if decision is not None else None, **secs,
    )
    if q.gate is not None:
        q.gate.observe_round(r)
    q.rounds, q.pos, q.budget, q.stopped = q.rounds + 1, q.pos + v.accepted + 1, q.budget - r.n_committed, v.stopped
    if v.bonus is not None:
        q.anchor = v.bonus
    return r


def calibrated_confidence(draft: Draft | None, calibration) -> list[float] | None:
    """The calibrated c'_k a round schedules with: the drafter's own (Draft.calibrated, e.g. the hybrid's
    lookup estimates), else ``calibration`` applied to the raw confidences, else None."""
    if draft is None:
        return None
    if draft.calibrated is not None:
        return draft.calibrated
    conf = draft.confidence
    return calibration.apply(conf) if (conf is not None and calibration is not None) else None


def draft_tokens(target, draft: Draft, conf, cal, ell: int, m: int, p_at: list[float]) -> list[DraftToken]:
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


def schedule_diag(s, max_path: int = 256) -> dict:
    """The policy's decision for the chart faces: lengths, admission path (up to the stop), info."""
    path = list(getattr(s, "path", []) or [])
    stop = getattr(s, "stop_at", None)
    keep = max(max_path, (stop or 0) + 2)
    return {"lengths": list(s.lengths), "path": path[:keep], "stop_at": stop,
            "theta_best": getattr(s, "theta_best", None), "info": dict(getattr(s, "info", {}) or {})}


__all__ = ["speculative_round", "Speculation", "Request", "Verifier", "OneRequest", "cap_length", "timed",
           "untimed", "calibrated_confidence", "draft_tokens", "schedule_diag"]
