"""Trace bundles (trace_store.py): lossless where it matters, clear errors, and the shipped recordings
are what the course says they are. Also the synthetic paper-scale drafter."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from dspark_viz import metrics
from dspark_viz.datasets.synthetic import PAPER_FIG2, paper_scale_offsets, paper_scale_traces
from dspark_viz.datasets.traces import (FORMAT, bundle_name, compact_diag, load_bundle, load_traces, read_bundle,
                                    recorded_traces, save_bundle)
from dspark_viz.decode import speculative_generate
from dspark_viz.drafters import LookupDrafter, RandomDrafter
from dspark_viz.model.toy import TableTarget
from dspark_viz.scheduler import FixedLength
from dspark_viz.settings import assets
from dspark_viz.trace import Trace

SHIPPED = ("dspark", "dspark-rnn", "dflash", "eagle", "lookup")


@pytest.fixture(scope="module")
def toy_traces():
    t = TableTarget([[0.5, 0.3, 0.2], [0.2, 0.6, 0.2], [0.3, 0.3, 0.4]])
    d = RandomDrafter(3, gamma=4, seed=2)
    out = [speculative_generate(t, d, "ab", policy=FixedLength(4), temperature=1.0, max_new_tokens=24, seed=s,
                                meta={"domain": ("math", "code")[s % 2]}) for s in range(4)]
    out.append(speculative_generate(t, LookupDrafter(4, vocab_size=3), "abcab", temperature=1.0, max_new_tokens=16,
                                    seed=7, meta={"domain": "chat"}))
    return out


def test_round_trip_keeps_outcomes_exactly_and_floats_to_four_digits(toy_traces, tmp_path):
    path = save_bundle(toy_traces, tmp_path / "toy_T1.json.gz", meta={"drafter": "random", "temperature": 1.0})
    meta, back = read_bundle(path)
    assert meta == {"drafter": "random", "temperature": 1.0} and len(back) == len(toy_traces)
    for a, b in zip(toy_traces, back):
        assert b.output_ids == a.output_ids and b.text() == a.text() and b.prompt_ids == a.prompt_ids
        assert b.meta["domain"] == a.meta["domain"] and b.meta["drafter"] == a.meta["drafter"]  # its own wins
        for ra, rb in zip(a.rounds, b.rounds):
            assert (rb.ell, rb.accepted, rb.bonus, rb.bonus_source, rb.source) == \
                   (ra.ell, ra.accepted, ra.bonus, ra.bonus_source, ra.source)
            for da, db in zip(ra.drafts, rb.drafts):
                assert (db.k, db.token, db.text, db.status) == (da.k, da.token, da.text, da.status)
                for f in ("p_draft", "p_target", "confidence", "confidence_cal", "survival"):
                    x, y = getattr(da, f), getattr(db, f)
                    assert (x is None) == (y is None), f
                    if x is not None:
                        assert y == pytest.approx(x, rel=2e-3, abs=1e-12), f
    for fn in (metrics.tau, metrics.survival, metrics.conditional_acceptance):    # counts: exactly equal
        assert fn(back) == fn(toy_traces)


def test_compact_diag_keeps_the_backbone_pick_margin_and_the_heads_top():
    d = {"ids": [5, 9, 2], "U": [1.0, 3.5, 3.0], "B": [3.0, 0.0, 0.0], "chosen": 9}    # ids run by U + B
    assert compact_diag(d) == {"backbone": 9, "margin": 0.5, "head": 5}
    assert compact_diag({"ngram": 3}) == {"ngram": 3}
    assert compact_diag(None) is None and compact_diag({}) is None


def test_bad_bundles_give_clear_errors(toy_traces, tmp_path):
    with pytest.raises(ValueError, match=".json.gz"):
        save_bundle(toy_traces, tmp_path / "x.json")
    with pytest.raises(FileNotFoundError, match="no trace bundle"):
        load_bundle(tmp_path / "missing.json.gz")
    (tmp_path / "junk.json.gz").write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="not a readable trace bundle"):
        load_bundle(tmp_path / "junk.json.gz")
    with gzip.open(tmp_path / "other.json.gz", "wt") as f:
        json.dump({"format": "something else"}, f)
    with pytest.raises(ValueError, match=FORMAT):
        load_bundle(tmp_path / "other.json.gz")
    with pytest.raises(FileNotFoundError):
        load_traces(tmp_path / "nowhere")


def test_load_traces_reads_bundles_single_files_and_folders(toy_traces, tmp_path):
    save_bundle(toy_traces[:3], tmp_path / "a.json.gz")
    toy_traces[3].to_json(str(tmp_path / "b.json"))
    (tmp_path / "broken.json").write_text("{")                  # skipped inside a folder
    got = load_traces(tmp_path)
    assert [t.output_ids for t in got] == [t.output_ids for t in toy_traces[:4]]
    assert len(load_traces(tmp_path / "b.json")) == 1
    with pytest.raises(ValueError):
        load_traces(tmp_path / "broken.json")                    # named explicitly: an error


# -- the shipped recordings ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("T", [0.0, 1.0])
def test_shipped_recordings_cover_every_drafter_and_domain(name, T):
    meta, traces = read_bundle(assets("traces", bundle_name(name, T)))
    assert meta["drafter"] == name and meta["temperature"] == T and meta["command"].startswith("dspark-viz record")
    per = {d: sum(t.meta["domain"] == d for t in traces) for d in ("math", "code", "chat")}
    assert all(n >= 30 for n in per.values()), per
    rounds = [r for t in traces for r in t.rounds]
    for t in traces:              # full block: every drafted slot verified, unless the token budget is shorter
        done = 1                                                    # the prefill token
        for r in t.rounds:
            assert r.ell == min(len(r.drafts), meta["max_new_tokens"] - done - 1)
            done += r.n_committed
    assert all(0 <= r.accepted <= r.ell for r in rounds)
    if name in ("dspark", "dspark-rnn"):
        assert all(d.confidence is not None and d.confidence_cal is not None for r in rounds for d in r.drafts)
        assert len(rounds) >= 2000                              # ≥ 1,000 each to fit STS and to hold out
    assert sum(p.stat().st_size for p in assets("traces").glob("*.json.gz")) < 12 * 2 ** 20


def test_recorded_traces_filters_domains():
    ts = recorded_traces("lookup", 0.0, domains=["code"])
    assert ts and {t.meta["domain"] for t in ts} == {"code"}


# -- synthetic paper-scale drafter ----------------------------------------------------------------------------
def test_paper_scale_offsets_reproduce_the_conditional_curve_exactly_in_expectation():
    curve = PAPER_FIG2["dflash"]["chat"]
    b = paper_scale_offsets(curve, spread=1.2)
    x, w = np.polynomial.hermite_e.hermegauss(48)
    z, w = 1.2 * x, w / w.sum()
    alive = np.ones_like(z)
    for k, target in enumerate(curve):
        c = 1 / (1 + np.exp(-(b[k] + z)))
        assert (w * alive * c).sum() / (w * alive).sum() == pytest.approx(target, abs=1e-9)
        alive = alive * c
    assert np.allclose(paper_scale_offsets(curve, spread=0.0), np.log(np.array(curve) / (1 - np.array(curve))))


def test_paper_scale_traces_follow_the_paper_curves_and_say_they_are_synthetic():
    ts = paper_scale_traces("dspark", n=30, n_rounds=80, seed=1, domains=("math",))
    got = metrics.conditional_acceptance(ts, 7)
    counts = metrics.acceptance_counts(ts, 7)
    for k, (g, want) in enumerate(zip(got, PAPER_FIG2["dspark"]["math"])):
        n = counts["at_risk"][k]
        assert abs(g - want) < 4 * (want * (1 - want) / n) ** 0.5 + 1e-9, (k + 1, g, want, n)
    assert all(t.meta["synthetic"] and "SYNTHETIC" in t.meta["drafter"] for t in ts)
    assert metrics.tau(ts) > 4                                # the paper's regime, not ours
    with pytest.raises(ValueError):
        paper_scale_traces("medusa")
    assert isinstance(ts[0], Trace)


def test_the_apps_model_free_tabs_read_the_recording_out_of_sample():
    from dspark_viz.ui.app.resources import build_calibration, load_recorded

    rec = load_recorded()
    assert not rec.synthetic and len(rec.traces) == 90 and "dspark_T1.json.gz" in rec.note
    assert rec.gamma == 7 and len(rec.conf_rows) == 256
    cal = build_calibration(rec)
    assert "out of sample" in cal.note and len(cal.accepted) >= 1000
