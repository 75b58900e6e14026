"""dspark_viz.viz: every figure is a valid, offline Vega-Lite spec with the expected fields; the token strip
escapes model text."""
from __future__ import annotations

import copy
import json
import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("altair")

from dspark_viz import calibration as cal
from dspark_viz import metrics, viz
from dspark_viz.cost import gpu_like, jagged
from dspark_viz.scheduler import HardwareAware, StaticThreshold
from dspark_viz.serving.simulate import sweep, threshold_sweep
from dspark_viz.trace import DraftToken, Round, Trace


# -- helpers -----------------------------------------------------------------------------------------
def encodings(spec) -> dict[str, set[str]]:
    """channel → set of fields used anywhere in the spec (layers, concats, facets)."""
    out: dict[str, set[str]] = {}
    for node in dict_nodes(spec):
        enc = node.get("encoding")
        if isinstance(enc, dict):
            for ch, v in enc.items():
                if isinstance(v, dict) and "field" in v:
                    out.setdefault(ch, set()).add(v["field"])
    return out


def dict_nodes(x):
    """Every dict inside a Vega-Lite spec, depth first."""
    if isinstance(x, dict):
        yield x
        for v in x.values():
            yield from dict_nodes(v)
    elif isinstance(x, list):
        for v in x:
            yield from dict_nodes(v)


def marks(spec) -> set[str]:
    found = set()
    for node in dict_nodes(spec):
        m = node.get("mark")
        if m is not None:
            found.add(m if isinstance(m, str) else m.get("type"))
    return found


def rows(spec) -> list[dict]:
    """All inline data rows of a spec."""
    out = [r for ds in spec.get("datasets", {}).values() for r in ds]

    def walk(x):
        if isinstance(x, dict):
            if isinstance(x.get("data"), dict) and "values" in x["data"]:
                out.extend(x["data"]["values"])
            for k, v in x.items():
                if k != "datasets":
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(spec)
    return out


def check(chart, **expected) -> dict:
    """chart.to_dict() validates; it is offline (no data URL); channels carry the expected fields."""
    spec = chart.to_dict()
    text = json.dumps(spec, ensure_ascii=False)
    assert '"url"' not in text, "charts must carry their data inline"
    assert not re.search(r"https?://(?!vega\.github\.io/schema)", text)
    enc = encodings(spec)
    for ch, fields in expected.items():
        fields = {fields} if isinstance(fields, str) else set(fields)
        assert fields <= enc.get(ch, set()), f"{ch}: expected {fields}, have {enc.get(ch)}"
    return spec


# -- hand-made traces -------------------------------------------------------------------------------------
def tok(k, text, status, conf=0.8, cal_=None, surv=None, p_t=0.5, diag=None):
    return DraftToken(k=k, token=100 + k, text=text, p_draft=0.6, p_target=p_t if status != "pruned" else None,
                      confidence=conf, confidence_cal=cal_, survival=surv, status=status, diag=diag)


@pytest.fixture
def trace():
    diag = {"tokens": [" a", " b", "\n"], "ids": [1, 2, 3], "U": [2.0, 1.0, 0.5], "B": [0.1, 0.9, -0.2]}
    r0 = Round(index=0, anchor=5, anchor_pos=10, ell=3, accepted=1, bonus=7, bonus_text="<b>",
               bonus_source="residual", source="neural", drafts=[
                   tok(1, "Hello", "accepted", 0.9, surv=0.9, diag=diag),
                   tok(2, "<script>", "rejected", 0.7, surv=0.63),
                   tok(3, "line\nbreak", "not_reached", 0.6, surv=0.38),
                   tok(4, "  two spaces", "pruned", 0.5, surv=0.19)])
    r1 = Round(index=1, anchor=7, anchor_pos=12, ell=4, accepted=4, bonus=8, bonus_text=" & more",
               bonus_source="target", source="neural", drafts=[
                   tok(k, f" w{k}", "accepted", 0.8, cal_=0.7, surv=0.7 ** k) for k in range(1, 5)],
               schedule={"lengths": [4, 2], "stop_at": 6, "path": [
                   dict(r=r, j=j, a=0.9 ** (j + r), B=2 + i + 1, tau=2 + 0.5 * i, theta=100 + i - (i > 5) * 3 * i,
                        admitted=i < 6) for i, (r, j) in enumerate([(0, 1), (1, 1), (0, 2), (1, 2), (0, 3),
                                                                     (0, 4), (1, 3), (1, 4)])]})
    r2 = Round(index=2, anchor=8, anchor_pos=18, ell=2, accepted=2, bonus=None, bonus_text="",
               bonus_source="none", source="lookup", stopped=True, drafts=[
                   tok(1, "x", "accepted", None), tok(2, "<|im_end|>", "accepted", None)])
    return Trace(meta={"drafter": "hand", "domain": "chat", "policy": "threshold"}, prompt_ids=[1, 2, 3],
                 first_token=4, first_text="Hi", rounds=[r0, r1, r2])


