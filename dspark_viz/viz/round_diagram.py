"""One DSpark round as a stage-by-stage diagram (paper Fig. 1): the anchor, the parallel backbone's pick per
slot, the sequential head's drafts, the confidences, the scheduler's kept prefix, the target's verdicts and the
bonus token, read from a recorded ``Round``.

Legend: γ block size, k 1-based slot, x0 anchor (the token the target committed last), U_k backbone logits,
B_k sequential bias, c_k confidence (calibrated when STS was applied), a_k = Π_{i≤k} c_i prefix survival,
ℓ verified drafts, m accepted drafts.

A recorded round may have verified more drafts than a scheduler would have kept (offline evaluation verifies the
whole block). ``ell`` shows the round as if only the first ``ell`` drafts had been verified; that is the same
round exactly when the target rejected a draft inside those ``ell`` (m < ell): drafting does not depend on ℓ, the
verdicts of slots 1 … m + 1 and the bonus drawn at the rejection are the ones recorded. Otherwise (m ≥ ell) the
bonus would have been drawn at slot ell + 1, which the recording does not hold, and ``ell`` is refused.
"""
from __future__ import annotations

from typing import Callable, Mapping

from ..trace import Round, Trace
from .style import display_token

STAGES = ("1 · target: anchor x0", "2 · parallel backbone: argmax U_k", "3 · sequential head: x_k from U_k + B_k",
          "4 · confidence head: c_k, a_k", "5 · scheduler: verify ℓ", "6 · target verifies", "7 · committed")
# box kinds: fill colour (light, so the dark text reads) and the words a reader without colour goes by
KIND_COLORS = {
    "anchor": "#d0d0d0",
    "backbone pick": "#d6eaf8",
    "head kept the pick": "#fbf0d9",
    "head changed the pick": "#f2c46b",
    "sampled off the pick": "#f7dcae",
    "confidence": "#ffffff",
    "kept": "#dff2ea",
    "dropped": "#ead3e3",
    "accepted": "#9fd8c3",
    "rejected": "#f2b49b",
    "not reached": "#ececec",
    "bonus": "#9ec5e8",
}
KIND_DASH = {"dropped": [4, 3], "not reached": [2, 2], "rejected": [8, 3, 2, 3]}
FRAME_COLUMNS = ["stage", "stage_i", "col", "col_i", "text", "kind", "detail"]


def _known_texts(trace: Trace) -> dict[int, str]:
    """token id → text for every token the trace itself spells (drafts, bonus tokens, the prefill token)."""
    out = {trace.first_token: trace.first_text}
    for r in trace.rounds:
        out.update({d.token: d.text for d in r.drafts})
        if r.bonus is not None:
            out[r.bonus] = r.bonus_text
    return out


def _text_of(token: int, texts, known: dict[int, str]) -> str:
    if callable(texts):
        return texts(token)
    if texts is not None and (token in texts or str(token) in texts):
        return texts.get(token, texts.get(str(token)))
    return known.get(token, f"#{token}")


def context_text(trace: Trace, round_index: int) -> str:
    """The text committed before round ``round_index``: the prefill token and every earlier round's tokens."""
    parts = [trace.first_text]
    for r in trace.rounds[:round_index]:
        parts += [d.text for d in r.drafts if d.status == "accepted"]
        parts.append(r.bonus_text if r.bonus is not None else "")
    return "".join(parts)


def scheduled_statuses(r: Round, ell: int | None = None) -> tuple[int, list[str]]:
    """(ℓ, status per drafted slot) of round ``r`` verified up to ``ell`` (None: as recorded); statuses as in
    ``trace.STATUSES``. Raises ValueError where the recording cannot tell what verifying ``ell`` drafts gives."""
    ds = sorted(r.drafts, key=lambda d: d.k)
    if ell is None or ell == r.ell:
        return r.ell, [d.status for d in ds]
    if not 0 < ell < r.ell:
        raise ValueError(f"ℓ = {ell}: a recorded round can only be shown with fewer verified drafts "
                         f"(1 … {r.ell - 1}); this one verified {r.ell}")
    if r.accepted >= ell:
        raise ValueError(f"ℓ = {ell} ≤ m = {r.accepted}: the bonus would be drawn at slot {ell + 1}, "
                         "which the recording does not hold")
    return ell, [d.status if d.k <= ell else "pruned" for d in ds]



