"""Several seeds of a serving sweep (serving.seeds), the paper's Figs. 7 and 8 values, and their charts."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dspark_viz import viz
from dspark_viz.cost import gpu_like
from dspark_viz.paper import figs78 as p78
from dspark_viz.datasets.synthetic import paper_scale_traces
from dspark_viz.serving.seeds import (BEST_FIXED, Interval, headline_seeds, interval, ratio_seeds, summarize,
                                      sweep_seeds, t975)
from dspark_viz.serving.simulate import headline, sweep


# -- intervals ------------------------------------------------------------------------------------------
def test_t_quantiles_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 4, 9, 29, 30):
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=6e-4)
    assert t975(31) == 1.960 and t975(1000) == 1.960
    with pytest.raises(ValueError):
        t975(0)


def test_interval_of_known_values():
    iv = interval([1.0, 2.0, 3.0, 4.0, 5.0])                  # mean 3, s = √2.5, t_4 = 2.776
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)
    assert iv.mean == 3.0 and iv.lo == pytest.approx(3 - half) and iv.hi == pytest.approx(3 + half)
    assert (iv.min, iv.max, iv.n) == (1.0, 5.0, 5)
    assert iv.fmt(2, "×") == f"×3.00 (95 % CI {3 - half:.2f}–{3 + half:.2f}, 5 seeds)"
    assert iv.short(1) == f"3.0 ({3 - half:.1f}–{3 + half:.1f})"
    assert interval([2.0, float("nan"), 2.0]) == Interval(2.0, 2.0, 2.0, 2.0, 2.0, 2)
    one = interval([7.0])
    assert one.lo == one.hi == 7.0 and one.fmt(1, unit="prompts") == "7.0 (1 prompt)"
    with pytest.raises(ValueError):
        interval([float("nan")])


# -- sweeps over seeds -----------------------------------------------------------------------------------
def _requests(seed):
    return paper_scale_traces("dspark", n=6, n_rounds=8, seed=seed)


POL = ["fixed-0", "fixed-1", "hardware-aware"]


def test_sweep_seeds_is_one_sweep_per_seed():
    runs = sweep_seeds(_requests, POL, gpu_like(), seeds=(0, 1, 2), Rs=(1, 4), n_rounds=6)
    assert len(runs) == 3 * len(POL) * 2 and sorted(runs.seed.unique()) == [0, 1, 2]
    one = sweep(_requests(1), POL, gpu_like(), Rs=(1, 4), n_rounds=6, seed=1)
    mine = runs[runs.seed == 1].drop(columns="seed").reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, one)
    fixed = sweep_seeds(_requests(0), POL, gpu_like(), seeds=(0, 1), Rs=(1,), n_rounds=6)   # the same requests
    assert set(fixed.seed) == {0, 1}


def test_summarize_headline_and_ratios():
    runs = sweep_seeds(_requests, POL, gpu_like(), seeds=(0, 1, 2), Rs=(1, 2, 4, 8), n_rounds=6)
    s = summarize(runs)
    assert len(s) == len(POL) * 4 and (s.n_seeds == 3).all()
    g = runs.groupby(["policy", "R"]).throughput
    means = s.set_index(["policy", "R"]).throughput
    np.testing.assert_allclose(means.sort_index(), g.mean().sort_index())
    assert (s.throughput_lo <= s.throughput).all() and (s.throughput <= s.throughput_hi).all()
    plain = s[s.policy == "fixed-0"]
    np.testing.assert_allclose(plain.mean_budget, 0.0)                         # plain decoding verifies nothing
    np.testing.assert_allclose(plain.tau, 1.0)
    h = headline_seeds(runs, "hardware-aware", "fixed-1", sla_R=4)
    assert list(h.seed) == [0, 1, 2]
    assert h.throughput_gain_at_sla.iloc[1] == headline(runs[runs.seed == 1], "hardware-aware", "fixed-1",
                                                        sla_R=4)["throughput_gain_at_sla"]
    r = ratio_seeds(runs, "hardware-aware", "fixed-1")
    assert r.shape == (4, 3)
    t = runs[(runs.R == 2) & (runs.seed == 2)].set_index("policy").throughput
    assert r.loc[2, 2] == pytest.approx(t["hardware-aware"] / t["fixed-1"])
    best = ratio_seeds(runs, "hardware-aware", BEST_FIXED)
    assert best.loc[2, 2] == pytest.approx(t["hardware-aware"] / t[["fixed-0", "fixed-1"]].max())


# -- the paper's numbers ---------------------------------------------------------------------------------
def test_paper_values_are_labelled_by_source():
    gain = p78.paper_value(7, "DeepSeek-V4-Flash", p78.THROUGHPUT_GAIN, "SLA 80 tok/s/user (moderate)")
    assert gain.value == 1.51 and gain.label() == "1.51"                          # from the text: exact
    read = p78.paper_value(8, "DeepSeek-V4-Pro", p78.THROUGHPUT_DSPARK, "200 concurrent requests")
    assert read.label("{:,.0f}") == "≈ 6,300, Fig. 8"                             # read off: marked
    assert all(v.source in ("text", "Fig. 7", "Fig. 8") and v.engine in p78.ENGINES for v in p78.FIG7 + p78.FIG8)
    assert p78.paper_value(7, "DeepSeek-V4-Flash", p78.THROUGHPUT_GAIN,
                           "SLA 120 tok/s/user (strict: MTP-1 near its boundary)").value == pytest.approx(1 + 6.61)
    with pytest.raises(KeyError):
        p78.paper_value(7, "DeepSeek-V4-Flash", p78.THROUGHPUT_GAIN)               # two SLAs: `at` needed


def test_figure_reads_agree_with_the_text():
    """The anchor points read off Fig. 7 give the text's moderate-SLA gains within the reading error."""
    for engine, at in (("DeepSeek-V4-Flash", "SLA 80 tok/s/user"), ("DeepSeek-V4-Pro", "SLA 35 tok/s/user")):
        d, m = (p78.paper_value(7, engine, q, at).value for q in (p78.THROUGHPUT_DSPARK, p78.THROUGHPUT_MTP))
        text = [v.value for v in p78.paper_values(7, p78.THROUGHPUT_GAIN) if v.engine == engine][0]
        assert d / m == pytest.approx(text, rel=0.05)
    assert all(v.value == 2 for v in p78.paper_values(8, p78.BUDGET_MTP))              # MTP-1: 1 + ℓ with ℓ = 1