@pytest.fixture
def plain_round_trace(trace):
    trace = copy.deepcopy(trace)
    trace.rounds.append(Round(index=3, anchor=9, anchor_pos=21, drafts=[], ell=0, accepted=0, bonus=11,
                              bonus_text="!", bonus_source="target"))
    return trace


@pytest.fixture(scope="module")
def real_traces():
    """Real decodes on the exact toy target: RandomDrafter (with a confidence head) and lookup."""
    from dspark_viz.decode import speculative_generate
    from dspark_viz.drafters import LookupDrafter, RandomDrafter
    from dspark_viz.scheduler import FixedLength
    from dspark_viz.model.toy import TableTarget

    t = TableTarget([[0.5, 0.3, 0.2], [0.2, 0.6, 0.2], [0.3, 0.3, 0.4]])
    d = RandomDrafter(3, gamma=5, seed=1)
    doms = ("math", "code", "chat")
    full = [speculative_generate(t, d, "ab", policy=FixedLength(5), temperature=1.0, max_new_tokens=30, seed=s,
                                 meta={"domain": doms[s % 3]}) for s in range(6)]
    hw = speculative_generate(t, d, "ab", policy=HardwareAware(), temperature=1.0, max_new_tokens=30, seed=9,
                              sps=gpu_like())
    thr = speculative_generate(t, d, "ab", policy=StaticThreshold(0.3), temperature=1.0, max_new_tokens=30,
                               seed=3)
    look = [speculative_generate(t, LookupDrafter(5, vocab_size=3), "abcab", temperature=1.0, max_new_tokens=20,
                                 seed=s, meta={"domain": doms[s % 3]}) for s in range(3)]
    return {"full": full, "hw": hw, "thr": thr, "lookup": look}


# -- tokens ---------------------------------------------------------------------------------------------
def test_token_strip_html_escapes_and_marks_statuses(trace):
    s = viz.token_strip_html(trace)
    assert "&lt;script&gt;" in s and "<script>" not in s
    assert "&lt;b&gt;" in s and "&lt;|im_end|&gt;" in s
    assert "&amp; more" in s
    assert "line↵<br>break" in s                                  # newline shown and kept as a break
    assert "  two spaces" in s and "white-space:pre-wrap" in s     # spaces preserved
    for status in ("accepted", "rejected", "not_reached", "pruned", "bonus", "prefill"):
        assert f"dsv-{status}" in s
    assert s.count('class="dsv-sep"') == len(trace.rounds)
    assert "p_draft = 0.600" in s and "p_target" in s and "confidence c_k" in s and "survival a_k" in s
    assert "line-through" in s and "dashed" in s and "dotted" in s and "double" in s   # shape, not only colour
    assert "<link" not in s and "src=" not in s and "http" not in s                    # self-contained


def test_token_strip_html_options(trace):
    s = viz.token_strip_html(trace, show_pruned=False, legend=False)
    assert "dsv-pruned" not in s and "two spaces" not in s and "dsv-legend" not in s
    last = viz.token_strip_html(trace, max_rounds=1)
    assert "2 earlier rounds" in last and "w1" not in last and "&lt;|im_end|&gt;" in last


