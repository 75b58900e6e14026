"""The drafter protocol: what the decode loop asks of every proposal source (``Draft``, ``Context``, ``Drafter``).

A core module: importing it loads no drafter and no kernel; the drafters (drafters/) implement it.

Legend: γ block size, V vocabulary, d target hidden size.

A drafter is stateless between requests; per-request state (context features, caches) lives in the
object returned by ``begin`` so several requests can share one drafter read-only.

Round protocol (driven by decode.py):
  state = drafter.begin(ctx)                      once, after the target's prefill
  drafter.catch_up(state)                         before a drafted round: fold in commits taken lazily
  draft = drafter.propose(state, anchor, pos, T, generator)   γ tokens + exact p_draft rows
      or drafter.skip(state, anchor, pos)           a round decoded without a draft (the speculation gate)
  drafter.commit(state, tokens, feats)            the committed positions' target features
  drafter.catch_up(state)                         after a drafted round (a skipped round leaves its commit waiting)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Draft:
    tokens: list[int]                 # (γ,) x_1..x_γ
    p_draft: torch.Tensor             # (γ, V) exact distribution each x_k was sampled from
    confidence: list[float] | None = None   # (γ,) raw c_k, None when the drafter has no head
    diag: list[dict[str, Any]] | None = None  # per slot chart data (top-k U_k, B_k) or None
    source: str = "neural"            # neural | lookup | random
    calibrated: list[float] | None = None   # (γ,) confidences the drafter calibrated itself (used as is)


@dataclass
class Context:
    """What a drafter may read when a request starts (all committed, nothing about the future)."""
    prompt_ids: list[int]             # (n,)
    features: torch.Tensor | None     # (n, m·d) raw outputs of the target's chosen layers, or None


class Drafter:
    name: str = "drafter"
    gamma: int = 7
    needs_features: bool = False      # True: decode.py asks the target for layer features
    has_confidence: bool = False
    calibration = None                # STSCalibration applied to c_k by default (shipped drafters)

    def begin(self, ctx: Context) -> Any:
        return {"ids": list(ctx.prompt_ids)}

    def propose(self, state: Any, anchor: int, anchor_pos: int, temperature: float,
                generator: torch.Generator | None) -> Draft:
        raise NotImplementedError

    def skip(self, state: Any, anchor: int, anchor_pos: int) -> None:
        """A round without a draft (``propose`` is not called): a drafter that learns the anchor in ``propose``
        learns it here; ``commit`` follows as for any round."""

    def quiet(self, state: Any) -> None:
        """This request's drafts need no chart diagnostics (nobody charts it): a drafter that gathers them skips
        them from now on; its drafts stay the same."""

    def catch_up(self, state: Any) -> None:
        """Bring ``state`` up to date with every commit so far. A drafter that takes its commits lazily (a neural
        drafter extends its context at the next proposal, drafters/neural_drafter.py) does that work here, and in
        ``propose`` if it was not called. The decode loop calls it after a drafted round's commit, and before a drafted
        round that follows skipped ones (timed apart: Round.t_catch_up)."""

    def commit(self, state: Any, tokens: list[int], features: torch.Tensor | None) -> None:
        """`tokens` are the newly committed tokens starting with the old anchor x0 (excluding the
        new anchor); `features` (len(tokens), m·d) their target features when needs_features."""
        state["ids"].extend(tokens)
