"""The speculation gate: decode plainly while drafting does not pay (beyond the paper).

Legend: ℓ verified length, n committed tokens of a round, t a round's wall time (draft + schedule + verify +
commit, less the drafter's catch-up after skipped rounds: observe_round), SPS(B) the profile's engine steps/s at
B tokens per forward.

Algorithm 1 chooses ℓ for a block that is already drafted; it cannot see that the draft itself cost time. On a
machine where a draft costs a large share of a target step (a CPU), a round that drafts can commit fewer tokens per
second than a plain one-token step. Before each round the gate compares, from earlier rounds only,

    rate_draft = b · Σ n̂ / Σ t      over the last ``window`` rounds that drafted (their measured times); n̂ a
                                    round's expected committed tokens 1 + Σ_{k≤ℓ} S_k from its calibrated
                                    survivals S_k where it has them (a drafter with a confidence head), else n;
                                    b = Σ n / Σ n̂ over all the request's drafted rounds, shrunk towards 1
    rate_plain = 1 / t_plain        t_plain: the median time of the last plain rounds it ran, or, before it has
                                    run any, the prior SPS(1)⁻¹ scaled by (measured verify ÷ profile verify)

and, when rate_draft + z·se < rate_plain (se the ratio estimator's standard error over the same rounds), skips
drafting for ``probe_after`` rounds (a round with ℓ = 0: one target step), then probes: it drafts ``probe_rounds``
rounds and judges them alone, the rounds before the skip forgotten (a text gets easier or harder as it goes; a
window that kept the rounds that lost would judge every later probe on them). A probe round that took longer than
ℓ + 1 plain steps ends the probe at once: no acceptance could have paid for it. Every losing probe doubles the skip
(at most ``max_skip``), a winning one resets it. Once ``warmup`` rounds have drafted it runs one plain round to time
a plain step, and another every ``refresh`` rounds while it keeps drafting, so the comparison always has a measured
plain step.

Why n̂ rather than n: a drafted round commits anywhere from 1 to ℓ + 1 tokens, so a rate from a few rounds' n is
noisy, and a noisy gate either drafts on luck or needs long probes — both cost rounds that lose where drafting does
not pay. n̂ is the same round's expectation of n given its drafts (with calibrated confidences,
E[n | ℓ, S] = 1 + Σ S_k, the τ Algorithm 1 maximises, paper §3.2.2), so it varies far less from round to round, and
short warm-ups and probes decide; b corrects a text on which the confidences run high or low.

Lossless: whether round i drafts is a function of rounds < i (their tokens, survivals and timings) only, never of a
token drawn in round i or later; given the decision, the round is the ordinary lossless round (with ℓ = 0 it is a
plain target sample). The output law is therefore the target's for every pattern of decisions (tests/test_gate.py
enumerates it exactly). Algorithm 1 itself (scheduler.HardwareAware) is unchanged; the gate sits in front of it.
"""
from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass

from .cost import SPSProfile


@dataclass
class GateDecision:
    """What the gate decided before a round, and the estimates it decided from (tokens per second)."""
    draft: bool
    reason: str                         # warmup | drafting pays | drafting loses | probe | time a plain step
    rate_draft: float | None            # committed tokens/s of the recent drafted rounds (None: none yet)
    rate_plain: float | None            # tokens/s of a plain step (None: nothing to estimate it from yet)
    plain_source: str                   # measured | prior | none

    def to_dict(self) -> dict:
        return dict(draft=self.draft, reason=self.reason, rate_draft=self.rate_draft, rate_plain=self.rate_plain,
                    plain_source=self.plain_source)


BIAS_PRIOR = 4.0          # tokens of assumed agreement between n and n̂ before a request's rounds speak (_bias)


