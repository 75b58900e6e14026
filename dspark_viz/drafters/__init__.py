"""Drafters: prompt lookup, a random test drafter, and the neural family (DSpark, DFlash, EAGLE).

Every drafter implements the protocol of ``dspark_viz.protocol``; ``load_drafter`` is the one
way in by name. The names come from one table, ``config.SHIPPED``.
"""
from __future__ import annotations

from ..cost import profile_for
from ..protocol import Drafter
from .config import ALGOS
from .deepspec import load_deepspec
from .deepspec_config import is_drafter_dir
from .hybrid import HybridDrafter
from .lookup import LookupDrafter
from .neural import is_card_path, load_card, load_shipped
from .random import RandomDrafter

NEURAL = ALGOS                                   # the shipped neural drafters (config.SHIPPED)
NAMES = ("lookup",) + NEURAL + tuple(f"{n}+lookup" for n in NEURAL)


def load_drafter(name: str, target, gamma: int | None = None, **kw) -> Drafter:
    """A drafter by name: ``lookup``, a shipped neural drafter (dspark, dspark-rnn, dflash, eagle), a drafter
    card file ``FILE.json`` (one you trained: `dspark-viz train --out FILE.json`), a DeepSpec checkpoint folder
    ``DIR`` (drafters/deepspec.py), or any of the last three with ``+lookup`` (n-gram lookup as a second
    source, drafters/hybrid.py)."""
    name = str(name)                      # a folder may come as a Path
    if name == "lookup":
        kw.pop("calibrated", None)
        return LookupDrafter(gamma=gamma or 7, vocab_size=target.vocab_size, **kw)
    base = name[:-7] if name.endswith("+lookup") else name
    if base not in NEURAL and not is_card_path(base) and not is_drafter_dir(base):
        raise ValueError(f"unknown drafter {name!r}: choose one of {', '.join(NAMES)}, a drafter card FILE.json, "
                         f"or a DeepSpec checkpoint folder")

    sps = kw.pop("sps", None)
    if base in NEURAL:
        neural = load_shipped(base, target, **kw)
    elif is_drafter_dir(base):
        kw.pop("path", None)
        neural = load_deepspec(base, target, **kw)
    else:
        kw.pop("path", None)
        neural = load_card(base, target, **kw)
    if base == name:
        return neural
    return HybridDrafter(neural, sps or profile_for(target), lookup_gamma=gamma, vocab_size=target.vocab_size)


def speed_only(drafter: Drafter) -> Drafter:
    """Switch off the per-slot chart diagnostics (NeuralDrafter.diagnostics) of ``drafter`` or of the neural
    drafter inside a hybrid: drafts are unchanged, only the top-k for the charts is skipped (bench, profile)."""
    for d in (drafter, getattr(drafter, "neural", None)):
        if hasattr(d, "diagnostics"):
            d.diagnostics = False
    return drafter


__all__ = ["HybridDrafter", "LookupDrafter", "NAMES", "NEURAL", "RandomDrafter",
           "load_drafter", "speed_only"]
