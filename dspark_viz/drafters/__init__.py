"""Drafters: prompt lookup, a random test drafter, and the neural family (DSpark, DFlash, EAGLE)."""
from __future__ import annotations

from .base import Context, Draft, Drafter
from .lookup import LookupDrafter
from .hybrid import HybridDrafter
from .random import RandomDrafter

NEURAL = ("dspark", "dspark-rnn", "dflash", "eagle")
NAMES = ("lookup",) + NEURAL + tuple(f"{n}+lookup" for n in NEURAL)


def load_drafter(name: str, target, gamma: int | None = None, **kw) -> Drafter:
    """A drafter by name: ``lookup``, a shipped neural drafter (dspark, dspark-rnn, dflash, eagle), or
    ``NAME+lookup`` (the neural drafter with n-gram lookup as a second source, drafters/hybrid.py)."""
    if name == "lookup":
        kw.pop("calibrated", None)
        return LookupDrafter(gamma=gamma or 7, vocab_size=target.vocab_size, **kw)
    if name in NEURAL:
        from .neural import load_shipped

        return load_shipped(name, target, **kw)
    if name.endswith("+lookup") and name[:-7] in NEURAL:
        from ..engine import profile_for
        from .hybrid import HybridDrafter
        from .neural import load_shipped

        sps = kw.pop("sps", None) or profile_for(target)
        return HybridDrafter(load_shipped(name[:-7], target, **kw), sps, lookup_gamma=gamma,
                             vocab_size=target.vocab_size)
    raise ValueError(f"unknown drafter {name!r}: choose one of {', '.join(NAMES)}")


__all__ = ["Context", "Draft", "Drafter", "LookupDrafter", "RandomDrafter", "HybridDrafter", "load_drafter", "NAMES", "NEURAL"]
