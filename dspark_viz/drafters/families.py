"""How each drafter family loads, beside the core table of names (``dspark_viz.registry``).

A family is either neural (a model class in ``neural.MODELS``: its shipped weights load by name through
``load_shipped``) or has a loader here in ``LOADERS``: ``load(entry, target, gamma, **kw) -> Drafter``.
``register_drafter`` adds a drafter in one call: its entry in the core table, and its model class or loader
when its family is new. ``load_entry`` is what ``load_drafter`` dispatches to for a registered name.
"""
from __future__ import annotations

from typing import Callable

from .. import registry
from ..cost import profile_for
from ..protocol import Drafter
from ..registry import DrafterEntry
from .hybrid import HybridDrafter
from .lookup import LookupDrafter
from .neural import MODELS, load_shipped
from .random import RandomDrafter

Loader = Callable[..., Drafter]          # (entry, target, gamma, **kw) -> Drafter


def _neural(entry: DrafterEntry, target, gamma: int | None = None, **kw) -> Drafter:
    kw.pop("sps", None)                  # γ and the SPS profile belong to the drafter's card / a hybrid
    return load_shipped(entry.name, target, **kw)


def _lookup(entry: DrafterEntry, target, gamma: int | None = None, **kw) -> Drafter:
    kw.pop("calibrated", None)
    return LookupDrafter(gamma=gamma or 7, vocab_size=target.vocab_size, **kw)


def _random(entry: DrafterEntry, target, gamma: int | None = None, **kw) -> Drafter:
    kw.pop("calibrated", None)
    return RandomDrafter(vocab_size=target.vocab_size, gamma=gamma or 4, **kw)


def hybrid(neural: Drafter, target, gamma: int | None = None, sps=None) -> Drafter:
    """``neural`` with n-gram lookup as a second source (drafters/hybrid.py)."""
    return HybridDrafter(neural, sps or profile_for(target), lookup_gamma=gamma, vocab_size=target.vocab_size)


def _hybrid(entry: DrafterEntry, target, gamma: int | None = None, **kw) -> Drafter:
    base = registry.DRAFTERS[entry.name.removesuffix("+lookup")]      # "dspark+lookup" → the dspark entry
    sps = kw.pop("sps", None)
    return hybrid(load_entry(base, target, None, **kw), target, gamma, sps)


LOADERS: dict[str, Loader] = {"lookup": _lookup, "random": _random, "hybrid": _hybrid}


def is_neural(entry: DrafterEntry) -> bool:
    return entry.family in MODELS


def load_entry(entry: DrafterEntry, target, gamma: int | None = None, **kw) -> Drafter:
    """The drafter of a registered entry for ``target``."""
    if is_neural(entry):
        return _neural(entry, target, gamma, **kw)
    if entry.family not in LOADERS:
        raise ValueError(f"drafter {entry.name!r}: no loader for its family {entry.family!r}")
    return LOADERS[entry.family](entry, target, gamma, **kw)


def register_drafter(entry: DrafterEntry, *, model: type | None = None, load: Loader | None = None) -> DrafterEntry:
    """Add a drafter: its name, label, colour, order … (``entry``), and, for a new family, its model class
    (neural: weights at assets/drafters/<entry.stem>.json) or its loader ``load(entry, target, gamma, **kw)``."""
    if model is not None and load is not None:
        raise ValueError("give a neural family's model class or a loader, not both")
    if model is not None:
        MODELS[entry.family] = model
    if load is not None:
        LOADERS[entry.family] = load
    if entry.family not in MODELS and entry.family not in LOADERS:
        raise ValueError(f"drafter {entry.name!r}: family {entry.family!r} has no model class or loader; "
                         f"known: {', '.join(sorted(set(MODELS) | set(LOADERS)))}")
    return registry.add(entry)


def unregister_drafter(name: str, *, family: bool = False) -> None:
    """Remove a drafter from the table (and, with ``family=True``, its family's model class / loader)."""
    entry = registry.DRAFTERS.get(name)
    registry.remove(name)
    if family and entry is not None:
        MODELS.pop(entry.family, None)
        LOADERS.pop(entry.family, None)


__all__ = ["LOADERS", "hybrid", "is_neural", "load_entry", "register_drafter", "unregister_drafter"]
