"""Palette and small display helpers shared by every chart and the token strip.

Colours are the Okabe–Ito colour-blind-safe palette. Every status is also told apart by *shape*
(border style in HTML, stroke dash / glyph in charts), so colour is never the only cue.
"""
from __future__ import annotations

from .. import registry
from ..registry import LiveMap
from ..scheduler import POLICIES

# Okabe & Ito (2008), "Color Universal Design"
OKABE_ITO = {
    "orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73", "yellow": "#F0E442",
    "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7", "black": "#000000",
    "grey": "#999999",
}
CATEGORICAL = [OKABE_ITO[k] for k in ("blue", "vermillion", "green", "orange", "purple", "sky", "yellow",
                                      "black", "grey")]

# -- token status -------------------------------------------------------------------------------
STATUS_ORDER = ("accepted", "rejected", "not_reached", "pruned", "bonus")
STATUS_COLORS = {
    "accepted": OKABE_ITO["green"],
    "rejected": OKABE_ITO["vermillion"],
    "not_reached": OKABE_ITO["grey"],
    "pruned": OKABE_ITO["purple"],
    "bonus": OKABE_ITO["blue"],
    "prefill": "#444444",
}
STATUS_LABELS = {      # glyph + words: readable without colour
    "accepted": "✓ accepted",
    "rejected": "✗ rejected",
    "not_reached": "… not reached",
    "pruned": "✂ pruned (never verified)",
    "bonus": "+ bonus (from target)",
    "prefill": "prefill token",
}
CHART_LABELS = {      # chart legends: plain words (renderer fonts may lack the glyphs); shape = dash/width
    "accepted": "accepted",
    "rejected": "rejected (first refused)",
    "not_reached": "not reached (after rejection)",
    "pruned": "pruned (never verified)",
    "bonus": "bonus (from target)",
    "prefill": "prefill token",
}
STATUS_HELP = {
    "accepted": "drafted, verified and kept",
    "rejected": "the first draft the target refused",
    "not_reached": "verified slot after the rejection: discarded",
    "pruned": "drafted but cut by the policy (k > ℓ)",
    "bonus": "drawn by the target after the accepted prefix",
    "prefill": "first token, from the target's prefill",
}
# chart marks: stroke dash, stroke width and opacity per status (shape cues that survive without colour)
STATUS_DASH = {"accepted": [1, 0], "rejected": [8, 3, 2, 3], "not_reached": [2, 2], "pruned": [6, 3],
               "bonus": [1, 0]}
STATUS_STROKE_WIDTH = {"accepted": 1, "rejected": 2.5, "not_reached": 1.5, "pruned": 1.5, "bonus": 2.5}
STATUS_OPACITY = {"accepted": 0.95, "rejected": 0.95, "not_reached": 0.45, "pruned": 0.45, "bonus": 0.95}

# -- named series ---------------------------------------------------------------------------------
def colour(c: str) -> str:
    """An Okabe–Ito name ("vermillion") as its hex value; any other colour as given."""
    return OKABE_ITO.get(c, c)


# read from the tables on every use (dspark_viz.registry, scheduler.POLICIES): a registered name has its colour
DRAFTER_COLORS = LiveMap(lambda: {n: colour(c) for n, c in registry.field_map("colour").items()}
                         | {"plain": OKABE_ITO["black"]})                      # plain decoding: no drafter
POLICY_COLORS = LiveMap(lambda: {n: colour(e.colour) for n, e in POLICIES.items() if e.colour}
                        | {"fixed-1": OKABE_ITO["black"], "fixed-0": OKABE_ITO["grey"]})   # MTP-1, no drafting
STAGE_COLORS = {"before STS": OKABE_ITO["grey"], "after STS": OKABE_ITO["vermillion"]}
OUTCOME_COLORS = {"accepted": OKABE_ITO["green"], "rejected": OKABE_ITO["vermillion"]}
COMPONENT_COLORS = {"U_k backbone": OKABE_ITO["blue"], "B_k sequential bias": OKABE_ITO["orange"],
                    "U_k + B_k sampled from": OKABE_ITO["vermillion"]}
ADMIT_COLORS = {"admitted": OKABE_ITO["green"], "not admitted": OKABE_ITO["grey"]}



def series_scale(names, fixed: dict[str, str] | None = None):
    """alt.Scale with a stable colour per name: known names keep their colour, others take free ones."""
    import altair as alt

    names = list(dict.fromkeys(str(n) for n in names))
    fixed = fixed or {}
    free = [c for c in CATEGORICAL if c not in {fixed[n] for n in names if n in fixed}]
    rng, i = [], 0
    for n in names:
        if n in fixed:
            rng.append(fixed[n])
        else:
            rng.append(free[i % len(free)] if free else CATEGORICAL[i % len(CATEGORICAL)])
            i += 1
    return alt.Scale(domain=names, range=rng)


def _statuses(statuses):
    return [x for x in STATUS_ORDER if x in set(statuses)] or list(STATUS_ORDER)


def status_scale(statuses=STATUS_ORDER):
    """Colour scale over CHART_LABELS (encode the field holding CHART_LABELS[status])."""
    import altair as alt

    s = _statuses(statuses)
    return alt.Scale(domain=[CHART_LABELS[x] for x in s], range=[STATUS_COLORS[x] for x in s])


def status_dash_scale(statuses=STATUS_ORDER):
    import altair as alt

    s = _statuses(statuses)
    return alt.Scale(type="ordinal", domain=[CHART_LABELS[x] for x in s], range=[STATUS_DASH[x] for x in s])


def status_width_scale(statuses=STATUS_ORDER):
    import altair as alt

    s = _statuses(statuses)
    return alt.Scale(type="ordinal", domain=[CHART_LABELS[x] for x in s], range=[STATUS_STROKE_WIDTH[x] for x in s])


def status_opacity_scale(statuses=STATUS_ORDER):
    import altair as alt

    s = _statuses(statuses)
    return alt.Scale(type="ordinal", domain=[CHART_LABELS[x] for x in s], range=[STATUS_OPACITY[x] for x in s])


def status_encodings(field: str = "label", title: str = "status", statuses=STATUS_ORDER, legend=None) -> dict:
    """color + strokeDash + strokeWidth + opacity on one field: one merged legend, colour AND shape."""
    import altair as alt

    leg = {} if legend is None else {"legend": legend}
    return dict(color=alt.Color(f"{field}:N", scale=status_scale(statuses), title=title, **leg),
                strokeDash=alt.StrokeDash(f"{field}:N", scale=status_dash_scale(statuses), title=title, **leg),
                strokeWidth=alt.StrokeWidth(f"{field}:N", scale=status_width_scale(statuses), title=title, **leg),
                opacity=alt.Opacity(f"{field}:N", scale=status_opacity_scale(statuses), title=title, **leg))


def display_token(text: str, max_len: int = 14) -> str:
    """Token text for chart labels (not HTML): visible whitespace, newline as ↵, clipped."""
    if text is None:
        return "∅"
    t = str(text).replace("\r", "").replace("\n", "↵").replace("\t", "⇥")
    if t.startswith(" "):
        t = "␣" + t[1:]
    if t.endswith(" ") and len(t) > 1:
        t = t[:-1] + "␣"
    if t == "":
        return "∅"
    return t if len(t) <= max_len else t[: max_len - 1] + "…"


def fmt(x, digits: int = 3) -> str:
    """Number for tooltips; None / NaN as an em dash."""
    if x is None:
        return "—"
    try:
        xf = float(x)
    except (TypeError, ValueError):
        return str(x)
    if xf != xf:
        return "—"
    return f"{xf:.{digits}f}"
