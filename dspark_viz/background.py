"""Policies under engine load for one live request: the other R − 1 requests in the verify batch, replayed from
confidences.

Legend: R concurrent requests sharing one verify forward, γ block size, c_k confidence of draft k, ℓ verification
length.

Algorithm 1 decides ℓ for a *batch*: with R requests the verify budget is shared. A panel or an app tab decodes
one request, so for R > 1 ``LoadedPolicy`` adds R − 1 background requests whose c_1..c_γ rows replay
``background`` (recorded rows, or ``SYNTHETIC_BACKGROUND``), tiled deterministically by ``tile_requests``.
Only request 0's ℓ is used by the decode loop; the Schedule it returns holds the whole batch's admission path.
``live_policy`` is the one factory the interactive faces (app tabs, notebook panels) take their policy from; the
policy it runs is the one the policy table (scheduler.POLICIES) marks live.
"""
from __future__ import annotations

from typing import Sequence

from .scheduler import FixedLength, HardwareAware, Policy, Schedule, live_name, make_policy

# A few confidence rows c_1..c_7 in the range a trained head produces (used when no recording is given)
SYNTHETIC_BACKGROUND = (
    (0.92, 0.88, 0.85, 0.80, 0.76, 0.72, 0.68),
    (0.80, 0.70, 0.62, 0.55, 0.50, 0.45, 0.40),
    (0.96, 0.93, 0.90, 0.88, 0.85, 0.82, 0.80),
    (0.60, 0.50, 0.42, 0.35, 0.30, 0.27, 0.25),
    (0.85, 0.80, 0.72, 0.65, 0.60, 0.52, 0.48),
)


def tile_requests(confidences: Sequence[Sequence[float]], R: int) -> list[list[float]]:
    """R confidence rows (R, γ): the given rows repeated in order (deterministic, no sampling)."""
    if R < 0:
        raise ValueError(f"R must be ≥ 0, got {R}")
    if R and not confidences:
        raise ValueError("no confidence rows to tile")
    return [list(confidences[i % len(confidences)]) for i in range(R)]


class LoadedPolicy(Policy):
    """Algorithm 1 for request 0 of a batch of R: requests 1..R−1 replay ``background`` rows.

    Not a new algorithm: it only builds the batch and calls ``inner.choose`` (HardwareAware by default).
    ``R`` may be changed between rounds.
    """
    needs_confidence = True

    def __init__(self, R: int = 1, background: Sequence[Sequence[float]] = SYNTHETIC_BACKGROUND,
                 inner: Policy | None = None):
        self.R, self.background = int(R), [list(map(float, c)) for c in background]
        self.inner = inner or HardwareAware()
        self.lossless = self.inner.lossless

    @property
    def name(self) -> str:
        return f"{self.inner.name}@R={self.R}"

    def choose(self, conf, sps=None, *, explain: bool = True) -> Schedule:
        batch = list(conf) + tile_requests(self.background, max(0, self.R - len(conf)))   # (R, γ)
        return self.inner.choose(batch, sps, explain=explain)


def live_policy(drafter, R: int, background: Sequence[Sequence[float]] = SYNTHETIC_BACKGROUND,
                policy: str | None = None) -> Policy:
    """The policy of a live decode at load R: for a drafter with a confidence head, ``policy`` (a name of
    scheduler.POLICIES; by default the table's live one, ``live_name()``: Algorithm 1) on this request + R − 1
    ``background`` requests (the synthetic rows when none are given); FixedLength(γ) without a head."""
    if getattr(drafter, "has_confidence", False):
        return LoadedPolicy(R, background or SYNTHETIC_BACKGROUND, inner=make_policy(policy or live_name()))
    return FixedLength(getattr(drafter, "gamma", 1))


__all__ = ["LoadedPolicy", "SYNTHETIC_BACKGROUND", "live_policy", "tile_requests"]
