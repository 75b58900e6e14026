"""Drafters: prompt lookup, a random test drafter, and the neural family (DSpark, DFlash, EAGLE).

Every drafter implements the protocol of ``dspark_viz.protocol``; ``load_drafter`` is the one
way in by name. The names come from one table, ``dspark_viz.registry``; how each family loads is in
``drafters/families.py`` (``register_drafter`` adds one).
"""
from __future__ import annotations

from .. import registry
from ..protocol import Drafter
from ..registry import DrafterEntry, LiveNames
from .config import ALGOS
from .deepspec import load_deepspec
from .deepspec_config import is_drafter_dir
from .hybrid import HybridDrafter
from .lookup import LookupDrafter
from .neural import is_card_path, load_card
from .random import RandomDrafter
from .families import hybrid, load_entry, register_drafter, unregister_drafter

NEURAL = ALGOS                                   # the shipped neural drafters (registry entries with a stem)
# every name load_drafter takes: the table's, then "+lookup" after each shipped neural drafter not in it
NAMES = LiveNames(lambda: registry.names() + tuple(
    f"{n}+lookup" for n in NEURAL if f"{n}+lookup" not in registry.DRAFTERS))


def load_drafter(name: str, target, gamma: int | None = None, **kw) -> Drafter:
    """A drafter by name: one in the table (``lookup``, ``random``, a shipped neural drafter: dspark, dspark-rnn,
    dflash, eagle; ``dspark+lookup``), a drafter card file ``FILE.json`` (one you trained:
    `dspark-viz train --out FILE.json`), a DeepSpec checkpoint folder ``DIR`` (drafters/deepspec.py), or any
    neural one of these with ``+lookup`` (n-gram lookup as a second source, drafters/hybrid.py)."""
    name = str(name)                      # a folder may come as a Path
    if name in registry.DRAFTERS:
        return load_entry(registry.DRAFTERS[name], target, gamma, **kw)
    base = name.removesuffix("+lookup")
    if base not in NEURAL and not is_card_path(base) and not is_drafter_dir(base):
        raise ValueError(f"unknown drafter {name!r}: choose one of {', '.join(NAMES)}, a drafter card FILE.json, "
                         f"or a DeepSpec checkpoint folder")

    sps = kw.pop("sps", None)
    if base in NEURAL:
        neural = load_entry(registry.DRAFTERS[base], target, **kw)
    elif is_drafter_dir(base):
        kw.pop("path", None)
        neural = load_deepspec(base, target, **kw)
    else:
        kw.pop("path", None)
        neural = load_card(base, target, **kw)
    if base == name:
        return neural
    return hybrid(neural, target, gamma, sps)


def speed_only(drafter: Drafter) -> Drafter:
    """Switch off the per-slot chart diagnostics (NeuralDrafter.diagnostics) of ``drafter`` or of the neural
    drafter inside a hybrid: drafts are unchanged, only the top-k for the charts is skipped (bench, profile)."""
    for d in (drafter, getattr(drafter, "neural", None)):
        if hasattr(d, "diagnostics"):
            d.diagnostics = False
    return drafter


__all__ = ["DrafterEntry", "HybridDrafter", "LookupDrafter", "NAMES", "NEURAL", "RandomDrafter",
           "load_drafter", "register_drafter", "speed_only", "unregister_drafter"]
