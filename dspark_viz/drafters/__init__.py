"""Drafters: prompt lookup, a random test drafter, and the neural family (DSpark, DFlash, EAGLE)."""
from __future__ import annotations

from .base import Context, Draft, Drafter
from .lookup import LookupDrafter
from .random import RandomDrafter

NEURAL = ("dspark", "dspark-rnn", "dflash", "eagle")
NAMES = ("lookup",) + NEURAL


def load_drafter(name: str, target, gamma: int | None = None, **kw) -> Drafter:
    """A drafter by name: ``lookup`` or a shipped neural drafter (dspark, dspark-rnn, dflash, eagle)."""
    if name == "lookup":
        kw.pop("calibrated", None)
        return LookupDrafter(gamma=gamma or 7, vocab_size=target.vocab_size, **kw)
    if name in NEURAL:
        from .neural import load_shipped

        return load_shipped(name, target, **kw)
    raise ValueError(f"unknown drafter {name!r}: choose one of {', '.join(NAMES)}")


__all__ = ["Context", "Draft", "Drafter", "LookupDrafter", "RandomDrafter", "load_drafter", "NAMES", "NEURAL"]