def test_token_strip_html_attribute_escaping():
    r = Round(index=0, anchor=1, anchor_pos=1, ell=1, accepted=1, bonus=2, bonus_text='"quoted"',
              bonus_source="target", drafts=[tok(1, "a\"onmouseover=\"x", "accepted")])
    s = viz.token_strip_html(Trace(meta={}, prompt_ids=[1], first_token=1, first_text="", rounds=[r]))
    assert 'onmouseover="x' not in s and "&quot;" in s


def test_token_strip_chart(trace, plain_round_trace):
    spec = check(viz.token_strip_chart(trace), x="slot", y="round", color="label", strokeDash="label",
                 text="text")
    data = rows(spec)
    assert {"bar", "text"} <= marks(spec)
    assert sum(r["slot"] == "bonus" for r in data) == 2                      # round 2 ended on a stop
    assert {r["status"] for r in data} == {"accepted", "rejected", "not_reached", "pruned", "bonus"}
    assert not any(r["status"] == "pruned" for r in rows(viz.token_strip_chart(trace, show_pruned=False).to_dict()))
    check(viz.token_strip_chart(plain_round_trace))


# -- rounds ---------------------------------------------------------------------------------------------
def test_round_view(trace, plain_round_trace):
    spec = check(viz.round_view(trace, 0), y={"c_used", "value"}, color="label", strokeDash={"label", "series"},
                 text={"text", "label"})
    assert {"bar", "line", "rule", "text", "rect"} <= marks(spec)
    labels = {r.get("label") for r in rows(spec)}
    assert "ℓ = 3: verified up to here" in labels and "m = 1 accepted" in labels
    spec1 = check(viz.round_view(trace, 1))                                      # calibrated: raw ticks + 2 lines
    assert "tick" in marks(spec1)
    assert {"a_k prefix survival (calibrated)", "a_k raw (before STS)"} <= {r.get("series") for r in rows(spec1)}
    spec2 = check(viz.round_view(trace, 2), y="p_target")                       # no confidence head
    assert "no confidence head" in json.dumps(spec2)
    check(viz.round_view(plain_round_trace, -1))                                # nothing drafted
    with pytest.raises(IndexError):
        viz.round_view(trace, 7)


def test_round_frame_uses_scheduler_survival(trace):
    df = viz.round_frame(trace, 0)
    assert list(df.k) == [1, 2, 3, 4]
    np.testing.assert_allclose(df.survival_raw, np.cumprod([0.9, 0.7, 0.6, 0.5]))


# -- acceptance -----------------------------------------------------------------------------------------
def test_acceptance_frame_matches_metrics(real_traces):
    by = {"random": real_traces["full"], "lookup": real_traces["lookup"]}
    df = viz.acceptance_frame(by)
    assert list(df.columns) == ["drafter", "k", "metric", "value", "n", "lo", "hi"]
    got = df[(df.drafter == "random") & df.metric.str.startswith("prefix")].value.tolist()
    np.testing.assert_allclose(got, metrics.survival(real_traces["full"]))
    got = df[(df.drafter == "random") & df.metric.str.startswith("conditional")].value.tolist()
    np.testing.assert_allclose(got, metrics.conditional_acceptance(real_traces["full"]))
    spec = check(viz.acceptance_chart(by), x="k", y="value", color="drafter")
    assert spec["facet"]["column"]["field"] == "metric"
    check(viz.acceptance_chart(df))                                             # the tidy frame works too
    # every point carries its sample size and a 95 % interval around it
    cond = df[(df.drafter == "random") & df.metric.str.startswith("conditional")].dropna(subset=["value"])
    counts = metrics.acceptance_counts(real_traces["full"])
    assert cond.n.tolist() == [n for n in counts["at_risk"] if n > 0]
    assert ((cond.lo <= cond.value + 1e-12) & (cond.value <= cond.hi + 1e-12)).all()


