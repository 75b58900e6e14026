"""The "what reproduces here" table (evaluation/reproduces.py): verdicts from intervals, the statistics it pools,
the README's copy, and that new data change a verdict."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dspark_viz import metrics
from dspark_viz.datasets.traces import recorded_traces
from dspark_viz.evaluation import reproduces as rp

ROOT = Path(__file__).resolve().parents[1]
AREAS = {"Table 1", "Fig. 2", "Fig. 3", "Fig. 4", "Fig. 5", "Fig. 6", "Figs. 7–8", "Eq. 1"}


@pytest.fixture(scope="module")
def table():
    return rp.reproduction_table()


def effect(est, lo, hi, null=1.0, side=1):
    return rp.Effect("Fig. 0", "claim", "paper", "short", "p", "here", est, lo, hi, null, side, "basis", "00")


def test_verdict_is_read_off_the_interval():
    assert effect(1.2, 1.1, 1.3).verdict == "reproduced"
    assert effect(0.8, 0.7, 0.9).verdict == "reversed"
    assert effect(1.0, 0.9, 1.1).verdict == "not resolved at this budget"
    assert effect(1.0, 1.0, 1.1).verdict == "not resolved at this budget"        # touching "no effect" is not enough
    # an effect the paper states as a fall (side −1): a fall here reproduces it
    assert effect(-0.02, -0.03, -0.01, null=0.0, side=-1).verdict == "reproduced"
    assert effect(0.02, 0.01, 0.03, null=0.0, side=-1).verdict == "reversed"
    assert effect(float("nan"), float("nan"), float("nan")).verdict == rp.NO_DATA


def test_paired_bootstrap_is_deterministic_and_holds_its_estimate():
    x = np.arange(1.0, 31.0)
    stat = lambda i: x[i].mean()                                                  # noqa: E731
    a, b = rp.paired_bootstrap(stat, len(x)), rp.paired_bootstrap(stat, len(x))
    assert a == b
    est, lo, hi = a
    assert est == x.mean() and lo < est < hi
    # a statistic of a drafter against itself: exactly no effect in every resample
    assert rp.paired_bootstrap(lambda i: x[i].mean() / x[i].mean(), len(x)) == (1.0, 1.0, 1.0)


def test_request_counts_pool_to_the_trace_metrics():
    ts = recorded_traces("dflash", 1.0)
    c = rp.request_counts(ts, 7)
    every = np.arange(len(ts))
    assert np.isclose(c.tau(every), metrics.tau(ts))
    ref = metrics.acceptance_counts(ts, 7)
    assert c.at_risk.sum(axis=0).tolist() == ref["at_risk"] and c.accepted.sum(axis=0).tolist() == ref["accepted"]
    assert np.isclose(c.alpha(every, [1]), metrics.conditional_acceptance(ts, 7)[0])


def test_the_table_covers_the_papers_effects_with_intervals(table):
    assert {e.where for e in table} == AREAS
    for e in table:
        assert e.verdict in rp.VERDICTS, (e.where, e.claim, e.verdict)          # the checkout has every input
        assert e.lo <= e.estimate <= e.hi, (e.claim, e.lo, e.estimate, e.hi)
        assert e.paper and e.paper_short and e.here and e.basis and e.notebook
    assert set(rp.verdict_counts(table)) >= set(rp.VERDICTS)


def test_the_readme_shows_the_computed_table(table):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert rp.BEGIN in text and rp.END in text
    shown = text.split(rp.BEGIN, 1)[1].split(rp.END, 1)[0].strip().splitlines()
    made = rp.reproduction_markdown(table).splitlines()
    assert len(shown) == len(made), "rewrite it: dspark-viz reproduces --write README.md"
    num = re.compile(r"[−+-]?\d+\.\d+")
    for a, b in zip(shown, made):
        # same words and verdict; numbers equal to the last digit or within a rounding step (floats differ in the
        # last digits between CPUs)
        assert num.sub("#", a) == num.sub("#", b), (a, b)
        for x, y in zip(num.findall(a), num.findall(b)):
            f = lambda s: float(s.replace("−", "-"))                                # noqa: E731
            assert abs(f(x) - f(y)) <= 0.0015, (a, b)


def _cell(name, algo, layers, gamma, taus, steps=400):
    return dict(name=name, algo=algo, layers=layers, gamma=gamma, max_seqs=900, steps=steps, tau=float(np.mean(taus)),
                per_prompt=[dict(domain="math", tau=t) for t in taus], conditional_acceptance=[0.5] * gamma,
                val_curve=[], train={}, recipe={})


def test_new_study_data_change_the_verdicts(tmp_path):
    rng = np.random.default_rng(1)
    base = 1.3 + 0.1 * rng.random(24)
    cells = [_cell("dspark_L1_g7", "dspark", 1, 7, base), _cell("dspark_L2_g7", "dspark", 2, 7, base * 1.2),
             _cell("dflash_L1_g7", "dflash", 1, 7, base), _cell("dflash_L3_g7", "dflash", 3, 7, base * 1.4),
             _cell("dspark_L1_g15", "dspark", 1, 15, base), _cell("dflash_L1_g15", "dflash", 1, 15, base)]
    for c in cells:
        (tmp_path / f"{c['name']}.json").write_text(json.dumps(c))
    got = {e.short: e for e in rp.figs3_and_4(tmp_path)}
    assert got["τ, DSpark 2 ÷ 1 layers"].verdict == "reproduced"
    assert got["τ, DSpark 2 layers ÷ deepest DFlash"].verdict == "reversed"
    assert got["τ, DSpark ÷ DFlash at γ = 7"].estimate == 1.0
    assert got["τ, DSpark ÷ DFlash at γ = 7"].verdict == "not resolved at this budget"
    assert all(e.verdict == rp.NO_DATA for e in rp.figs3_and_4(tmp_path / "absent"))


def test_cli_writes_only_between_markers(tmp_path):
    f = tmp_path / "page.md"
    f.write_text("no markers here\n")
    run = subprocess.run([sys.executable, "-m", "dspark_viz.cli", "reproduces", "--write", str(f)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 2 and "markers" in run.stderr and f.read_text() == "no markers here\n"
    assert rp.with_table(f"a\n{rp.BEGIN}\nold\n{rp.END}\nb", "new") == f"a\n{rp.BEGIN}\nnew\n{rp.END}\nb"


def test_the_compared_drafters_share_one_budget():
    """The table compares only drafters trained alike: same data, steps and recipe (their cards)."""
    from dspark_viz.drafters.neural import ASSETS, SHIPPED

    cards = [json.loads((ASSETS / f"{SHIPPED[n]}.json").read_text())["train"] for n in rp.EQUAL_BUDGET]
    keys = ("steps", "data_tokens", "data_sequences")
    assert all({k: c[k] for k in keys} == {k: cards[0][k] for k in keys} for c in cards)
    assert all(c["recipe"] == cards[0]["recipe"] for c in cards) and not any(c.get("warm_start") for c in cards)
