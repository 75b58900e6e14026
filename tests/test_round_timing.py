"""Eq. 1 on a machine: the round-part timer (evaluation/round_timing.py), the speculation-gain arithmetic
(evaluation/speculation_gain.py) and its two charts (viz/speed.py). Toy targets only: runs in seconds."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from dspark_viz.cost import SPSProfile, gpu_like
from dspark_viz.drafters.hybrid import best_rate
from dspark_viz.drafters.random import RandomDrafter
from dspark_viz.evaluation import speculation_gain as sg
from dspark_viz.evaluation.round_timing import RoundTimes, measure_round_times, profile_round_times
from dspark_viz.model.toy import TableTarget
from dspark_viz.trace import DraftToken, Round, Trace


def _round(i: int, m: int, ell: int = 4, gamma: int = 4, stop_accepted: bool = False) -> Round:
    drafts = [DraftToken(k=k, token=0, text="a", p_draft=1.0, p_target=None, confidence=0.5, confidence_cal=None,
                         survival=None, status="accepted" if k <= m else "pruned") for k in range(1, gamma + 1)]
    return Round(index=i, anchor=0, anchor_pos=10 + i, drafts=drafts, ell=ell, accepted=m,
                 bonus=None if stop_accepted else 1, bonus_text="", bonus_source="target", stopped=stop_accepted)


def _trace(rounds) -> Trace:
    return Trace(meta={}, prompt_ids=[0], first_token=0, rounds=list(rounds))


# -- E[n | ℓ] --------------------------------------------------------------------------------------
def test_committed_at_counts_the_accepted_prefix_and_the_bonus():
    r = _round(0, m=2)
    assert [sg.committed_at(r, ell) for ell in range(5)] == [1, 2, 3, 3, 3]
    stop = _round(1, m=2, stop_accepted=True)           # the second draft was an accepted stop token
    assert [sg.committed_at(stop, ell) for ell in range(5)] == [1, 2, 2, 2, 2]


def test_expected_committed_reads_full_block_rounds_only():
    ms = [0, 1, 4, 2, 3, 4]
    short = _round(9, m=1, ell=1)                       # a round cut short by the budget: not a full block
    e = sg.expected_committed(_trace([_round(i, m) for i, m in enumerate(ms)] + [short]))
    surv = [np.mean([m >= k for m in ms]) for k in range(1, 5)]
    assert np.allclose(e, 1 + np.concatenate([[0], np.cumsum(surv)]))          # 1 + Σ_{k≤ℓ} a_k
    assert e[0] == 1 and e[-1] == pytest.approx(np.mean([m + 1 for m in ms]))  # ℓ = γ: the rounds' mean n
    with pytest.raises(ValueError, match="full-block"):
        sg.expected_committed(_trace([short]))


# -- gain ----------------------------------------------------------------------------------------------
def test_gain_is_tokens_per_second_over_a_plain_steps():
    e, tp, td, tv = np.array([1.0, 1.5, 1.8]), 0.02, 0.005, np.array([0.02, 0.022, 0.03])
    g = sg.gain(e, tp, td, tv)
    assert np.allclose(g, (e / (td + tv)) / (1 / tp))
    assert sg.best_length(g) == 1 + int(np.argmax(g[1:]))
    times = RoundTimes("measured", td, list(tv), tp)
    assert np.allclose(sg.round_gain(e, times), g) and times.t_round(2) == pytest.approx(td + tv[2])
    with pytest.raises(ValueError, match="verify time"):
        sg.gain(e, tp, td, tv[:2])


def test_break_even_survival_makes_the_gain_one():
    tp, td, tv1 = 0.020, 0.004, 0.021
    a1 = sg.break_even_survival(tp, td, tv1)
    assert sg.gain([1.0, 1 + a1], tp, td, [tp, tv1])[1] == pytest.approx(1.0)
    assert sg.break_even_survival(0.01, 0.01, 0.011) > 1                      # no acceptance rate pays here


def test_best_length_agrees_with_the_hybrid_drafters_rate():
    surv = [0.8, 0.6, 0.4, 0.25, 0.1]
    sps = SPSProfile("toy", [1, 2, 4, 6], [50.0, 45.0, 30.0, 20.0])
    e = 1 + np.concatenate([[0], np.cumsum(surv)])
    times = profile_round_times(sps, gamma=5, draft_share=0.3)
    g = sg.round_gain(e, times)
    ell, rate = best_rate(surv, sps, times.t_draft)
    assert ell == sg.best_length(g) and rate * times.t_plain == pytest.approx(g[ell])


def test_verdict_names_the_direction_and_the_ratio():
    assert "faster" in sg.verdict(1.25) and "×1.25" in sg.verdict(1.25)
    assert "slower" in sg.verdict(0.8) and "×0.80" in sg.verdict(0.8)
    assert "×0.996" in sg.verdict(0.996) and "×1.004" in sg.verdict(1.004)     # no "slower … ×1.00"
    with pytest.raises(ValueError):
        sg.verdict(0.0)


# -- times -------------------------------------------------------------------------------------------
def test_profile_round_times_reads_the_profile():
    p = gpu_like()
    t = profile_round_times(p, gamma=7, draft_share=0.1)
    assert t.source == "synthetic: gpu-like" and t.gamma == 7
    assert t.t_plain == pytest.approx(p.step_time(1)) and t.t_draft == pytest.approx(0.1 * p.step_time(1))
    assert t.t_verify == pytest.approx([p.step_time(ell + 1) for ell in range(8)])
    with pytest.raises(ValueError):
        RoundTimes("x", 0.1, [], 0.1)
    with pytest.raises(ValueError):
        RoundTimes("x", 0.1, [0.1], 0.0)


class _Recording(TableTarget):
    """A toy target that records the width and options of every forward after the prefill."""

    def __init__(self, table):
        super().__init__(table)
        self.calls: list[tuple[int, bool, bool]] = []

    def forward(self, ids, cache, features=False, hidden=False, last_only=False):
        self.calls.append((ids.shape[1], features, last_only))
        return super().forward(ids, cache, features=features, hidden=hidden, last_only=last_only)


class _CountingDrafter(RandomDrafter):
    needs_features = True

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.anchors: list[tuple[int, int]] = []

    def propose(self, state, anchor, anchor_pos, temperature, generator):
        self.anchors.append((anchor, anchor_pos))
        return super().propose(state, anchor, anchor_pos, temperature, generator)


def test_measure_round_times_times_each_part_as_the_loop_runs_it(table4):
    target, drafter = _Recording(table4), _CountingDrafter(4, gamma=3)
    t = measure_round_times(target, drafter, ctx_len=6, repeats=3, warmup=1, text="abcd")
    assert t.source == "measured" and t.gamma == 3 and len(t.t_verify) == 4
    assert all(len(v) == 3 for v in t.samples.values()) and set(t.samples) == {"draft", "plain", *(
        f"verify{ell}" for ell in range(4))}
    assert t.t_draft == pytest.approx(np.median(t.samples["draft"]))
    ids = ("abcd" * 3)[:10]
    assert drafter.anchors == [("abcd".index(ids[6]), 6)] * 4            # the token after the context, at ctx_len
    widths = target.calls[1:]                                             # after the prefill
    assert (1, False, True) in widths                                     # the plain step: no features
    assert {(ell + 1, True, ell == 0) for ell in range(4)} <= set(widths)  # verifies: features, ℓ = 0 last only
    assert len(widths) == 4 * 5
    with pytest.raises(ValueError, match="context"):
        measure_round_times(target, drafter, ctx_len=5000, text="abcd")


# -- charts ------------------------------------------------------------------------------------------
def test_the_two_charts_draw_the_gain_frame():
    from dspark_viz.viz.render import to_png
    from dspark_viz.viz.speed import round_cost_chart, speculation_gain_chart

    cpu = RoundTimes("measured", 0.006, [0.02 + 0.002 * ell for ell in range(5)], 0.02)
    gpu = profile_round_times(gpu_like(), gamma=4, draft_share=0.1)
    acc = {"recorded": np.array([1.0, 1.4, 1.6, 1.7, 1.75]), "other": np.array([1.0, 1.8, 2.5, 3.0, 3.4])}
    df = sg.gain_frame({"CPU": cpu, "GPU-like": gpu}, acc)
    assert len(df) == 2 * 2 * 4 and df.groupby(["machine", "acceptance"]).best.sum().eq(1).all()
    row = df[(df.machine == "CPU") & (df.acceptance == "other") & (df.ell == 3)].iloc[0]
    assert row.gain == pytest.approx(3.0 * 0.02 / (0.006 + 0.026))
    for chart in (round_cost_chart(df), speculation_gain_chart(df)):
        spec = chart.to_dict()
        assert spec["facet"]["column"]["field"] == "machine"
        assert to_png(chart)[:8] == b"\x89PNG\r\n\x1a\n"


def test_measured_times_run_on_a_real_llama_wrapper():
    """The TargetModel wrapper (a tiny random Llama): every part gets a positive median."""
    from dspark_viz.model.toy import tiny_llama_target

    torch.manual_seed(0)
    target = tiny_llama_target()
    t = measure_round_times(target, RandomDrafter(target.vocab_size, gamma=2), ctx_len=8, repeats=2, warmup=1,
                            text="abcdefg")
    assert t.t_plain > 0 and t.t_draft > 0 and all(v > 0 for v in t.t_verify)
    assert t.meta["dtype"] == "float32" and t.meta["gamma"] == 2