def test_wilson_interval():
    lo, hi = metrics.wilson_interval(30, 100)
    assert lo == pytest.approx(0.2189, abs=1e-4) and hi == pytest.approx(0.3958, abs=1e-4)   # textbook values
    assert metrics.wilson_interval(0, 10)[0] == 0.0 and metrics.wilson_interval(10, 10)[1] == 1.0
    assert all(np.isnan(metrics.wilson_interval(0, 0)))


def test_tau_table(real_traces):
    by = {"random": real_traces["full"], "lookup": real_traces["lookup"]}
    df = viz.tau_frame(by)
    assert set(df.domain) == {"math", "code", "chat", "all"}
    assert df[(df.drafter == "random") & (df.domain == "all")].tau.item() == pytest.approx(
        metrics.tau(real_traces["full"]))
    check(viz.tau_table_chart(df), x="domain", xOffset="drafter", y="tau", color="drafter")
    check(viz.tau_table_chart(by))


# -- logits ---------------------------------------------------------------------------------------------
def test_logit_decomposition(trace):
    diag = dict(trace.rounds[0].drafts[0].diag, chosen=" b")
    spec = check(viz.logit_decomposition(diag), x="value", y="token")
    data = rows(spec)
    assert {r["component"] for r in data} == set(viz.logits.COMPONENTS)
    final = {r["token"]: r["value"] for r in data if r["component"].startswith("U_k + B_k")}
    assert final["␣b"] == pytest.approx(1.9) and final["↵"] == pytest.approx(0.3)
    assert [r["token"] for r in data if r["chosen"]][0] == "␣b"
    assert "← sampled" in json.dumps(spec, ensure_ascii=False)
    zero = viz.logit_decomposition({"tokens": [5, 6], "U": [1.0, 0.0], "B": [0.0, 0.0]})    # DFlash-style
    check(zero)
    with pytest.raises(ValueError):
        viz.logit_decomposition({"tokens": ["a"], "U": [1.0, 2.0], "B": [0.0, 0.0]})


# -- calibration ------------------------------------------------------------------------------------------
def test_reliability(real_traces):
    conf, acc, ell = cal.rollouts_from_traces(real_traces["full"])
    calib = cal.fit_sts(conf, acc, ell)
    df = viz.reliability_frame(conf, acc, ell, calib, n_bins=5)
    assert set(df.stage) == {"before STS", "after STS"} and set(df.position) == set(range(1, conf.shape[1] + 1))
    for k in (1, 3):                                                            # = calibration.reliability_bins
        mask = ell >= k
        want = cal.reliability_bins(np.cumprod(conf, axis=1)[mask, k - 1], (acc >= k)[mask], 5)
        got = df[(df.position == k) & (df.stage == "before STS")]
        np.testing.assert_array_equal(got["count"].to_numpy(), want["count"].to_numpy())
    report = cal.calibration_report(conf, acc, ell, calib)
    spec = check(viz.reliability_diagram(df, positions=[1, 2], report=report),
                 x={"mean_pred", "x"}, y={"mean_obs", "y"}, color="stage", size="count")
    assert len(spec["hconcat"]) == 2 and "ECE" in spec["hconcat"][0]["title"]
    hist = spec["hconcat"][0]["vconcat"][1]                                     # the diagram over its count histogram
    assert hist["encoding"]["y"]["field"] == "count" and hist["mark"]["type"] == "bar"
    before, after = df[df.stage == "before STS"].drop(columns="stage"), df[df.stage == "after STS"].drop(columns="stage")
    spec = check(viz.reliability_diagram(before, after))                        # two frames, no stage column
    assert {r.get("stage") for r in rows(spec)} - {None} == {"before STS", "after STS"}
    assert len(spec["hconcat"]) == conf.shape[1]


