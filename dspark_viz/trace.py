"""The one record type that flows from the decode loop to every face.

A ``Trace`` is one request decoded by speculative decoding (or plainly, as rounds with ℓ = 0).
Each ``Round`` is one draft → schedule → verify cycle; each ``DraftToken`` one drafted slot.

Legend: γ block size, ℓ verification length chosen by the policy, m accepted drafts (m ≤ ℓ),
k 1-based position in the block, c_k confidence, a_k = Π_{i≤k} c_i prefix survival.

Status of a drafted token:
  accepted     verified and kept
  rejected     verified, the first one the target refused (at most one per round)
  not_reached  verified slot after the rejection (its p_target is not consulted)
  pruned       drafted but cut by the policy (k > ℓ), never shown to the target
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .records import parse_json, round_floats, write_text

STATUSES = ("accepted", "rejected", "not_reached", "pruned")


@dataclass
class DraftToken:
    k: int                          # 1-based position in the block
    token: int
    text: str
    p_draft: float                  # probability of `token` under the exact vector sampled from
    p_target: float | None          # p_target(token) at this slot; None if never verified
    confidence: float | None        # raw c_k from the confidence head (None: drafter has no head)
    confidence_cal: float | None    # c_k after Sequential Temperature Scaling
    survival: float | None          # a_k = Π c_i (calibrated when available) used by the scheduler
    status: str                     # one of STATUSES
    diag: dict[str, Any] | None = None  # optional chart data: top-k of U_k, B_k, U_k + B_k


@dataclass
class Round:
    index: int
    anchor: int                     # x0: the last token the target committed
    anchor_pos: int                 # absolute position of x0 in the sequence
    drafts: list[DraftToken]        # all γ drafted slots (pruned ones included)
    ell: int                        # verification length chosen by the policy
    accepted: int                   # m: drafts accepted (m ≤ ℓ)
    bonus: int | None               # token drawn by the target after the accepted prefix
    bonus_text: str
    bonus_source: str               # residual (after a rejection) | target (after full acceptance) | none
    source: str = "none"            # proposal source: neural | lookup | none (plain decoding, a skipped round)
    t_draft: float = 0.0            # seconds
    t_schedule: float = 0.0
    t_verify: float = 0.0
    t_other: float = 0.0
    t_catch_up: float = 0.0         # of t_other: the drafter folding in the positions of the skipped rounds before
    stopped: bool = False           # a stop token was committed in this round
    schedule: dict[str, Any] | None = None  # policy diagnostics (e.g. Algorithm 1 admission path)
    skipped: bool = False           # the speculation gate skipped drafting: a plain target step (ℓ = 0)
    gate: dict[str, Any] | None = None  # the gate's decision before this round (gate.GateDecision), None: no gate

    @property
    def committed(self) -> list[int]:
        toks = [d.token for d in self.drafts if d.status == "accepted"]
        return toks + ([self.bonus] if self.bonus is not None else [])

    @property
    def n_committed(self) -> int:
        return self.accepted + (self.bonus is not None)


@dataclass
class Trace:
    meta: dict[str, Any]            # target, drafter, policy, temperature, seed, prompt, device, dtype, γ, …
    prompt_ids: list[int]
    first_token: int                # token from the prefill (not counted in τ)
    first_text: str = ""
    rounds: list[Round] = field(default_factory=list)
    t_prefill: float = 0.0
    t_total: float = 0.0

    # -- derived -------------------------------------------------------------------------
    @property
    def output_ids(self) -> list[int]:
        out = [self.first_token]
        for r in self.rounds:
            out.extend(r.committed)
        return out

    @property
    def n_generated(self) -> int:
        return len(self.output_ids)

    def text(self) -> str:
        parts = [self.first_text]
        for r in self.rounds:
            parts += [d.text for d in r.drafts if d.status == "accepted"]
            parts.append(r.bonus_text if r.bonus is not None else "")
        return "".join(parts)

    # -- tidy frame ------------------------------------------------------------------------
    FRAME_COLUMNS = (
        "round", "k", "token", "text", "status", "p_draft", "p_target", "confidence",
        "confidence_cal", "survival", "ell", "accepted", "source", "anchor_pos", "domain",
        "drafter", "policy",
    )

    def to_frame(self):
        """One row per (round, drafted position): the long format every chart reads."""
        import pandas as pd

        rows = []
        dom = self.meta.get("domain")
        for r in self.rounds:
            for d in r.drafts:
                rows.append(dict(
                    round=r.index, k=d.k, token=d.token, text=d.text, status=d.status,
                    p_draft=d.p_draft, p_target=d.p_target, confidence=d.confidence,
                    confidence_cal=d.confidence_cal, survival=d.survival, ell=r.ell,
                    accepted=r.accepted, source=r.source, anchor_pos=r.anchor_pos, domain=dom,
                    drafter=self.meta.get("drafter"), policy=self.meta.get("policy"),
                ))
        return pd.DataFrame(rows, columns=list(self.FRAME_COLUMNS))

    # -- JSON ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, path: str | None = None, indent: int | None = None, digits: int | None = None) -> str:
        """JSON text (written to ``path`` when given). ``digits`` rounds every float to that many
        significant digits (compact files for shipping; the default keeps them exactly)."""
        d = self.to_dict()
        if digits is not None:
            d = round_floats(d, digits)
        s = json.dumps(d, indent=indent, ensure_ascii=False)
        if path is not None:
            write_text(path, s)
        return s

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trace":
        try:
            rounds = []
            for r in d["rounds"]:
                r = dict(r)
                r["drafts"] = [DraftToken(**_only(DraftToken, t)) for t in r["drafts"]]
                rounds.append(Round(**_only(Round, r)))
            body = _only(cls, d)
            body["rounds"] = rounds
            return cls(**body)
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"not a dspark_viz Trace: {e}") from e

    @classmethod
    def from_json(cls, s_or_path: str) -> "Trace":
        s = s_or_path
        if not s.lstrip().startswith(("{", "[")):          # JSON text starts with an object or array
            try:
                with open(s_or_path, encoding="utf-8") as f:
                    s = f.read()
            except FileNotFoundError:
                raise FileNotFoundError(f"no Trace JSON file at {s_or_path}") from None
        d = parse_json(s, "a dspark_viz Trace")
        if not isinstance(d, dict):
            raise ValueError("not a dspark_viz Trace (top level is not an object)")
        return cls.from_dict(d)


def _only(cls, d: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}  # the dataclass constructor reports missing fields
    return {k: v for k, v in d.items() if k in names}
