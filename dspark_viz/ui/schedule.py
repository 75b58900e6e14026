"""The scheduler playground's one schedule, shared by the app tab and the notebook panel: Algorithm 1 on R
requests, no model.

Legend: R concurrent requests (engine load), γ block size, c_k confidence of draft k, ℓ verification length.

Request 0 is the user's own row of confidences when one is given; the other requests tile the given rows in order
(``background.tile_requests``). The adjustable profile is ``gpu_like`` with its knee (where extra verified tokens
stop being free) where the user puts it.
"""
from __future__ import annotations

from typing import Sequence

from ..background import tile_requests
from ..cost import SPSProfile, gpu_like
from ..scheduler import HardwareAware, Schedule


def knee_profile(knee: float) -> SPSProfile:
    """The smooth accelerator profile with its knee at ``knee`` tokens per forward."""
    return gpu_like(knee=float(knee))


def playground_requests(rows: Sequence[Sequence[float]], R: int,
                        mine: Sequence[float] | None = None) -> list[list[float]]:
    """R confidence rows (R, γ): ``rows`` tiled, request 0 replaced by ``mine`` when given."""
    conf = tile_requests(rows, R)
    if mine is not None:
        conf = [list(mine)] + conf[1:]
    return conf


def playground_schedule(rows: Sequence[Sequence[float]], R: int, sps: SPSProfile, mine: Sequence[float] | None = None,
                        early_stop: bool = True) -> Schedule:
    """Algorithm 1 (or, without the early stop, its retrospective variant) on the playground's R requests."""
    return HardwareAware(early_stop=early_stop).choose(playground_requests(rows, R, mine), sps)


__all__ = ["knee_profile", "playground_requests", "playground_schedule"]