def test_threshold_sweep_chart(real_traces):
    df = threshold_sweep(real_traces["full"], thetas=(0.0, 0.3, 0.6))
    spec = check(viz.threshold_sweep_chart(df), x="theta", y="tokens", color="outcome")
    assert [p["title"]["text"].split(" (")[0] for p in spec["hconcat"]] == ["math", "code", "chat", "all"]
    areas, rate = spec["hconcat"][0]["layer"]
    assert areas["transform"][0]["fold"] == ["accepted_per_round", "rejected_per_round"]
    assert rate["encoding"]["y"]["field"] == "accept_rate"                 # the acceptance-rate line (Fig. 5)


# -- serving ---------------------------------------------------------------------------------------------
def test_sps_chart():
    spec = check(viz.sps_chart([gpu_like(), jagged()]), x="B", y="sps", color="profile")
    data = rows(spec)
    assert len(data) < 1200                                                     # aggregated, not every B
    j = {r["B"]: r["sps"] for r in data if r["profile"] == "jagged"}
    assert j[17] == pytest.approx(jagged()(17)) and j[24] == pytest.approx(j[17])  # a staircase corner kept
    check(viz.sps_chart(gpu_like()))


def test_admission_path_and_lengths():
    rng = np.random.default_rng(0)
    conf = [list(rng.beta(8, 2, size=7)) for _ in range(8)]
    s = HardwareAware().choose(conf, gpu_like())
    assert s.stop_at is not None
    spec = check(viz.admission_path_chart(s), x={"step", "s0"}, y={"theta", "a"}, color="state")
    data = rows(spec)
    stops = [r for r in data if r.get("is_stop")]
    assert len(stops) == 1 and stops[0]["step"] == s.stop_at + 1 and not stops[0]["admitted"]
    assert sum(r["admitted"] for r in data if "admitted" in r) == s.info["admitted"]
    assert "stop: Θ did not improve" in json.dumps(spec, ensure_ascii=False)
    spec = check(viz.chosen_lengths_chart(s, gamma=7), x="r", y="ell")
    assert [r["ell"] for r in rows(spec)] == s.lengths
    short = viz.admission_path_chart(s, max_candidates=10)
    assert len({r["step"] for r in rows(short.to_dict()) if "step" in r}) == 10
    check(viz.admission_path_chart(StaticThreshold(0.5).choose(conf)))          # no path: a message chart


def test_admission_path_from_round_schedule(trace, real_traces):
    check(viz.admission_path_chart(trace.rounds[1].schedule))
    check(viz.chosen_lengths_chart(trace.rounds[1].schedule))
    hw = real_traces["hw"]
    check(viz.admission_path_chart(hw.rounds[0].schedule), y="theta")


@pytest.fixture
def sweep_df():
    rs = [1, 4, 16, 64]
    rows_ = []
    for p, base, budget in (("fixed-1", 1.6, 1.0), ("fixed-5", 2.5, 5.0), ("hardware-aware", 2.8, 3.0)):
        for R in rs:
            thr = base * R * 100 / (1 + budget * R / 64)
            rows_.append(dict(policy=p, R=R, throughput=thr, per_user=thr / R,
                              mean_budget=budget if p.startswith("fixed") else budget * 16 / (16 + R),
                              tau=base, mean_batch=R * (1 + budget)))
    return pd.DataFrame(rows_)


def test_frontier_and_budget(sweep_df):
    spec = check(viz.frontier_chart(sweep_df), x="per_user", y="throughput", color="policy", order="R")
    assert any(r.get("policy") == "hardware-aware" for r in rows(spec))
    spec = check(viz.budget_chart(sweep_df), x="R", y="mean_budget", color="policy")
    assert '"type": "log"' in json.dumps(spec, ensure_ascii=False)


def test_sweep_frame_from_engine(real_traces):
    from dspark_viz.serving.simulate import sweep

    df = sweep(real_traces["full"], ["fixed-1", "hardware-aware"], gpu_like(), Rs=(1, 8), n_rounds=5)
    check(viz.frontier_chart(df))
    check(viz.budget_chart(df))


