"""How long a training run is and how its learning rate moves: linear warm-up, then a cosine to a tenth of the peak
over ``TrainConfig.steps``; a run given minutes instead of steps fits its step count from the time of its first
steps (``fitted_steps``), so the cosine still ends where the run does."""
from __future__ import annotations

import math

from .config import TrainConfig


def lr_at(step: int, tc: TrainConfig) -> float:
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    prog = (step - tc.warmup) / max(1, tc.steps - tc.warmup)
    return tc.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, prog))))


FIT_PROBE = (2, 12)       # steps timed to fit a run into its minutes: after the first (warm-up), before the 12th


def fitted_steps(tc: TrainConfig, fit_minutes: float, seconds_so_far: float, seconds_per_step: float,
                 done: int) -> int:
    """The step count at which a run that has taken ``seconds_so_far`` for ``done`` steps, going on at
    ``seconds_per_step``, ends after about ``fit_minutes``: at most ``tc.steps``, at least the steps done."""
    left = max(0.0, fit_minutes * 60 - seconds_so_far)
    return max(done, min(tc.steps, done + int(left / max(seconds_per_step, 1e-9))))


__all__ = ["FIT_PROBE", "fitted_steps", "lr_at"]
