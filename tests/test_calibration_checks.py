"""dspark_viz.evaluation.calibration_checks (event counts, the AUROC's standard error, STS's objective per
position, temperatures at the grid's ends) and the paper's Fig. 5 / Fig. 6 values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dspark_viz import calibration as cal
from dspark_viz.evaluation import calibration_checks as cc
from dspark_viz.paper import figs56 as paper


def test_position_events_counts_both_events_on_verified_rows():
    conf = np.full((5, 3), 0.5)
    m = np.array([0, 1, 2, 3, 1])
    ell = np.array([3, 3, 3, 3, 1])                  # the last round verified one slot only
    ev = cc.position_events(conf, m, ell)
    assert ev.rounds.tolist() == [5, 4, 4]
    assert ev.survived.tolist() == [4, 2, 1]         # m ≥ k among rounds with ℓ ≥ k
    assert ev.failed.tolist() == [1, 2, 3]
    assert ev.reached.tolist() == [5, 3, 2]          # m ≥ k − 1 among rounds with ℓ ≥ k
    assert ev.failed_cond.tolist() == [1, 1, 1]
    assert not ev.enough.any() and not ev.enough_cond.any()


def test_position_events_match_the_report_and_flag_small_counts():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.05, 0.95, (400, 4))
    m = (rng.uniform(size=(400, 4)) < conf).cumprod(axis=1).sum(axis=1)
    ev = cc.position_events(conf, m)
    rep = cal.calibration_report(conf, m)
    assert ev.rounds.tolist() == rep["n"]
    assert np.allclose(ev.survived / ev.rounds, rep["rate"])
    small = np.minimum(ev.survived, ev.failed) < cc.MIN_EVENTS
    assert (ev.enough == ~small).all()


def test_auroc_se_is_hanley_mcneil():
    for n in (5, 40, 400):                            # A = ½: Q1 = Q2 = ⅓, var = (¼ + (n−1)/6)/n²
        assert cc.auroc_se(0.5, n, n) == pytest.approx(math.sqrt((0.25 + (n - 1) / 6) / n ** 2))
    assert cc.auroc_se(0.8, 10, 50) > cc.auroc_se(0.8, 100, 500) > 0
    assert math.isnan(cc.auroc_se(0.8, 0, 50)) and math.isnan(cc.auroc_se(float("nan"), 10, 10))


def test_sts_objective_is_what_fit_sts_minimises():
    rng = np.random.default_rng(1)
    conf = rng.uniform(0.05, 0.95, (600, 3))
    m = (rng.uniform(size=(600, 3)) < conf ** 1.5).cumprod(axis=1).sum(axis=1)
    sts = cal.fit_sts(conf, m)
    for k in (1, 2, 3):
        ts, e = cc.sts_objective(conf, m, None, sts, k)
        assert len(ts) == len(e) == len(set(cal.DEFAULT_GRID) | {1.0})
        assert e.min() == pytest.approx(sts.meta["ece_fit"][k - 1])
        assert e[np.argmin(np.abs(ts - sts.temperatures[k - 1]))] == pytest.approx(e.min())


def test_grid_ends():
    g = cal.DEFAULT_GRID
    assert cc.grid_ends([g[0], g[1], g[2], 1.0, g[-2], g[-1]]) == {1: "low", 2: "low", 5: "high", 6: "high"}
    assert cc.grid_ends([g[0], 1.0], steps=0) == {1: "low"}
    assert cc.grid_ends([0.5, 2.0]) == {}


def test_paper_values_agree_with_the_papers_summary():
    assert sorted(paper.FIG6) == [1, 3, 5, 7]
    before = [v[0] for v in paper.FIG6.values()]
    after = [v[1] for v in paper.FIG6.values()]
    auc = [v[2] for v in paper.FIG6.values()]
    lo, hi = paper.FIG6_TEXT["ece_before"]
    assert lo - 0.005 <= min(before) and max(before) <= hi + 0.005            # "ECE 3%–8%"
    assert abs(np.mean(after) - paper.FIG6_TEXT["ece_after_mean"]) < 0.005    # "average ECE to ∼1%"
    assert all(b > a for b, a in zip(before, after))
    lo, hi = paper.FIG6_TEXT["auc"]
    assert lo - 0.01 <= min(auc) and max(auc) <= hi + 0.01                    # "0.81 to 0.90"
    for dom, (r0, r1) in paper.FIG5_ACCEPT_RATE.items():
        assert 0 < r0 < r1 < 1
        t0, t1 = paper.FIG5_TOKENS_PER_STEP_READ_OFF[dom]
        assert t1 < t0 <= paper.SETUP["gamma"] + 1                             # γ drafts + the bonus token
