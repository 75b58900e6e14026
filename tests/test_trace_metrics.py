"""Trace JSON round trip, the tidy frame, and the metrics checked by hand on a small hand-built trace."""
from __future__ import annotations

import json
import math

import pytest

from dspark_viz import metrics
from dspark_viz.decode import speculative_generate
from dspark_viz.drafters import LookupDrafter, RandomDrafter
from dspark_viz.scheduler import HardwareAware
from dspark_viz.trace import DraftToken, Round, Trace


def _d(k, tok, status, p_t=0.5, conf=None):
    return DraftToken(k=k, token=tok, text=f"t{tok}", p_draft=0.5, p_target=None if status == "pruned" else p_t,
                      confidence=conf, confidence_cal=None, survival=None, status=status)


def hand_trace() -> Trace:
    """γ = 3. Rounds (ℓ, m, committed): (3, 3, 4) · (2, 1, 2) · (3, 0, 1) · a round with no drafts (0, 0, 1)."""
    A, R, N, P = "accepted", "rejected", "not_reached", "pruned"
    rounds = [
        Round(0, anchor=1, anchor_pos=5, drafts=[_d(1, 3, A), _d(2, 4, A), _d(3, 5, A)], ell=3, accepted=3,
              bonus=10, bonus_text="t10", bonus_source="target", source="lookup",
              t_draft=0.1, t_schedule=0.0, t_verify=0.4, t_other=0.05),
        Round(1, anchor=10, anchor_pos=9, drafts=[_d(1, 6, A), _d(2, 7, R), _d(3, 8, P)], ell=2, accepted=1,
              bonus=11, bonus_text="t11", bonus_source="residual", source="lookup",
              t_draft=0.1, t_schedule=0.1, t_verify=0.4, t_other=0.05),
        Round(2, anchor=11, anchor_pos=11, drafts=[_d(1, 9, R), _d(2, 9, N), _d(3, 9, N)], ell=3, accepted=0,
              bonus=12, bonus_text="t12", bonus_source="residual", source="lookup",
              t_draft=0.1, t_schedule=0.0, t_verify=0.4, t_other=0.05),
        Round(3, anchor=12, anchor_pos=12, drafts=[], ell=0, accepted=0, bonus=2, bonus_text="<eos>",
              bonus_source="target", source="none", t_draft=0.0, t_schedule=0.0, t_verify=0.3, t_other=0.05,
              stopped=True),
    ]
    return Trace(meta={"drafter": "lookup", "policy": "fixed-3", "domain": "math"}, prompt_ids=[0, 1, 2, 1, 7],
                 first_token=1, first_text="t1", rounds=rounds, t_prefill=0.5, t_total=3.0)


# -- metrics by hand -------------------------------------------------------------------------------------
def test_metrics_by_hand():
    tr = hand_trace()
    assert tr.output_ids == [1, 3, 4, 5, 10, 6, 11, 12, 2]
    assert tr.n_generated == 9
    assert tr.text() == "t1t3t4t5t10t6t11t12<eos>"
    assert [r.n_committed for r in tr.rounds] == [4, 2, 1, 1]
    assert metrics.tau(tr) == 2.0                                         # 8 committed / 4 rounds
    assert metrics.survival(tr) == pytest.approx([2 / 3, 1 / 3, 1 / 3])   # rounds with drafts only
    # k=1: 2 of 3 survive; k=2: at risk r0, r1 (m ≥ 1, ℓ ≥ 2) → 1 of 2; k=3: at risk r0 → 1 of 1
    assert metrics.conditional_acceptance(tr) == pytest.approx([2 / 3, 1 / 2, 1.0])
    assert metrics.tokens_per_second(tr) == 3.0                           # 9 tokens / 3 s
    split = metrics.time_split(tr)
    assert split == pytest.approx({"draft": 0.3 / 3, "verify": (0.5 + 1.5) / 3, "schedule": 0.1 / 3,
                                   "other": 1 - 2.4 / 3})
    assert metrics.tau([tr, tr]) == 2.0 and metrics.tokens_per_second([tr, tr]) == 3.0
    assert metrics.per_domain([tr]) == {"math": {"tau": 2.0, "rounds": 4, "requests": 1}}
    s = metrics.summary(tr)
    assert s["tau"] == 2.0 and s["rounds"] == 4