def head_kind(pick: int, head: int | None, token: int, temperature: float) -> tuple[str, str]:
    """What moved slot k's draft x_k off the backbone's pick argmax U_k: the head's bias B_k only where
    argmax(U_k + B_k) ≠ argmax U_k. Greedy (T = 0) the draft is argmax(U_k + B_k) itself; sampled, a draw can land
    off either pick by chance, and without the head's own top token (``head``, recorded since the traces kept it)
    the diagram cannot tell which. → (box kind, tooltip words)."""
    if head is None and temperature == 0:
        head = token
    if head is not None and int(head) != pick:
        drawn = "" if token == int(head) else f", and the T = {temperature:g} draw moved x_k off the head's top too"
        return "head changed the pick", "B_k moved the top token off the backbone's pick" + drawn
    if token == pick:
        return "head kept the pick", "the backbone's pick" + ("" if head is None else ", B_k left it in place")
    if head is not None:
        return "sampled off the pick", f"B_k left the backbone's pick on top; the T = {temperature:g} draw moved x_k"
    return "sampled off the pick", (f"off the backbone's pick: at T = {temperature:g} the draw alone can do that, and "
                                    "this recording does not hold the head's own top token")

def round_diagram_frame(trace: Trace, round_index: int, ell: int | None = None,
                        texts: Mapping[int, str] | Callable[[int], str] | None = None):
    """One row per box of the diagram: stage (row), col (x0, k = 1 … γ, bonus), the box's text, its kind and a
    tooltip line. ``texts`` names the backbone's picks (token id → text, or a function); without it a pick is
    named by the trace's own tokens where it appears there, else by its id ("#id")."""
    import pandas as pd

    r = trace.rounds[round_index]
    if not r.drafts:
        raise ValueError(f"round {round_index} drafted nothing (a plain step): there is no block to draw")
    ds = sorted(r.drafts, key=lambda d: d.k)
    temperature = float(trace.meta.get("temperature") or 0.0)
    ell_shown, statuses = scheduled_statuses(r, ell)
    known = _known_texts(trace)
    gamma = len(ds)
    cols = ["x0"] + [f"k = {d.k}" for d in ds] + ["bonus"]
    col_i = {c: i for i, c in enumerate(cols)}
    rows = []

    def box(stage: int, col: str, text: str, kind: str, detail: str):
        rows.append(dict(stage=STAGES[stage], stage_i=stage, col=col, col_i=col_i[col], text=text, kind=kind,
                         detail=detail))

    anchor_text = display_token(_anchor_text(trace, round_index), 10)
    box(0, "x0", anchor_text, "anchor", "the token the target committed last; the drafter's input")
    for d, st in zip(ds, statuses):
        col = f"k = {d.k}"
        diag = d.diag or {}
        pick = diag.get("backbone")
        drafted = display_token(d.text, 10)
        if pick is not None:
            box(1, col, display_token(_text_of(int(pick), texts, known), 10), "backbone pick",
                f"the backbone's own top token at slot {d.k} (U_k alone)"
                + (f"; margin U1 − U2 = {diag['margin']:.2f}" if diag.get("margin") is not None else ""))
            kind, why = head_kind(int(pick), diag.get("head"), d.token, temperature)
            box(2, col, drafted, kind, f"drafted x_{d.k}: {why}; p_draft = {d.p_draft:.3f}")
        else:
            box(2, col, drafted, "head kept the pick", f"drafted x_{d.k}; p_draft = {d.p_draft:.3f}")
        c = d.confidence_cal if d.confidence_cal is not None else d.confidence
        if c is not None:
            a = d.survival if d.survival is not None else float("nan")
            box(3, col, f"c {c:.2f}\na {a:.2f}", "confidence",
                f"c_{d.k} = {c:.3f} (chance this slot survives if slots < {d.k} did); a_{d.k} = {a:.3f}")
        keep = st != "pruned"
        box(4, col, "keep" if keep else "drop", "kept" if keep else "dropped",
            f"slot {d.k} {'is' if keep else 'is not'} shown to the target (ℓ = {ell_shown})")
        if keep:
            word = {"accepted": "accepted", "rejected": "REJECTED", "not_reached": "not\nreached"}[st]
            pt = f"; p_target = {d.p_target:.3f}" if d.p_target is not None else ""
            box(5, col, word, st.replace("_", " "), f"slot {d.k}: {st.replace('_', ' ')}{pt}")
        if st == "accepted":
            box(6, col, drafted, "accepted", f"x_{d.k} committed")
    m = sum(st == "accepted" for st in statuses)
    if r.bonus is not None:
        where = "the residual max(0, p_target − p_draft) at the rejected slot" if m < ell_shown \
            else "the target's distribution after the whole kept block"
        bonus = display_token(r.bonus_text, 10)
        box(5, "bonus", bonus, "bonus", f"the target's own token, drawn from {where}")
        box(6, "bonus", bonus, "bonus", "committed; the next round's anchor x0")
    return pd.DataFrame(rows, columns=FRAME_COLUMNS).assign(gamma=gamma, ell=ell_shown, m=m)


