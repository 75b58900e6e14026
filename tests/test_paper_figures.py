"""The paper's numbers (dspark_viz.paper) are transcribed consistently, and the figures that set them beside ours
(viz.paper_compare) and the stage-by-stage round diagram (viz.round_diagram) build valid charts from traces."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from dspark_viz import paper
from dspark_viz.trace import DraftToken, Round, Trace


# -- dspark_viz.paper ------------------------------------------------------------------------------------------
def test_table1_rows_cover_every_benchmark_and_drafter():
    for target, by in paper.TABLE1.items():
        assert set(by) == set(paper.LABELS)
        assert all(len(row) == len(paper.BENCHMARKS) for row in by.values()), target
    rows = paper.table1_rows("Qwen3-4B")
    assert len(rows) == 3 * 9 and {r["domain"] for r in rows} == set(paper.DOMAINS)
    with pytest.raises(ValueError):
        paper.table1_rows("Qwen3-1B")


def test_table1_reproduces_the_numbers_its_text_quotes():
    """§4.2 quotes DSpark's domain means and the macro-average gains: the transcribed table gives them back."""
    for target, by in paper.TEXT_DOMAIN_TAU.items():
        means = paper.domain_means(target)
        for drafter, doms in by.items():
            for dom, v in doms.items():
                assert round(means[drafter][dom], 2) == v, (target, drafter, dom)
    for target, gains in paper.TEXT_MACRO_GAIN.items():
        for over, v in gains.items():
            assert round(paper.macro_gain(target, over), 3) == pytest.approx(v, abs=1e-9), (target, over)


def test_fig2_text_values_sit_on_the_curves_read_off_the_figure():
    for r in paper.FIG2_TEXT:
        curve = paper.FIG2_READ[r["drafter"]][r["domain"]]
        if r["k"] is not None:
            assert abs(curve[r["k"] - 1] - r["value"]) <= 0.03, r
        else:                                  # a value stated without a position lies within the curve's range
            assert min(curve) - 0.02 <= r["value"] <= max(curve) + 0.02, r
    placed = {(r["drafter"], r["domain"], r["value"]): r["k_placed"] for r in paper.fig2_text_rows()}
    assert placed[("dflash", "chat", 0.63)] == 3 and placed[("dflash", "code", 0.78)] == 7   # the curves' low points
    assert placed[("dflash", "math", 0.88)] == 1                                             # a stated position stays
    rows = paper.fig2_read_rows()
    assert len(rows) == 3 * 3 * 7 and all(r["kind"] == "read off Fig. 2" for r in rows)
    assert all(r["kind"] == "text" for r in paper.fig2_text_rows())


def test_the_synthetic_paper_scale_drafter_gives_back_the_papers_text_values():
    """Checked against the paper's text (§4.3.1), not against the reading the generator starts from: the
    conditional acceptance measured on the generated rounds at each position the text names lies within 0.03 of
    the text's value and inside its 99 % Wilson interval widened by the figure reading's ±0.03."""
    from dspark_viz import metrics
    from dspark_viz.datasets.synthetic import paper_scale_traces

    stated = [r for r in paper.FIG2_TEXT if r["k"] is not None]
    assert len(stated) >= 6
    for r in stated:
        traces = paper_scale_traces(r["drafter"], n=40, n_rounds=60, seed=1, domains=(r["domain"],))
        counts = metrics.acceptance_counts(traces)
        ok, n = counts["accepted"][r["k"] - 1], counts["at_risk"][r["k"] - 1]
        lo, hi = metrics.wilson_interval(ok, n, z=2.576)
        assert n >= 1000 and lo - 0.03 <= r["value"] <= hi + 0.03, (r, ok / n, (lo, hi))


