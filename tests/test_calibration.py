"""Calibration metrics and Sequential Temperature Scaling."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from dspark_viz.calibration import (
    STSCalibration,
    auroc,
    brier,
    calibration_report,
    ece,
    expected_auroc,
    fit_sts,
    reliability_bins,
    rollouts_from_traces,
)
from dspark_viz.trace import DraftToken, Round, Trace


# -- metrics ---------------------------------------------------------------------------------------
def test_ece_by_hand():
    pred, obs = [0.1, 0.3, 0.8, 0.9], [0, 1, 1, 1]
    # 2 bins: [0, .5): mean pred .2 vs obs .5 → .3 ; [.5, 1]: .85 vs 1 → .15 ; each half the weight
    assert ece(pred, obs, n_bins=2) == pytest.approx(0.225)
    # 10 bins: every prediction alone: mean |p − o| = (.1 + .7 + .2 + .1) / 4
    assert ece(pred, obs, n_bins=10) == pytest.approx(0.275)
    assert ece([1.0, 1.0], [1, 1]) == 0.0                     # p = 1 falls in the last bin
    assert np.isnan(ece([], []))
    with pytest.raises(ValueError):
        ece([0.1, 0.2], [1])


def test_auroc_by_hand_and_against_pairs():
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    assert auroc([0.2, 0.5, 0.5, 0.9], [0, 1, 0, 1]) == pytest.approx(3.5 / 4)   # tie counts ½
    assert auroc([0.5, 0.5], [0, 1]) == pytest.approx(0.5)
    assert np.isnan(auroc([0.1, 0.2], [1, 1]))
    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 5, 60) / 4, rng.integers(0, 2, 60)
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0)
             for (a, la), (b, lb) in itertools.product(zip(s, y), repeat=2) if la == 1 and lb == 0]
    assert auroc(s, y) == pytest.approx(np.mean(pairs))


def test_expected_auroc_by_hand_pairs_and_draws():
    # two rows: pair weight p1(1 − p2) = .8·.7 ranked right, p2(1 − p1) = .3·.2 ranked wrong
    assert expected_auroc([0.9, 0.1], [0.8, 0.3]) == pytest.approx(0.56 / (0.56 + 0.06))
    assert expected_auroc([0.5, 0.5], [0.8, 0.3]) == pytest.approx(0.5)               # a tie counts ½
    assert np.isnan(expected_auroc([0.1, 0.2], [1.0, 1.0]))
    rng = np.random.default_rng(1)
    s, y = rng.integers(0, 6, 50) / 5, rng.integers(0, 2, 50).astype(float)
    assert expected_auroc(s, y) == pytest.approx(auroc(s, y))                        # 0/1 chances: plain AUROC
    p = rng.uniform(0, 1, 40)
    s = p + rng.normal(0, 0.2, 40)
    w = [(pi * (1 - pj), 1.0 if si > sj else 0.5 if si == sj else 0.0)
         for i, (si, pi) in enumerate(zip(s, p)) for j, (sj, pj) in enumerate(zip(s, p)) if i != j]
    assert expected_auroc(s, p) == pytest.approx(sum(a * b for a, b in w) / sum(a for a, _ in w))
    p = rng.uniform(0.05, 0.6, 3000)                                     # many draws average to it
    s = p + rng.normal(0, 0.1, 3000)
    draws = [auroc(s, (rng.random(3000) < p).astype(float)) for _ in range(40)]
    assert np.mean(draws) == pytest.approx(expected_auroc(s, p), abs=0.005)
    assert expected_auroc(p, p) > expected_auroc(s, p)                   # knowing the chance ranks best


def test_brier_and_reliability_bins():
    assert brier([0.1, 0.3, 0.8, 0.9], [0, 1, 1, 1]) == pytest.approx((0.01 + 0.49 + 0.04 + 0.01) / 4)
    df = reliability_bins([0.1, 0.3, 0.8, 0.9], [0, 1, 1, 1], n_bins=4)
    assert list(df.columns) == ["bin", "lo", "hi", "mean_pred", "mean_obs", "count"]
    assert df["count"].tolist() == [1, 1, 0, 2]
    assert df.mean_pred[3] == pytest.approx(0.85) and df.mean_obs[1] == 1.0 and np.isnan(df.mean_pred[2])
    assert df.lo.tolist() == [0, 0.25, 0.5, 0.75]


# -- STS -------------------------------------------------------------------------------------------------
def synthetic_rollouts(n=4000, gamma=5, t_true=(1.8, 2.2, 1.5, 2.5, 1.2), seed=0):
    """Raw c_k overconfident: the true conditional acceptance is σ(logit(c_k)/T_true,k)."""
    rng = np.random.default_rng(seed)
    conf = 1 / (1 + np.exp(-rng.normal(1.5, 1.5, (n, gamma))))              # (N, γ)
    z = np.log(conf) - np.log1p(-conf)
    p_true = 1 / (1 + np.exp(-z / np.array(t_true[:gamma])))
    ok = rng.random((n, gamma)) < p_true
    m = np.where(ok.all(1), gamma, np.argmin(ok, axis=1))                  # first failure
    return conf, m


def test_sts_recovers_temperatures_and_lowers_ece():
    conf, m = synthetic_rollouts()
    cal = fit_sts(conf, m)
    assert len(cal.temperatures) == 5 and all(t > 1 for t in cal.temperatures[:3])
    assert cal.temperatures[0] == pytest.approx(1.8, rel=0.2)
    rep = calibration_report(conf, m, calib=cal)
    assert all(a <= b + 1e-12 for a, b in zip(rep["ece_after"], rep["ece_before"]))
    assert np.mean(rep["ece_after"]) < 0.5 * np.mean(rep["ece_before"])
    assert all(a <= b + 1e-12 for a, b in zip(rep["brier_after"][:3], rep["brier_before"][:3]))
    # the fit-data guarantee: position 1 never gets worse, position k never worse than T_k = 1
    a_cal = cal.survival(conf)
    assert ece(a_cal[:, 0], m >= 1) <= ece(conf[:, 0], m >= 1)
    for k in range(1, 5):
        assert ece(a_cal[:, k], m >= k + 1) <= ece(a_cal[:, k - 1] * conf[:, k], m >= k + 1) + 1e-12


def test_sts_is_order_preserving_per_position():
    conf, m = synthetic_rollouts(n=1000)
    cal = fit_sts(conf, m)
    c = np.sort(conf, axis=0)                                               # each column increasing
    out = cal.apply(c)
    assert out.shape == c.shape
    assert np.all(np.diff(out, axis=0) >= 0)
    assert np.all((out > 0) & (out < 1))
    ident = STSCalibration([1.0, 1.0])
    np.testing.assert_array_equal(ident.apply(c[:, :2]), c[:, :2])


def test_sts_position_k_never_changes_earlier_positions():
    conf, m = synthetic_rollouts(n=1500)
    base = fit_sts(conf, m).temperatures
    rng = np.random.default_rng(3)
    for k in (1, 2, 4):
        alt = conf.copy()
        alt[:, k:] = rng.uniform(0.01, 0.99, alt[:, k:].shape)             # garbage at positions > k
        assert fit_sts(alt, m).temperatures[:k] == base[:k]


def test_sts_only_uses_verified_rows():
    conf, m = synthetic_rollouts(n=1000, seed=4)
    rng = np.random.default_rng(5)
    ell = rng.integers(0, 6, len(m))                                        # (N,) ℓ of each round
    m_obs = np.minimum(m, ell)
    cal = fit_sts(conf, m_obs, ell)
    assert cal.meta["n"] == [int((ell >= k).sum()) for k in range(1, 6)]
    # rows with ℓ < k can hold anything at k without changing T_k
    alt = conf.copy()
    for k in range(5):
        alt[ell < k + 1, k] = rng.uniform(0.01, 0.99, int((ell < k + 1).sum()))
    assert fit_sts(alt, m_obs, ell).temperatures == cal.temperatures
    mask = ell[:, None] >= np.arange(1, 6)[None, :]                          # same thing as a mask
    assert fit_sts(conf, m_obs, mask).temperatures == cal.temperatures
    # unverified positions get T = 1
    assert fit_sts(conf, np.zeros(len(m), int), np.zeros(len(m), int)).temperatures == [1.0] * 5


def test_apply_shapes_and_json(tmp_path):
    cal = STSCalibration([1.5, 0.8, 2.0], meta={"n": [3, 2, 1]})
    out = cal.apply([0.9, 0.5])
    assert isinstance(out, list) and len(out) == 2 and out[1] == pytest.approx(0.5)
    assert out[0] < 0.9
    assert cal.apply(np.full((4, 3), 0.7)).shape == (4, 3)
    assert isinstance(cal.apply([[0.7, 0.7, 0.7]]), list)
    with pytest.raises(ValueError, match="covers 3"):
        cal.apply([0.5] * 4)
    back = STSCalibration.from_json(cal.to_json())
    assert back.temperatures == cal.temperatures and back.meta == cal.meta
    assert json.loads(cal.to_json())["kind"] == "sts"
    p = tmp_path / "sts.json"
    cal.save(p)
    assert STSCalibration.load(p).temperatures == [1.5, 0.8, 2.0]
    for bad in ("not json", "[1, 2]", '{"kind": "other", "temperatures": [1]}',
                '{"kind": "sts", "temperatures": [1, -2]}', '{"kind": "sts"}'):
        p.write_text(bad)
        with pytest.raises(ValueError, match="STS calibration"):
            STSCalibration.load(p)


def test_calibration_report_fields():
    conf, m = synthetic_rollouts(n=800)
    rep = calibration_report(conf, m)
    assert rep["in_sample"] is True and len(rep["temperatures"]) == 5
    for key in ("n", "rate", "ece_before", "ece_after", "brier_before", "brier_after", "auroc",
                "auroc_after", "auroc_cond"):
        assert len(rep[key]) == 5, key
    assert rep["n"] == [800] * 5
    assert rep["rate"][0] == pytest.approx(np.mean(m >= 1))
    assert 0.5 < rep["auroc"][0] <= 1 and 0.5 < rep["auroc_cond"][1] <= 1
    assert rep["auroc"][0] == pytest.approx(rep["auroc_after"][0])          # one factor: order kept


# -- traces → rollouts --------------------------------------------------------------------------------------
def _round(i, conf, ell, m, stopped=False, bonus=7):
    drafts = [DraftToken(k=k + 1, token=k, text="t", p_draft=0.5, p_target=None,
                         confidence=c, confidence_cal=None, survival=None,
                         status="accepted" if k < m else "pruned") for k, c in enumerate(conf)]
    return Round(index=i, anchor=0, anchor_pos=i, drafts=drafts, ell=ell, accepted=m, bonus=bonus,
                 bonus_text="x", bonus_source="target", stopped=stopped)


def test_rollouts_from_traces():
    tr = Trace(meta={"domain": "math"}, prompt_ids=[1], first_token=2, rounds=[
        _round(0, [0.9, 0.8, 0.7], 3, 2),
        _round(1, [None, None, None], 3, 1),                                # no confidence head: skipped
        _round(2, [0.6, 0.5, 0.4], 3, 1, stopped=True, bonus=None),         # stop token accepted at 1
        _round(3, [0.3, 0.2], 2, 0),                                         # shorter block: NaN padded
    ])
    conf, acc, ell = rollouts_from_traces([tr])
    assert conf.shape == (3, 3) and np.isnan(conf[2, 2])
    assert acc.tolist() == [2, 1, 0] and ell.tolist() == [3, 1, 2]
    cal = fit_sts(conf, acc, ell)
    assert cal.meta["n"] == [3, 2, 1]
    empty = rollouts_from_traces([])
    assert empty[0].shape == (0, 0)


def test_sts_level_term_fixes_a_shift_a_temperature_cannot():
    """Over-confident on average (true logit = raw logit − 1): the level term b_k removes the shift;
    it stays order-preserving, sequential, and round-trips through JSON (invalid biases refused)."""
    rng = np.random.default_rng(7)
    n, g = 4000, 3
    z = rng.normal(0.5, 1.0, (n, g))
    conf = 1 / (1 + np.exp(-z))
    ok = rng.random((n, g)) < 1 / (1 + np.exp(-(z - 1.0)))
    m = np.where(ok.all(1), g, np.argmin(ok, axis=1))
    grid = np.round(np.linspace(-2, 2, 41), 2)
    plain, level = fit_sts(conf, m), fit_sts(conf, m, bias_grid=grid)
    e_plain = ece(plain.survival(conf)[:, 0], m >= 1)
    e_level = ece(level.survival(conf)[:, 0], m >= 1)
    assert e_level < 0.5 * e_plain and level.biases[0] == pytest.approx(-1.0, abs=0.3)
    c = np.sort(conf, axis=0)
    assert np.all(np.diff(level.apply(c), axis=0) >= 0)                     # still order-preserving
    alt = conf.copy()
    alt[:, 1:] = rng.uniform(0.01, 0.99, alt[:, 1:].shape)
    again = fit_sts(alt, m, bias_grid=grid)
    assert (again.temperatures[0], again.biases[0]) == (level.temperatures[0], level.biases[0])
    back = STSCalibration.from_json(level.to_json())
    np.testing.assert_allclose(back.apply(conf), level.apply(conf))
    with pytest.raises(ValueError, match="biases"):
        STSCalibration.from_dict({"kind": "sts", "temperatures": [1.0, 2.0], "biases": [0.1]})