def _anchor_text(trace: Trace, round_index: int) -> str:
    if round_index == 0:
        return trace.first_text
    prev = trace.rounds[round_index - 1]
    return prev.bonus_text if prev.bonus is not None else ""


def round_diagram(trace: Trace, round_index: int, ell: int | None = None,
                  texts: Mapping[int, str] | Callable[[int], str] | None = None, context_chars: int = 70,
                  box_width: int = 78, box_height: int = 44):
    """The diagram of ``round_diagram_frame`` as an altair chart: one row per stage, one column per slot, boxes
    coloured and dashed by kind; the title carries the context the round continues."""
    import altair as alt

    df = round_diagram_frame(trace, round_index, ell, texts)
    ell_shown, m, gamma = int(df.ell.iloc[0]), int(df.m.iloc[0]), int(df.gamma.iloc[0])
    cols = ["x0"] + [f"k = {k}" for k in range(1, gamma + 1)] + ["bonus"]
    kinds = [k for k in KIND_COLORS if k in set(df.kind)]
    ctx = " ".join(context_text(trace, round_index).split())
    ctx = ctx if len(ctx) <= context_chars else "…" + ctx[-(context_chars - 1):]
    dash = alt.StrokeDash("kind:N", scale=alt.Scale(domain=kinds, range=[KIND_DASH.get(k, [1, 0]) for k in kinds]),
                          legend=None)
    base = alt.Chart(df).encode(
        x=alt.X("col:N", sort=cols, title=None, scale=alt.Scale(domain=cols, paddingInner=0.1),
                axis=alt.Axis(orient="top", labelAngle=0, labelFontSize=11, ticks=False, domain=False)),
        y=alt.Y("stage:N", sort=list(STAGES), title=None, scale=alt.Scale(domain=list(STAGES), paddingInner=0.14),
                axis=alt.Axis(labelFontSize=11, labelLimit=260, ticks=False, domain=False)),
        tooltip=[alt.Tooltip("stage:N"), alt.Tooltip("col:N", title="slot"), alt.Tooltip("detail:N")])
    boxes = base.mark_rect(stroke="#333333", strokeWidth=1.2, cornerRadius=4).encode(
        color=alt.Color("kind:N", title="box", scale=alt.Scale(domain=kinds, range=[KIND_COLORS[k] for k in kinds]),
                        legend=alt.Legend(orient="bottom", columns=4, symbolStrokeColor="#333333")),
        strokeDash=dash)
    labels = base.mark_text(fontSize=11, font="monospace", lineBreak="\n", color="#111111").encode(text="text:N")
    title = alt.Title(f"One DSpark round, stage by stage (paper Fig. 1): γ = {gamma}, ℓ = {ell_shown} verified, "
                      f"m = {m} accepted, then the bonus",
                      subtitle=[f"context: {ctx}",
                                "rows top to bottom are the stages of one round; columns the anchor, the γ slots "
                                "and the target's bonus token"])
    return (boxes + labels).properties(width=box_width * len(cols), height=box_height * len(STAGES), title=title)


__all__ = ["round_diagram", "round_diagram_frame", "scheduled_statuses", "context_text", "STAGES", "KIND_COLORS"]