# -- the real trace through every trace-level figure ---------------------------------------------------------
def test_real_trace_figures(real_traces):
    for tr in (real_traces["hw"], real_traces["thr"], real_traces["lookup"][0]):
        html_ = viz.token_strip_html(tr)
        assert html_.count('class="dsv-sep"') == len(tr.rounds)
        check(viz.token_strip_chart(tr))
        for i in (0, len(tr.rounds) - 1):
            check(viz.round_view(tr, i))


# -- export ------------------------------------------------------------------------------------------------
def test_to_svg_and_png(trace, tmp_path):
    svg = viz.to_svg(viz.round_view(trace, 0))
    assert svg.lstrip().startswith("<svg") and "</svg>" in svg
    p = viz.save_png(viz.chosen_lengths_chart(trace.rounds[1].schedule), tmp_path / "x.png", scale=1)
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bundle = viz.mime_bundle(viz.round_view(trace, 0))
    assert "application/vnd.vegalite.v5+json" in bundle
    import base64                                        # a static picture for readers without Vega-Lite
    assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert bundle["text/plain"].startswith("<chart: ") and "dict" not in bundle["text/plain"]
    assert "image/png" not in viz.mime_bundle(viz.round_view(trace, 0), png=False)


def test_layered_and_faceted_charts_render(real_traces):
    """Vega-Lite validation does not catch everything Vega refuses at render time (e.g. a faceted layer with
    two y axes): render the composite charts for real."""
    sw = sweep(real_traces["full"], ["fixed-1", "hardware-aware"], gpu_like(), Rs=(1, 4), n_rounds=10, seed=0)
    charts = [viz.acceptance_chart({"random": real_traces["full"], "lookup": real_traces["lookup"]}),
              viz.threshold_sweep_chart(threshold_sweep(real_traces["full"], thetas=(0.0, 0.5))),
              viz.frontier_chart(sw, data="test") | viz.budget_chart(sw, data="test")]
    for chart in charts:
        svg = viz.to_svg(chart)
        assert svg.lstrip().startswith("<svg") and "</svg>" in svg


# -- legends and ticks ----------------------------------------------------------------------------------
def _encodings(spec, channel):
    """Every encoding of ``channel`` anywhere in a Vega-Lite spec."""
    found = []
    if isinstance(spec, dict):
        enc = spec.get("encoding")
        if isinstance(enc, dict) and isinstance(enc.get(channel), dict):
            found.append(enc[channel])
        for v in spec.values():
            found += _encodings(v, channel)
    elif isinstance(spec, list):
        for v in spec:
            found += _encodings(v, channel)
    return found


def test_shape_and_colour_share_one_legend(real_traces):
    """A shape on the colour's field must carry the same title and domain, or Vega-Lite draws two legends."""
    sweep_df = pd.DataFrame([dict(policy=p, R=R, throughput=100.0 * R, per_user=100.0 / R, mean_budget=1.0, tau=1.5)
                             for p in ("fixed-1", "hardware-aware") for R in (1, 8)])
    charts = {"acceptance": viz.acceptance_chart({"b": real_traces["full"], "a": real_traces["lookup"]}),
              "frontier": viz.frontier_chart(sweep_df), "budget": viz.budget_chart(sweep_df)}
    for name, chart in charts.items():
        spec = chart.to_dict()
        shapes = [e for e in _encodings(spec, "shape") if "field" in e]
        assert shapes, name
        for s in shapes:
            colours = [c for c in _encodings(spec, "color") if c.get("field") == s["field"]]
            assert colours and all(c.get("title") == s.get("title") for c in colours), name
            assert all(c["scale"]["domain"] == s["scale"]["domain"] for c in colours), name


def test_round_view_tick_labels(real_traces):
    spec = viz.round_view(real_traces["full"][0], 0).to_dict()
    axes = [e["axis"] for e in _encodings(spec, "y") if isinstance(e.get("axis"), dict) and "values" in e["axis"]]
    assert axes and all(a["values"] == [0, 0.25, 0.5, 0.75, 1.0] and a["format"] == ".2~f" for a in axes)
