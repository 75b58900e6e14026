"""The machinery of the reproduction table (``reproduces``): one effect with its interval and verdict, the paired
bootstrap behind most intervals, the per-request counts it resamples, and the table's faces (a frame, Markdown, the
README's markers).

Legend: τ committed tokens per round (bonus included), k 1-based draft position, n requests, γ block size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .. import metrics

VERDICTS = ("reproduced", "not resolved at this budget", "reversed")
NO_DATA = "no data in this installation"
B_RESAMPLES, SEED = 2000, 0


@dataclass(frozen=True)
class Effect:
    """One row: the paper's claim and number, ours with its interval, and the verdict (module docstring)."""
    where: str                  # "Table 1", "Fig. 2", …
    claim: str                  # the effect, as the paper states it
    paper: str                  # the paper's number(s), with their source
    short: str                  # the effect in a few words (the README's table)
    paper_short: str            # the paper's number in a few characters
    here: str                   # what we measured it on
    estimate: float
    lo: float
    hi: float
    null: float                 # "no effect": 0 for a difference, 1 for a ratio, 0.5 for an AUROC
    side: int                   # +1: the paper's effect is estimate > null; −1: estimate < null
    basis: str                  # where the interval comes from
    notebook: str               # where the course teaches it
    fmt: str = "{:+.3f}"

    @property
    def verdict(self) -> str:
        if any(np.isnan(v) for v in (self.estimate, self.lo, self.hi)):
            return NO_DATA
        lo, hi = sorted((self.side * (self.lo - self.null), self.side * (self.hi - self.null)))
        return VERDICTS[0] if lo > 0 else VERDICTS[2] if hi < 0 else VERDICTS[1]

    @property
    def ours(self) -> str:
        """"+0.012 (−0.020 … +0.041)": our estimate and its interval."""
        if np.isnan(self.estimate):
            return "—"
        f = self.fmt.format
        bare = self.fmt.replace("×", "").format                          # "×1.055 (1.023 … 1.088)"
        return f"{f(self.estimate)} ({bare(self.lo)} … {bare(self.hi)})".replace("-", "−")


def no_data(where, claim, paper, short, paper_short, here, null, side, basis, notebook, fmt="{:+.3f}") -> Effect:
    nan = float("nan")
    return Effect(where, claim, paper, short, paper_short, here, nan, nan, nan, null, side, basis, notebook, fmt)


# -- resampling ----------------------------------------------------------------------------------------------------
def paired_bootstrap(stat: Callable[[np.ndarray], float], n: int, b: int = B_RESAMPLES,
                     seed: int = SEED) -> tuple[float, float, float]:
    """(estimate, lo, hi): ``stat`` on all n units (stat(indices) → float) and the 2.5 / 97.5 % percentiles of
    ``stat`` over b resamples of the units with replacement; "paired" because every statistic reads the same
    resampled units for every drafter or cell."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(b, n))                                       # (b, n)
    draws = np.array([stat(i) for i in idx])
    draws = draws[~np.isnan(draws)]
    return float(stat(np.arange(n))), float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


@dataclass(frozen=True)
class RequestCounts:
    """Per request (n,) or per request and slot (n, γ): what the pooled trace statistics sum."""
    rounds: np.ndarray          # (n,) drafted rounds
    committed: np.ndarray       # (n,) tokens they committed (bonus included)
    at_risk: np.ndarray         # (n, γ) rounds that reached slot k with slots < k accepted
    accepted: np.ndarray        # (n, γ) of those, slot k accepted

    def tau(self, i) -> float:
        return self.committed[i].sum() / self.rounds[i].sum()

    def alpha(self, i, ks: Sequence[int]) -> float:
        """Pooled conditional acceptance over slots ``ks`` (1-based): Σ accepted ÷ Σ at risk."""
        cols = [k - 1 for k in ks]
        den = self.at_risk[np.ix_(i, cols)].sum()
        return self.accepted[np.ix_(i, cols)].sum() / den if den else float("nan")


def request_counts(traces, gamma: int) -> RequestCounts:
    """Each trace's drafted rounds, their committed tokens and ``metrics.acceptance_counts`` per slot."""
    per = [metrics.acceptance_counts(t, gamma) for t in traces]
    committed = [sum(r.n_committed for r in t.rounds if r.drafts) for t in traces]
    return RequestCounts(np.array([c["rounds"][0] for c in per]), np.array(committed),
                         np.array([c["at_risk"] for c in per]), np.array([c["accepted"] for c in per]))


# -- the table -----------------------------------------------------------------------------------------------------
def reproduction_frame(effects: Sequence[Effect]):
    """The table as a DataFrame (for the notebooks): where, effect, paper, ours, verdict, here, basis, notebook."""
    import pandas as pd

    return pd.DataFrame([dict(where=e.where, effect=e.claim, paper=e.paper, ours=e.ours, verdict=e.verdict,
                              here=e.here, basis=e.basis, notebook=e.notebook) for e in effects])


BEGIN, END = "<!-- reproduces:begin -->", "<!-- reproduces:end -->"


def reproduction_markdown(effects: Sequence[Effect]) -> str:
    """The README's table: | where | effect | paper | here (interval) | verdict |."""
    lines = ["| | effect | paper | here (interval) | verdict |", "|---|---|---|---|---|"]
    for e in effects:
        lines.append(f"| {e.where} | {e.short} | {e.paper_short} | {e.ours} | {e.verdict} |")
    return "\n".join(lines)


def with_table(text: str, table: str) -> str:
    """``text`` with what stands between the BEGIN and END markers replaced by ``table``."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"no {BEGIN} … {END} markers to write the table between")
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{rest.split(END, 1)[1]}"


def verdict_counts(effects: Sequence[Effect]) -> dict[str, int]:
    return {v: sum(e.verdict == v for e in effects) for v in VERDICTS + (NO_DATA,)}


__all__ = ["Effect", "RequestCounts", "VERDICTS", "NO_DATA", "BEGIN", "END", "no_data", "paired_bootstrap",
           "request_counts", "reproduction_frame", "reproduction_markdown", "with_table", "verdict_counts"]