def test_metrics_on_empty_input():
    empty = Trace(meta={}, prompt_ids=[1], first_token=2)
    assert math.isnan(metrics.tau(empty)) and metrics.survival(empty) == []
    assert math.isnan(metrics.tokens_per_second(empty))
    assert metrics.time_split(empty) == {"draft": 0.0, "verify": 0.0, "schedule": 0.0, "other": 0.0}


# -- frame and JSON ----------------------------------------------------------------------------------------
def test_to_frame_columns_and_rows():
    df = hand_trace().to_frame()
    assert list(df.columns) == list(Trace.FRAME_COLUMNS)
    assert len(df) == 9                                                    # 3 drafted slots × 3 rounds
    assert df.status.tolist() == ["accepted"] * 4 + ["rejected", "pruned", "rejected", "not_reached", "not_reached"]
    assert set(df.domain) == {"math"} and set(df.drafter) == {"lookup"} and set(df.policy) == {"fixed-3"}
    assert df[df.status == "pruned"].p_target.isna().all()
    empty = Trace(meta={}, prompt_ids=[1], first_token=2).to_frame()
    assert list(empty.columns) == list(Trace.FRAME_COLUMNS) and len(empty) == 0


def _decoded_traces(table_target):
    V = table_target.vocab_size
    yield speculative_generate(table_target, RandomDrafter(V, gamma=3, seed=2), prompt_ids=[0, 1, 2],
                               policy=HardwareAware(), temperature=1.0, max_new_tokens=24, seed=5,
                               meta={"domain": "chat"})
    yield speculative_generate(table_target, LookupDrafter(gamma=4, vocab_size=V), prompt_ids=[0, 1, 0, 1, 0],
                               temperature=0.7, max_new_tokens=24, seed=1)
    yield hand_trace()


def same(a, b) -> bool:
    """Exact structural equality, same types, NaN equal to NaN (a schedule may record Θ = nan)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def test_json_round_trip_is_exact(table_target, tmp_path):
    for i, tr in enumerate(_decoded_traces(table_target)):
        s = tr.to_json()
        back = Trace.from_json(s)
        assert same(back.to_dict(), tr.to_dict())
        assert back.output_ids == tr.output_ids and back.text() == tr.text()
        path = tmp_path / f"trace{i}.json"
        tr.to_json(str(path), indent=1)
        assert same(Trace.from_json(str(path)).to_dict(), tr.to_dict())
        assert json.loads(path.read_text(encoding="utf-8"))["prompt_ids"] == tr.prompt_ids
    tr = next(_decoded_traces(table_target))
    assert any(r.schedule for r in tr.rounds) and any(d.confidence is not None for r in tr.rounds for d in r.drafts)


def test_compact_json_rounds_floats_only(table_target):
    """``digits`` rounds floats (shipped traces) and keeps ids, text and structure exactly."""
    tr = next(_decoded_traces(table_target))
    back = Trace.from_json(tr.to_json(digits=4))
    assert back.output_ids == tr.output_ids and back.text() == tr.text()
    a = [d for r in tr.rounds for d in r.drafts]
    b = [d for r in back.rounds for d in r.drafts]
    assert [d.token for d in a] == [d.token for d in b] and [d.status for d in a] == [d.status for d in b]
    pairs = [(u, v) for x, y in zip(a, b) for u, v in ((x.p_target, y.p_target), (x.p_draft, y.p_draft))
             if u is not None]
    assert pairs and all(math.isclose(u, v, rel_tol=1e-3) for u, v in pairs)
    assert len(tr.to_json(digits=4)) < len(tr.to_json())
