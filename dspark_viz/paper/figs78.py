"""The paper's serving results (§5.4, Figs. 7 and 8): DSpark-5 (γ = 5) against the MTP-1 baseline in DeepSeek's
production engines (DeepSeek-V4-Flash and V4-Pro previews, live traffic, GPUs). Data only.

Each value says where it comes from: ``source="text"`` is a number the paper's text states; ``source="Fig. N"``
is a value read off that figure by eye (printed with "≈"). The paper's verification budget (Fig. 8, bottom row)
counts the tokens verified per request in one forward, bonus included: MTP-1's static budget is 2, i.e. 1 + ℓ
with ℓ = 1 in this package's terms.

Legend: SLA the per-user speed (tok/s per request) a deployment must guarantee; TPS tokens/s per user; throughput
in tokens/s per GPU.
"""
from __future__ import annotations

from dataclasses import dataclass

ENGINES = ("DeepSeek-V4-Flash", "DeepSeek-V4-Pro")
PAPER_GAMMA = 5                                   # DSpark-5: maximum draft length
PAPER_BASELINE = "MTP-1"                          # one draft token per request, verified every step


@dataclass(frozen=True)
class PaperValue:
    figure: int                 # 7 or 8
    engine: str                 # one of ENGINES
    quantity: str               # what is measured (see the module constants below for the names used)
    value: float
    source: str                 # "text" or "Fig. 7" / "Fig. 8" (read off the figure)
    at: str = ""                # the operating point (an SLA, a concurrency)

    def label(self, fmt: str = "{:g}") -> str:
        """The value as the course prints it: exact from the text, "≈ v, Fig. N" when read off a figure."""
        v = fmt.format(self.value)
        return v if self.source == "text" else f"≈ {v}, {self.source}"


# quantity names
THROUGHPUT_GAIN = "throughput gain over MTP-1 at the SLA (×)"
PER_USER_GAIN_LO = "per-user speed-up at matched throughput, low end (×)"
PER_USER_GAIN_HI = "per-user speed-up at matched throughput, high end (×)"
THROUGHPUT_MTP = "MTP-1 throughput (tok/s/GPU)"
THROUGHPUT_DSPARK = "DSpark throughput (tok/s/GPU)"
BUDGET_DSPARK = "DSpark verification budget (tokens per request, 1 + ℓ)"
BUDGET_MTP = "MTP-1 verification budget (tokens per request, 1 + ℓ)"

_F, _P = ENGINES

FIG7 = (
    # §5.4 text: +51 % / +661 % throughput (Flash, SLA 80 / 120 tok/s/user), +52 % / +406 % (Pro, SLA 35 / 50)
    PaperValue(7, _F, THROUGHPUT_GAIN, 1.51, "text", "SLA 80 tok/s/user (moderate)"),
    PaperValue(7, _F, THROUGHPUT_GAIN, 7.61, "text", "SLA 120 tok/s/user (strict: MTP-1 near its boundary)"),
    PaperValue(7, _P, THROUGHPUT_GAIN, 1.52, "text", "SLA 35 tok/s/user (moderate)"),
    PaperValue(7, _P, THROUGHPUT_GAIN, 5.06, "text", "SLA 50 tok/s/user (strict: MTP-1 near its boundary)"),
    # §5.4 text: "DSpark accelerates per-user generation speeds by 60% to 85%" (Flash), "57% to 78%" (Pro)
    PaperValue(7, _F, PER_USER_GAIN_LO, 1.60, "text", "matched throughput"),
    PaperValue(7, _F, PER_USER_GAIN_HI, 1.85, "text", "matched throughput"),
    PaperValue(7, _P, PER_USER_GAIN_LO, 1.57, "text", "matched throughput"),
    PaperValue(7, _P, PER_USER_GAIN_HI, 1.78, "text", "matched throughput"),
    # the anchor points drawn in Fig. 7 (read off)
    PaperValue(7, _F, THROUGHPUT_MTP, 10_600, "Fig. 7", "SLA 80 tok/s/user"),
    PaperValue(7, _F, THROUGHPUT_DSPARK, 16_000, "Fig. 7", "SLA 80 tok/s/user"),
    PaperValue(7, _P, THROUGHPUT_MTP, 3_750, "Fig. 7", "SLA 35 tok/s/user"),
    PaperValue(7, _P, THROUGHPUT_DSPARK, 5_700, "Fig. 7", "SLA 35 tok/s/user"),
)