def test_paper_is_pure_data():
    src = Path(paper.__file__).read_text(encoding="utf-8")
    imported = {n.module or "" for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__"}, imported


# -- charts ----------------------------------------------------------------------------------------------------
alt = pytest.importorskip("altair")
from dspark_viz import viz  # noqa: E402


def _round(index, anchor, statuses, bonus, ell=None, backbone=None):
    drafts = []
    for k, st in enumerate(statuses, start=1):
        verified = st in ("accepted", "rejected")
        drafts.append(DraftToken(k=k, token=100 + k, text=f"w{k}", p_draft=0.5,
                                 p_target=(0.6 if st == "accepted" else 0.1) if verified else None,
                                 confidence=0.9 - 0.1 * k, confidence_cal=0.8 - 0.1 * k, survival=None, status=st,
                                 diag={"backbone": (backbone or {}).get(k, 100 + k), "margin": 1.0}))
    a = 1.0
    for d in drafts:
        a *= d.confidence_cal
        d.survival = a
    m = sum(s == "accepted" for s in statuses)
    return Round(index=index, anchor=anchor, anchor_pos=5 + index, drafts=drafts, ell=ell or len(statuses),
                 accepted=m, bonus=bonus, bonus_text=f"b{bonus}", bonus_source="residual", source="neural")


def _trace(domain="math", rounds=None):
    rounds = rounds or [_round(0, 7, ["accepted", "rejected", "not_reached", "not_reached"], 9),
                        _round(1, 9, ["accepted", "accepted", "rejected", "not_reached"], 11, backbone={2: 55})]
    return Trace(meta=dict(drafter="dspark", domain=domain, gamma=4), prompt_ids=[1, 2], first_token=7,
                 first_text="start", rounds=rounds)


def test_round_diagram_frame_walks_the_stages():
    t = _trace()
    df = viz.round_diagram_frame(t, 1, texts={55: "five"})
    assert list(dict.fromkeys(df.stage_i)) == [0, 1, 2, 3, 4, 5, 6]
    assert df[df.stage_i == 0].text.tolist() == ["b9"]                       # the anchor is round 0's bonus
    assert df[df.stage_i == 1].text.tolist() == ["w1", "five", "w3", "w4"]    # the backbone's own picks
    assert df[(df.stage_i == 2)].kind.tolist() == ["head kept the pick", "head changed the pick",
                                                  "head kept the pick", "head kept the pick"]
    verdicts = df[df.stage_i == 5]
    assert verdicts.kind.tolist() == ["accepted", "accepted", "rejected", "not reached", "bonus"]
    assert df[df.stage_i == 6].text.tolist() == ["w1", "w2", "b11"]           # m accepted + the bonus
    assert (df.ell == 4).all() and (df.m == 2).all()
    assert viz.round_diagram.__module__.endswith("round_diagram")
    from dspark_viz.viz.round_diagram import context_text
    assert context_text(t, 1) == "startw1b9"


def test_round_diagram_credits_the_head_only_where_it_moved_the_top_token():
    """Sampled (T > 0), a draft can leave the backbone's pick by the draw alone: the head is credited only where
    argmax(U + B) ≠ argmax U (the recorded ``head``); without it a sampled round says it cannot tell."""
    from dspark_viz.viz.round_diagram import head_kind
    assert head_kind(5, None, 7, 0.0)[0] == "head changed the pick"          # greedy: x_k is argmax(U + B)
    assert head_kind(5, None, 5, 0.0)[0] == "head kept the pick"
    assert head_kind(5, None, 7, 1.0)[0] == "sampled off the pick"           # sampled, no head's top recorded
    assert head_kind(5, 5, 7, 1.0)[0] == "sampled off the pick"              # B left the pick on top, the draw moved
    assert head_kind(5, 7, 7, 1.0)[0] == "head changed the pick"
    assert head_kind(5, 7, 9, 1.0)[0] == "head changed the pick" and "draw" in head_kind(5, 7, 9, 1.0)[1]
    t = _trace()
    t.meta["temperature"] = 1.0
    kinds = viz.round_diagram_frame(t, 1)
    assert kinds[kinds.stage_i == 2].kind.tolist() == ["head kept the pick", "sampled off the pick",
                                                      "head kept the pick", "head kept the pick"]


def test_round_diagram_shows_a_shorter_schedule_only_where_the_recording_tells():
    t = _trace()
    df = viz.round_diagram_frame(t, 1, ell=3)                                 # m = 2 < 3: the same round
    assert df[df.stage_i == 4].kind.tolist() == ["kept", "kept", "kept", "dropped"]
    assert df[df.stage_i == 5].kind.tolist() == ["accepted", "accepted", "rejected", "bonus"]
    assert (df.ell == 3).all()
    from dspark_viz.viz.round_diagram import scheduled_statuses
    with pytest.raises(ValueError, match="bonus would be drawn"):
        scheduled_statuses(t.rounds[1], 2)                                    # ℓ ≤ m: the bonus is unknown
    with pytest.raises(ValueError, match="fewer verified drafts"):
        scheduled_statuses(t.rounds[1], 5)
    with pytest.raises(ValueError, match="drafted nothing"):
        viz.round_diagram_frame(_trace(rounds=[Round(0, 7, 5, [], 0, 0, 8, "b8", "target")]), 0)


def test_round_diagram_chart_is_a_valid_offline_spec():
    spec = viz.round_diagram(_trace(), 1, ell=3).to_dict()
    text = json.dumps(spec, ensure_ascii=False)
    assert '"url"' not in text and "paper Fig. 1" in text
    assert "context: startw1b9" in text


def test_table1_compare_puts_the_papers_rows_beside_ours():
    ours = {"dspark": [_trace("math"), _trace("chat")], "dflash": [_trace("math")]}
    f = viz.table1_compare_frame(ours)
    p = f[f.source == "paper: Qwen3-4B"]
    assert set(p.drafter) == {"dspark", "dflash", "eagle"}                   # the paper's names in our colours
    assert p[(p.name == "DSpark") & (p.domain == "chat")].tau.iloc[0] == pytest.approx(3.49, abs=0.005)
    o = f[f.source == "ours"]
    assert o[(o.drafter == "dspark") & (o.domain == "all")].tau.iloc[0] == pytest.approx(5 / 2)
    spec = viz.table1_compare_chart(f).to_dict()
    assert '"url"' not in json.dumps(spec) and len(spec["hconcat"]) == 2


def test_fig2_compare_leaves_out_positions_with_too_few_rounds():
    ours = {"dspark": [_trace("math")] * 20}
    f = viz.fig2_compare_frame(ours, gamma=4, min_n=30)
    o = f[f.source == "ours"]
    assert o.k.tolist() == [1, 2]                       # 40 rounds at risk at k = 1 and k = 2, 20 at k = 3: dropped
    assert o.n.tolist() == [40, 40] and (o.lo <= o.value).all() and (o.value <= o.hi).all()
    assert set(f.source) == {"ours", "paper, text value", "paper, ≈ read off Fig. 2"}
    text = f[f.source == "paper, text value"]
    assert text.k.isna().sum() == 3 and text.k_drawn.notna().all()
    spec = viz.fig2_compare_chart(f).to_dict()
    assert '"url"' not in json.dumps(spec)


def test_figs34_draft_lengths_count_the_anchor():
    from dspark_viz.paper import figs34

    s = figs34.FIG4_SETUP
    assert tuple(g + 1 for g in s["gammas"]) == s["draft_lengths"]
    assert set(figs34.FIG4_GAIN_PRINTED) == {"math", "code", "chat"}
    for gains in figs34.FIG4_GAIN_PRINTED.values():            # the gap widens with the draft length (§4.3.2)
        assert list(gains) == [8, 12, 16] and list(gains.values()) == sorted(gains.values())
    assert figs34.FIG3_SETUP["gamma"] == 7 == s["gammas"][1]
