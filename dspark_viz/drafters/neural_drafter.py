"""The decode loop's view of a neural drafter: one adapter from a drafter model (DSparkModel, EagleModel,
DeepSpecModel) to the drafter protocol (protocol.py).

A drafter model offers ``begin(features, ids) → state``, ``extend(state, features, ids)`` and
``propose(state, anchor, pos, T, generator, diag) → tokens, p_draft, confidences, diagnostics``, and a
confidence head as ``.conf`` (or None); this class turns those into Drafts.

A model that sets ``merges_extends`` (its context extension is row-wise: no position's keys and values depend on
another's) takes its commits lazily: they wait in the state until ``catch_up`` (the decode loop's, before a drafted
round, or the next ``propose``'s), which extends the context with them in one call per ``MERGE_ROWS`` positions. A
run of rounds without a neural draft (the speculation gate's plain rounds, a hybrid's lookup rounds) then costs one
extension at the end instead of one per round; the decode loop catches up right after a drafted round's commit, so
a drafted round still pays for its own positions. On the few-token path (fast/) a position's keys and values come
out the same bits alone or beside up to ``MERGE_ROWS − 1`` others (tests/test_width_invariance.py); torch's stock
path may round them differently in the last bits, which changes drafts, never the output's law.
"""
from __future__ import annotations

import torch

from ..protocol import Context, Draft, Drafter

MERGE_ROWS = 8                          # positions per merged extension (the few-row kernels' widths)
PENDING = "pending_commits"             # the state's key for commits not yet extended
QUIET = "no_diagnostics"                # the state's key: this request's drafts skip the chart diagnostics


class NeuralDrafter(Drafter):
    """Adapts a drafter model (DSparkModel / EagleModel) to the decode loop's protocol."""
    needs_features = True

    def __init__(self, model, name: str, target, card: dict | None = None):
        self.model, self.name, self.target = model.eval(), name, target
        self.diagnostics = True             # top-k U_k / B_k per slot for the charts; drafters.speed_only: off
        self.gamma = model.cfg.gamma
        self.has_confidence = getattr(model, "conf", None) is not None
        self.card = card or {}

    def begin(self, ctx: Context):
        return self.model.begin(ctx.features, list(ctx.prompt_ids))

    def propose(self, state, anchor, anchor_pos, temperature, generator) -> Draft:
        self.catch_up(state)
        toks, p, conf, diags = self.model.propose(state, anchor, anchor_pos, temperature, generator,
                                                  diag=self.diagnostics and not state.get(QUIET, False))
        if diags:
            for dg in diags:
                dg["tokens"] = [self.target.token_text(i) for i in dg["ids"]]
        return Draft(tokens=toks, p_draft=p, confidence=conf, diag=diags, source="neural")

    def quiet(self, state) -> None:
        """This request's drafts skip the per-slot chart diagnostics (the same drafts; a request nobody charts)."""
        state[QUIET] = True

    def commit(self, state, tokens, features) -> None:
        if getattr(self.model, "merges_extends", False) and features is not None:
            state.setdefault(PENDING, []).append((list(tokens), features))
        else:
            self.model.extend(state, features, list(tokens))

    def catch_up(self, state) -> None:
        """Extend the drafter's context with the commits waiting in ``state``, ``MERGE_ROWS`` positions a call."""
        pending = state.pop(PENDING, None)
        if not pending:
            return
        toks = [t for ts, _ in pending for t in ts]
        feats = torch.cat([f for _, f in pending]) if len(pending) > 1 else pending[0][1]      # (t, m·d)
        for i in range(0, feats.shape[0], MERGE_ROWS):
            self.model.extend(state, feats[i:i + MERGE_ROWS], toks[i:i + MERGE_ROWS])


__all__ = ["NeuralDrafter"]