FIG8 = (
    # top row, the fitted curves read off at 100 and 200 concurrent requests
    PaperValue(8, _F, THROUGHPUT_MTP, 9_000, "Fig. 8", "100 concurrent requests"),
    PaperValue(8, _F, THROUGHPUT_DSPARK, 12_000, "Fig. 8", "100 concurrent requests"),
    PaperValue(8, _F, THROUGHPUT_MTP, 14_000, "Fig. 8", "200 concurrent requests"),
    PaperValue(8, _F, THROUGHPUT_DSPARK, 16_000, "Fig. 8", "200 concurrent requests"),
    PaperValue(8, _P, THROUGHPUT_MTP, 3_800, "Fig. 8", "100 concurrent requests"),
    PaperValue(8, _P, THROUGHPUT_DSPARK, 4_600, "Fig. 8", "100 concurrent requests"),
    PaperValue(8, _P, THROUGHPUT_MTP, 5_500, "Fig. 8", "200 concurrent requests"),
    PaperValue(8, _P, THROUGHPUT_DSPARK, 6_300, "Fig. 8", "200 concurrent requests"),
    # bottom row: MTP-1's static 2 tokens and DSpark's "roughly 4–6 tokens per request" (text) under moderate
    # concurrency, falling smoothly with load (fitted curves read off at the lightest and heaviest load drawn)
    PaperValue(8, _F, BUDGET_MTP, 2, "text", "any concurrency"),
    PaperValue(8, _P, BUDGET_MTP, 2, "text", "any concurrency"),
    PaperValue(8, _F, BUDGET_DSPARK, 5.0, "Fig. 8", "≈ 20 concurrent requests"),
    PaperValue(8, _F, BUDGET_DSPARK, 3.5, "Fig. 8", "200 concurrent requests"),
    PaperValue(8, _P, BUDGET_DSPARK, 5.5, "Fig. 8", "≈ 5 concurrent requests"),
    PaperValue(8, _P, BUDGET_DSPARK, 3.5, "Fig. 8", "≈ 190 concurrent requests"),
)

# the moderate-concurrency range the text names for the 4–6 token budgets: fewer than 200 (Flash), 150 (Pro)
MODERATE_CONCURRENCY = {_F: 200, _P: 150}


def paper_values(figure: int | None = None, quantity: str | None = None) -> list[PaperValue]:
    """The values of one figure (7, 8 or None for both), optionally of one quantity, in the order above."""
    return [v for v in FIG7 + FIG8 if (figure is None or v.figure == figure)
            and (quantity is None or v.quantity == quantity)]


def paper_value(figure: int, engine: str, quantity: str, at: str | None = None) -> PaperValue:
    """The one value with these keys (``at`` needed where a quantity has several operating points)."""
    hits = [v for v in paper_values(figure, quantity) if v.engine == engine and (at is None or v.at == at)]
    if len(hits) != 1:
        raise KeyError(f"{len(hits)} paper values for Fig. {figure}, {engine}, {quantity!r}, at={at!r}")
    return hits[0]


__all__ = ["PaperValue", "FIG7", "FIG8", "ENGINES", "PAPER_GAMMA", "PAPER_BASELINE", "MODERATE_CONCURRENCY",
           "THROUGHPUT_GAIN", "PER_USER_GAIN_LO", "PER_USER_GAIN_HI", "THROUGHPUT_MTP", "THROUGHPUT_DSPARK",
           "BUDGET_DSPARK", "BUDGET_MTP", "paper_values", "paper_value"]