# -- charts ----------------------------------------------------------------------------------------------
def test_concurrency_chart_renders_with_and_without_band():
    runs = sweep_seeds(_requests, POL, gpu_like(), seeds=(0, 1), Rs=(1, 4), n_rounds=5)
    for frame in (summarize(runs), runs[runs.seed == 0]):
        chart = viz.concurrency_chart(frame, data="test")
        svg = viz.to_svg(chart)
        assert svg.lstrip().startswith("<svg")
    spec = viz.concurrency_chart(summarize(runs)).to_dict()
    text = str(spec)
    assert "throughput_lo" in text and "mean of 2 seeds" in text
    budget = [v for v in spec["datasets"].values()][0]
    assert {r["mean_budget"] for r in budget if r["policy"] == "fixed-1"} == {2.0}     # 1 + ℓ, the paper's count


def test_loss_curve_chart():
    from dspark_viz.viz.training import loss_curve_chart, loss_frame

    log = [dict(step=10, loss=2.7, l1=1.9, ce=8.0, bce=0.2, lr=1e-4), dict(step=20, loss=2.5, l1=1.8, ce=6.0, bce=0.3),
           dict(step=20, val=dict(loss=2.6, l1=1.85, ce=6.5, bce=0.25, tau_est=1.05))]
    df = loss_frame(log)
    assert len(df) == 12 and set(df.kind) == {"training batch", "validation"}
    assert df[(df.term == "cross-entropy") & (df.kind == "validation")].value.tolist() == [6.5]
    svg = viz.to_svg(loss_curve_chart(log, subtitle="test"))
    assert svg.lstrip().startswith("<svg")
