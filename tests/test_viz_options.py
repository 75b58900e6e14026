"""Chart options the course uses: notes under reliability panels, SPS profiles in their own panels, the best Θ
on an admission path, and the per-request budget against the load."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("altair")

from dspark_viz import calibration as cal
from dspark_viz import viz
from dspark_viz.cost import SPSProfile, gpu_like, jagged
from dspark_viz.scheduler import make_policy


def _text(chart) -> str:
    return json.dumps(chart.to_dict(), ensure_ascii=False)


def _values(spec) -> list[dict]:
    return [r for ds in spec.get("datasets", {}).values() for r in ds]


def test_reliability_notes_go_under_their_panel_titles():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.1, 0.9, (200, 3))
    m = (rng.uniform(size=(200, 3)) < conf).cumprod(axis=1).sum(axis=1)
    frame = viz.reliability_frame(conf, m, calib=cal.fit_sts(conf, m), n_bins=5)
    plain = viz.reliability_diagram(frame, positions=[1, 3])
    noted = viz.reliability_diagram(frame, positions=[1, 3], notes={3: "12 of 200 rounds survive"})
    assert "12 of 200 rounds survive" in _text(noted) and "rounds survive" not in _text(plain)
    titles = [p["title"] for p in noted.to_dict()["hconcat"]]
    assert titles[0] == "k = 1" and titles[1] == {"text": "k = 3", "subtitle": "12 of 200 rounds survive"}


def test_sps_panels_label_each_profile_and_draw_only_its_table():
    measured = SPSProfile("measured", [1, 4, 16, 64], [30.0, 25.0, 12.0, 7.0], device="cpu",
                          meta={"cpu": "Some CPU", "dtype": "float32", "threads": 2})
    chart = viz.sps_chart([gpu_like(), jagged(), measured], bmax=256, panels=True)
    spec = chart.to_dict()
    assert len(spec["hconcat"]) == 3 and spec["resolve"]["scale"]["y"] == "independent"
    subs = [p["title"]["subtitle"] for p in spec["hconcat"]]
    assert subs == ["synthetic", "synthetic", "measured (Some CPU, float32, 2 threads)"]
    data = pd.DataFrame(_values(spec))
    assert data[data.profile == "measured"].B.max() == 64 and data[data.profile == "gpu-like"].B.max() == 256
    assert viz.sps_chart([gpu_like(), measured], bmax=256).to_dict()["encoding"]["color"]["field"] == "profile"


def test_admission_path_can_mark_the_best_theta():
    crowd = [[0.95, 0.9]] * 60
    stuck = make_policy("hardware-aware").choose(crowd, jagged())
    best = make_policy("retrospective").choose(crowd, jagged())
    chart = viz.admission_path_chart(stuck, tail=len(stuck.path), mark_best=True)
    data = [r for r in _values(chart.to_dict()) if "theta" in r]
    assert len({r["step"] for r in data}) == len(stuck.path)
    marked = [r for r in data if r.get("is_best")]
    assert len(marked) == 1 and marked[0]["B"] == best.B
    assert f"best Θ on the path (step {best.B - 60})" in _text(chart)
    assert "best Θ" not in _text(viz.admission_path_chart(stuck))


def test_load_budget_chart():
    df = pd.DataFrame(dict(R=[1, 2, 1, 2], series=["a", "a", "b", "b"], ell=[7.0, 6.5, 3.0, 0.0], B=[8, 16, 8, 16]))
    spec = viz.load_budget_chart(df, title="T", subtitle="S").to_dict()
    enc = spec["layer"][0]["encoding"]
    assert (enc["x"]["field"], enc["y"]["field"], enc["color"]["field"]) == ("R", "ell", "series")
    assert spec["title"]["text"] == "T" and spec["title"]["subtitle"] == "S"
