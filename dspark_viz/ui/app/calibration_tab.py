"""The Calibration tab: reliability of the prefix survival a_k per draft position, before and after STS.

Legend: γ block size, k 1-based draft position, c_k confidence, a_k = c_1·…·c_k prefix survival, a'_k after
Sequential Temperature Scaling (one temperature T_k per position), ECE expected calibration error.

The data, the STS fit and the report come from ``AppResources.calibration`` (``resources.build_calibration``:
fitted on half of the requests, shown on the other half); this module draws the diagram and writes the table.
"""
from __future__ import annotations

from ...viz import reliability_diagram
from ..inputs import clamp
from .resources import AppResources, CalibrationData
from .text import chart_json, fmt_num


def calibration_view(res: AppResources, position=0, after: bool = True) -> tuple[str, str]:
    """(reliability diagram JSON, per-position table Markdown) for position k (0: all) before / after STS."""
    cd = res.calibration
    g = cd.conf.shape[1]
    k = int(clamp(position or 0, 0, g, "position", [], integer=True))

    def make():
        df = cd.frame if after else cd.frame[cd.frame.stage == "before STS"]
        return chart_json(reliability_diagram(df, positions=[k] if k else None, report=cd.report,
                                              size=300 if k else 105))
    return res.memo(("calib", k, bool(after)), make), calibration_table(cd, bool(after))


def calibration_table(cd: CalibrationData, after: bool) -> str:
    """Markdown table, one row per position k: observed P(m≥k), mean a_k, ECE (and T_k, a'_k after STS), AUROC."""
    rep = cd.report
    head = ["k", "rounds", "observed P(m≥k)", "mean a_k raw", "ECE raw"]
    if after:
        head += ["T_k", "mean a'_k", "ECE after STS"]
    head += ["AUROC"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for i in range(len(rep["n"])):
        cells = [str(i + 1), str(rep["n"][i]), fmt_num(rep["rate"][i], 3), fmt_num(rep["mean_before"][i], 3),
                 fmt_num(rep["ece_before"][i], 3)]
        if after:
            cells += [fmt_num(rep["temperatures"][i]), fmt_num(rep["mean_after"][i], 3),
                      f"**{fmt_num(rep['ece_after'][i], 3)}**"]
        cells.append(fmt_num(rep["auroc"][i], 3))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


__all__ = ["calibration_table", "calibration_view"]
