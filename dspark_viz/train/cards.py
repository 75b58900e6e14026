"""What a drafter card records about the training behind its weights: each run's record, and for a warm start
the record of the run it continued (nested under ``warm_start``), so a card accounts for every step."""
from __future__ import annotations

import torch


def warm_record(card: dict) -> dict:
    """What a warm-started drafter inherits, for its card: the starting weights' hash and their training record
    (itself with any earlier warm start), so the card accounts for every step the weights have seen."""
    return {"sha256": card.get("sha256", ""), "train": card.get("train", {})}


def training_runs(train_record: dict) -> list[dict]:
    """A card's training record and those of the warm starts behind it, the earliest run first."""
    earlier = train_record.get("warm_start", {}).get("train")
    return (training_runs(earlier) if earlier else []) + [train_record]


def total_steps(train_record: dict) -> int:
    """Optimiser steps behind a drafter card's weights: its own run's and those of every warm start before it."""
    return sum(int(r.get("steps", 0)) for r in training_runs(train_record))


def device_name(dev: torch.device) -> str:
    """The accelerator's name on a card (``cuda``: the GPU model), else the device type."""
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else dev.type
