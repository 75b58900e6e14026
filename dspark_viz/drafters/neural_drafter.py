"""The decode loop's view of a neural drafter: one adapter from a drafter model (DSparkModel, EagleModel,
DeepSpecModel) to the drafter protocol (protocol.py).

A drafter model offers ``begin(features, ids) → state``, ``extend(state, features, ids)`` and
``propose(state, anchor, pos, T, generator, diag) → tokens, p_draft, confidences, diagnostics``, and a
confidence head as ``.conf`` (or None); this class turns those into Drafts.
"""
from __future__ import annotations

from ..protocol import Context, Draft, Drafter


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
        toks, p, conf, diags = self.model.propose(state, anchor, anchor_pos, temperature, generator,
                                                  diag=self.diagnostics)
        if diags:
            for dg in diags:
                dg["tokens"] = [self.target.token_text(i) for i in dg["ids"]]
        return Draft(tokens=toks, p_draft=p, confidence=conf, diag=diags, source="neural")

    def commit(self, state, tokens, features) -> None:
        self.model.extend(state, features, list(tokens))


__all__ = ["NeuralDrafter"]