class SpeculationGate:
    """Skip drafting while a drafted round's expected committed tokens/s fall below a plain step's.

    ``decide()`` before each round, ``observe(...)`` after it (the decode loop does both). Stateful: one gate per
    request (``reset()`` starts over). See the module docstring for the rule and why it stays lossless.
    """
    name = "fallback"

    def __init__(self, sps: SPSProfile | None = None, *, window: int = 16, warmup: int = 4, probe_after: int = 8,
                 max_skip: int = 64, refresh: int = 64, z: float = 1.0, probe_rounds: int = 2):
        for k, v in dict(window=window, warmup=warmup, probe_after=probe_after, max_skip=max_skip,
                         refresh=refresh, probe_rounds=probe_rounds).items():
            if int(v) != v or v < 1:
                raise ValueError(f"SpeculationGate: {k} must be an integer ≥ 1, got {v!r}")
        try:
            zf = float(z)
        except (TypeError, ValueError):
            zf = float("nan")
        if not 0 <= zf < float("inf"):
            raise ValueError(f"SpeculationGate: z must be a finite number ≥ 0, got {z!r}")
        self.z = zf
        if max_skip < probe_after:
            raise ValueError(f"SpeculationGate: max_skip ({max_skip}) must be ≥ probe_after ({probe_after})")
        self.sps, self.window, self.warmup = sps, int(window), int(warmup)
        self.probe_after, self.max_skip, self.refresh = int(probe_after), int(max_skip), int(refresh)
        self.probe_rounds = int(probe_rounds)
        self.reset()

    def reset(self) -> None:
        self._drafted: deque[tuple[float, float, float, int]] = deque(maxlen=self.window)  # (n̂, t, t_verify, ℓ)
        self._plain: deque[float] = deque(maxlen=4)         # seconds per committed token of plain rounds
        self._skip_left = 0                                 # plain rounds still to run before the next probe
        self._backoff = self.probe_after
        self._since_plain = 0                               # drafted rounds since the last plain one
        self._want_plain = False                            # time a plain step at the next round
        self._warmed = False                                # ``warmup`` rounds have drafted
        self._probing = 0                                   # drafted rounds left in the current probe
        self._n_sum = self._n_hat_sum = 0.0                 # Σ n, Σ n̂ over every drafted round (_bias)

    # -- estimates (from the past only) ------------------------------------------------------------
    def rate_draft(self) -> float | None:
        t = sum(r[1] for r in self._drafted)
        return self._bias() * sum(r[0] for r in self._drafted) / t if self._drafted and t > 0 else None

    def _bias(self) -> float:
        """Σ n / Σ n̂ over every drafted round of the request, shrunk towards 1 by ``BIAS_PRIOR`` tokens of assumed
        agreement: a text on which the confidences are over- or under-confident corrects its n̂."""
        k = BIAS_PRIOR
        return (self._n_sum + k) / (self._n_hat_sum + k)

    def rate_draft_se(self) -> float:
        """Standard error of ``rate_draft`` (ratio estimator b·Σn̂ / Σt over the window, b held fixed; 0 with fewer
        than 2 rounds)."""
        k = len(self._drafted)
        rd, b = self.rate_draft(), self._bias()
        if k < 2 or rd is None:
            return 0.0
        t_mean = sum(r[1] for r in self._drafted) / k
        ss = sum((b * r[0] - rd * r[1]) ** 2 for r in self._drafted)
        return (ss / (k - 1) / k) ** 0.5 / t_mean

    def plain_step(self) -> tuple[float | None, str]:
        """(seconds per plain step, "measured" | "prior" | "none")."""
        if self._plain:
            return statistics.median(self._plain), "measured"
        if self.sps is not None and self._drafted:
            measured = sum(r[2] for r in self._drafted)
            profiled = sum(float(self.sps.step_time(1 + r[3])) for r in self._drafted)
            if measured > 0 and profiled > 0:
                return float(self.sps.step_time(1)) * measured / profiled, "prior"
        return None, "none"

    def decide(self) -> GateDecision:
        """Draft this round or not, from the rounds observed so far."""
        rd = self.rate_draft()
        tp, src = self.plain_step()
        rp = 1.0 / tp if tp else None
        if self._skip_left > 0:
            return GateDecision(False, "drafting loses", rd, rp, src)
        if self._want_plain:
            return GateDecision(False, "time a plain step", rd, rp, src)
        if self._probing:
            return GateDecision(True, "probe", rd, rp, src)     # after a skip: draft afresh to re-measure
        if not self._warmed or rd is None or rp is None:
            return GateDecision(True, "warmup", rd, rp, src)
        return GateDecision(True, "drafting pays", rd, rp, src)

    # -- after the round ---------------------------------------------------------------------------
    def observe(self, drafted: bool, seconds: float, committed: int, verify_seconds: float = 0.0,
                ell: int = 0, expected: float | None = None) -> None:
        """Record a finished round: whether it drafted, its wall time, the tokens it committed, and (drafted
        rounds) its verify time, ℓ and, where known, its expected committed tokens n̂ (used for the rate in place
        of ``committed``). Decides the plain rounds that follow."""
        if seconds < 0 or committed < 0 or (expected is not None and not expected >= 0):
            raise ValueError("a round's seconds and committed (or expected) tokens must be ≥ 0")
        if not drafted:
            if committed > 0:
                self._plain.append(seconds / committed)
            timing, self._want_plain, self._since_plain = self._want_plain, False, 0
            if self._skip_left > 0:
                self._skip_left -= 1
                if self._skip_left == 0:                    # the skip is over: probe on fresh rounds only
                    self._probing = self.probe_rounds
                    self._drafted.clear()
            elif timing:
                self._judge()
            return
        n_hat = float(committed if expected is None else expected)
        self._n_sum, self._n_hat_sum = self._n_sum + committed, self._n_hat_sum + n_hat
        self._drafted.append((n_hat, float(seconds), float(verify_seconds), int(ell)))
        self._since_plain += 1
        if self._probing:
            self._probing -= 1
            tp, _ = self.plain_step()
            hopeless = tp is not None and seconds > (ell + 1) * tp   # slower than plain with every draft accepted
            if hopeless or not self._probing:
                self._probing = 0
                self._judge()                               # the probe's rounds against the plain steps just run
            return
        if not self._warmed:
            if len(self._drafted) < self.warmup:
                return
            self._warmed = True
        if not self._plain or self._since_plain >= self.refresh:
            self._want_plain = True                         # compare with a measured plain step, not the prior
            return
        self._judge()

    def _judge(self) -> None:
        """Skip the next rounds when the recent drafted rounds commit fewer tokens/s than a plain step, by more
        than ``z`` standard errors of their rate."""
        rd, (tp, _) = self.rate_draft(), self.plain_step()
        if rd is not None and tp and rd + self.z * self.rate_draft_se() < 1.0 / tp:
            self._skip_left = self._backoff
            self._backoff = min(2 * self._backoff, self.max_skip)
        else:
            self._backoff = self.probe_after

    def observe_round(self, r) -> None:
        """``observe`` from a trace.Round (a skipped round is one whose ``skipped`` is set). A drafted round is
        judged without its catch-up (``t_catch_up``: the drafter folding in the positions the skipped rounds before
        it committed, a cost of those rounds); its own positions' extension, after its commit, counts."""
        seconds = r.t_draft + r.t_schedule + r.t_verify + r.t_other - r.t_catch_up
        self.observe(not r.skipped, seconds, r.n_committed, r.t_verify, r.ell, expected_committed(r))

    def __repr__(self) -> str:
        return (f"SpeculationGate(window={self.window}, warmup={self.warmup}, probe_after={self.probe_after}, "
                f"max_skip={self.max_skip}, refresh={self.refresh}, z={self.z:g}, probe_rounds={self.probe_rounds})")


def expected_committed(r) -> float | None:
    """n̂ of a drafted trace.Round: 1 + the survivals of its ℓ verified slots (None: a skipped round, or drafts
    without survivals, i.e. without confidences)."""
    verified = r.drafts[: r.ell]
    if r.skipped or any(d.survival is None for d in verified) or (r.ell and not verified):
        return None
    return 1.0 + sum(float(d.survival) for d in verified)


__all__ = ["GateDecision", "SpeculationGate", "expected_committed"]
