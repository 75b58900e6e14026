"""The one table of drafter names: name → label, colour, order, family, shipped files, preset, paper role.

Pure data; imports nothing. Every list of drafter names in the package (the app's dropdown and labels, chart
colours and orders, the shipped files, the recorded and benchmarked sets) is read from ``DRAFTERS``.
How a family loads (its model class, its loader) is registered beside it in ``drafters/families.py``;
``drafters.register_drafter`` adds a drafter to both in one call.

``LiveNames`` / ``LiveMap`` are read-only views that read the table on every use, so a constant other modules
import (``style.DRAFTER_COLORS``, ``resources.DRAFTER_ORDER``…) sees a drafter registered after the import.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence


@dataclass(frozen=True)
class DrafterEntry:
    name: str                            # what load_drafter, cards, traces and the CLI call it
    label: str                           # how the faces print it
    family: str                          # how it loads: drafters/families.py (model class or loader)
    colour: str | None = None            # an Okabe–Ito name (viz/style.py) or "#rrggbb"; None: a free colour
    order: int = 100                     # display order (ties: the order of registration)
    stem: str | None = None              # shipped files: assets/drafters/<stem>.json (neural families)
    preset: Mapping = field(default_factory=dict)   # DrafterConfig fields of a neural drafter
    paper: str | None = None             # the paper's drafter in the same role (paper.LABELS key)
    offered: bool = True                 # in the app's drafter dropdown
    recorded: bool = False               # `dspark-viz record` records it by default
    bench: bool = False                  # `dspark-viz bench` runs it at ℓ = γ (method of the same name)


DRAFTERS: dict[str, DrafterEntry] = {}


def add(entry: DrafterEntry) -> DrafterEntry:
    """Put ``entry`` in the table (replacing one of the same name)."""
    DRAFTERS[entry.name] = entry
    return entry


def remove(name: str) -> None:
    DRAFTERS.pop(name, None)


def entries(where: Callable[[DrafterEntry], bool] | None = None) -> list[DrafterEntry]:
    """The entries in display order, optionally filtered."""
    rows = sorted(enumerate(DRAFTERS.values()), key=lambda ie: (ie[1].order, ie[0]))
    return [e for _, e in rows if where is None or where(e)]


def names(where: Callable[[DrafterEntry], bool] | None = None) -> tuple[str, ...]:
    return tuple(e.name for e in entries(where))


def label(name: str) -> str:
    """The printed name of a drafter (the name itself when it is not in the table)."""
    e = DRAFTERS.get(str(name))
    return e.label if e is not None else str(name)


class LiveNames(Sequence):
    """A read-only tuple recomputed from ``make()`` on every use."""

    def __init__(self, make: Callable[[], Sequence[str]]):
        self._make = make

    def _t(self) -> tuple:
        return tuple(self._make())

    def __getitem__(self, i):
        return self._t()[i]

    def __len__(self) -> int:
        return len(self._t())

    def __iter__(self) -> Iterator:
        return iter(self._t())

    def __contains__(self, x) -> bool:
        return x in self._t()

    def __add__(self, other) -> tuple:
        return self._t() + tuple(other)

    def __radd__(self, other) -> tuple:
        return tuple(other) + self._t()

    def __eq__(self, other) -> bool:
        return self._t() == (tuple(other) if isinstance(other, (list, tuple, LiveNames)) else other)

    def __hash__(self):
        return hash(self._t())

    def __repr__(self) -> str:
        return repr(self._t())


class LiveMap(Mapping):
    """A read-only dict recomputed from ``make()`` on every use."""

    def __init__(self, make: Callable[[], Mapping]):
        self._make = make

    def __getitem__(self, k):
        return self._make()[k]

    def __iter__(self) -> Iterator:
        return iter(self._make())

    def __len__(self) -> int:
        return len(self._make())

    def __repr__(self) -> str:
        return repr(dict(self._make()))


def field_map(attr: str, where: Callable[[DrafterEntry], bool] | None = None) -> LiveMap:
    """name → entry.<attr>, in display order, for the entries where it is set (and ``where`` holds)."""
    return LiveMap(lambda: {e.name: getattr(e, attr) for e in entries(where) if getattr(e, attr) is not None})


# -- the shipped drafters (paper §4: DSpark, DFlash, EAGLE-3 at chain drafting; lookup; the toy) ---------------
for _e in (
    DrafterEntry("dspark", "DSpark-Markov", "dspark", "vermillion", 10, stem="dspark_markov", paper="dspark",
                 preset=dict(head="markov", confidence=True, n_layers=1), recorded=True),
    DrafterEntry("dspark-rnn", "DSpark-RNN", "dspark", "purple", 20, stem="dspark_rnn",
                 preset=dict(head="rnn", confidence=True, n_layers=1), recorded=True),
    DrafterEntry("dflash", "DFlash-style", "dspark", "blue", 30, stem="dflash", paper="dflash",
                 preset=dict(head=None, confidence=False, n_layers=1), recorded=True, bench=True),
    DrafterEntry("eagle", "EAGLE-style", "eagle", "green", 40, stem="eagle", paper="eagle3",
                 preset=dict(head=None, confidence=False, n_layers=1), recorded=True, bench=True),
    DrafterEntry("lookup", "prompt lookup", "lookup", "orange", 50, recorded=True),
    DrafterEntry("dspark+lookup", "DSpark + lookup", "hybrid", None, 60),
    DrafterEntry("random", "random (toy)", "random", "grey", 90, offered=False),
):
    add(_e)
del _e

# paper drafter name (``dspark_viz.paper.LABELS``) → the shipped drafter that plays its role
PAPER_ROLE = LiveMap(lambda: {e.paper: e.name for e in entries() if e.paper is not None})

__all__ = ["DRAFTERS", "DrafterEntry", "LiveMap", "LiveNames", "PAPER_ROLE", "add", "entries", "field_map", "label",
           "names", "remove"]
