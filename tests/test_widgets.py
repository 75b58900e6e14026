"""dspark_viz.widgets: panels build and update headless (no display, no kernel)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

from dspark_viz.background import SYNTHETIC_BACKGROUND, LoadedPolicy, tile_requests
from dspark_viz.cost import gpu_like, jagged
from dspark_viz.drafters import LookupDrafter, RandomDrafter
from dspark_viz.model.toy import TableTarget
from dspark_viz.scheduler import HardwareAware
from dspark_viz.ui.notebook.widgets import CalibrationExplorer, DecodePanel, SchedulerPlayground

VL = "application/vnd.vegalite.v5+json"


def shown(out) -> dict:
    """The Vega-Lite spec an Output widget currently holds."""
    assert len(out.outputs) == 1
    return out.outputs[0]["data"][VL]


@pytest.fixture
def panel():
    t = TableTarget([[0.5, 0.3, 0.2], [0.2, 0.6, 0.2], [0.3, 0.3, 0.4]])
    return DecodePanel(t, {"random": RandomDrafter(3, gamma=4, seed=1), "lookup": LookupDrafter(4, vocab_size=3)},
                       {"gpu-like": gpu_like(), "jagged": jagged()}, prompt="ab", max_new_tokens=16,
                       temperature=1.0)


def test_tile_requests_is_deterministic():
    rows = [[0.9], [0.5], [0.1]]
    assert tile_requests(rows, 5) == [[0.9], [0.5], [0.1], [0.9], [0.5]]
    assert tile_requests(rows, 0) == []
    with pytest.raises(ValueError):
        tile_requests([], 2)


def test_loaded_policy_is_algorithm1_on_the_batch():
    mine = [0.7, 0.6, 0.5, 0.4]
    pol = LoadedPolicy(R=12)
    s = pol.choose([mine], gpu_like())
    want = HardwareAware().choose([mine] + tile_requests(SYNTHETIC_BACKGROUND, 11), gpu_like())
    assert s.lengths == want.lengths and len(s.lengths) == 12
    pol.R = 1
    assert pol.choose([mine], gpu_like()).lengths == HardwareAware().choose([mine], gpu_like()).lengths
    assert pol.name == "hardware-aware@R=1"


def test_decode_panel_steps_and_updates(panel):
    assert panel.trace is None and panel.widget is not None
    r = panel.step()
    assert r is not None and len(panel.trace.rounds) == 1
    first = panel.strip.value
    assert "dsv-tok" in first and first.count('class="dsv-sep"') == 1
    spec = shown(panel.round_out)
    assert "Round 0" in str(spec["title"])
    assert panel.round_chart is not None and "1 rounds" in panel.status.value
    panel.step()
    assert len(panel.trace.rounds) == 2 and panel.strip.value != first
    assert panel.strip.value.count('class="dsv-sep"') == 2 and "Round 1" in str(shown(panel.round_out)["title"])
    assert len(panel.schedule_out.outputs) == 1                               # admission path of the round


def test_decode_panel_load_and_profile_apply_next_round(panel):
    panel.step()
    panel.load.value = 40
    r = panel.step()
    assert len(r.schedule["lengths"]) == 40 and panel.policy.R == 40            # 39 background requests
    panel.profile.value = "jagged"
    assert panel._rounds.sps.name == "jagged"
    assert "jagged" in panel.status.value


def test_decode_panel_run_reset_and_lookup(panel):
    n = panel.run(max_rounds=2)
    assert n == 2 and len(panel.trace.rounds) == 2
    panel.run()
    assert panel.done and panel.step() is None and "finished" in panel.status.value
    assert panel.trace.n_generated <= 16
    panel.drafter.value = "lookup"                                              # a settings change resets
    assert panel.trace is None and panel.strip.value == ""
    panel.run(max_rounds=3)
    assert panel.policy.name == "fixed-4"                                       # no confidence head
    assert len(panel.trace.rounds) >= 1 and "dsv-tok" in panel.strip.value


def test_decode_panel_bad_prompt_is_reported(panel):
    panel.prompt.value = "xyz!"                                                 # not in the toy vocabulary
    assert panel.step() is None and panel.done and "toy vocabulary" in panel.status.value


@pytest.fixture
def confidences():
    rng = np.random.default_rng(0)
    return [list(rng.beta(8, 2, size=7)) for _ in range(10)]


def test_scheduler_playground_load_changes_lengths(confidences):
    pg = SchedulerPlayground(confidences, {"gpu-like": gpu_like(), "jagged": jagged()}, R=4)
    assert len(pg.lengths) == 4 and pg.lengths_chart is not None
    assert pg.set_load(1).lengths == [7]                                         # alone: verify everything
    s = pg.set_load(64)
    assert len(s.lengths) == 64 and np.mean(s.lengths) < 7                       # busy: the budget shrinks
    assert s.lengths == HardwareAware().choose(tile_requests(confidences, 64), gpu_like()).lengths
    assert shown(pg.lengths_out)["title"]["text"].startswith("Chosen verification lengths")
    assert "vconcat" in shown(pg.path_out)
    assert "R = 64" in pg.summary.value
    before = pg.lengths
    assert pg.set_profile("jagged").lengths != before
    pg.early_stop.value = False                                                 # retrospective search
    assert pg.schedule.info["profile"] == "jagged"
    assert pg.set_load(300).B == sum(1 + e for e in pg.lengths) and pg.load.max == 300
    with pytest.raises(ValueError):
        pg.set_profile("nope")


def test_scheduler_playground_edits_your_confidences_and_the_knee(confidences):
    pg = SchedulerPlayground(confidences, R=32)
    first = pg.lengths[0]
    s = pg.set_confidences([0.99] * 7)                                           # a very confident request
    assert s.lengths[0] >= first and s.lengths[0] == max(s.lengths)
    assert s.lengths == HardwareAware().choose([[0.99] * 7] + tile_requests(confidences, 32)[1:],
                                               gpu_like()).lengths
    assert pg.set_confidences([0.01] * 7).lengths[0] == 0                        # hopeless: no budget
    pg.conf_text.value = "0.5, nope"                                             # bad text: kept, explained
    assert "numbers" in pg.message.value and pg.mine == [0.01] * 7
    pg.conf_text.value = "0.5, 1.5"
    assert "[0, 1]" in pg.message.value
    pg.conf_text.value = "0.9; 0.8, 0.7"                                         # ; or , both separate
    assert pg.message.value == "" and pg.mine == [0.9, 0.8, 0.7]
    with pytest.raises(ValueError):
        pg.set_confidences([float("nan")])
    wide = np.mean(pg.set_knee(512).lengths)                                     # a late knee: more is free
    narrow = np.mean(pg.set_knee(8).lengths)
    assert pg.profile.value == pg.KNEE and narrow < wide
    assert pg.schedule.info["profile"] == "gpu-like (knee 8)" and "knee 8" in pg.summary.value
    with pytest.raises(ValueError):
        pg.set_knee(2)


def test_gpu_like_knee():
    assert gpu_like().name == "gpu-like" and gpu_like(knee=32).name == "gpu-like (knee 32)"
    assert gpu_like(knee=32)(64) < gpu_like()(64)                                # saturates earlier
    with pytest.raises(ValueError):
        gpu_like(knee=0)


def test_calibration_explorer_toggles():
    rng = np.random.default_rng(1)
    conf = rng.beta(5, 2, size=(400, 4))
    m = (rng.random((400, 4)) < conf).cumprod(axis=1).sum(axis=1)               # survival-like outcomes
    ce = CalibrationExplorer(conf, m, n_bins=5)
    assert ce.in_sample and len(ce.calib.temperatures) == 4

    def stages():
        spec = shown(ce.out)
        return {r.get("stage") for ds in spec.get("datasets", {}).values() for r in ds} - {None}

    assert stages() == {"before STS", "after STS"} and "ECE STS" in ce.table.value
    ce.set_sts(False)
    assert stages() == {"before STS"} and "ECE STS" not in ce.table.value and ce.sts.description == "STS off"
    ce.set_position(2)
    spec = shown(ce.out)
    assert len(spec["hconcat"]) == 1 and spec["hconcat"][0]["title"].startswith("k = 2")
    ce.set_sts(True)
    ce.set_position(None)
    assert len(shown(ce.out)["hconcat"]) == 4
    with pytest.raises(ValueError):
        ce.set_position(9)


def _static(obj) -> tuple[bytes, str]:
    import base64

    b = obj._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in b                # the live panel, where a kernel runs it
    return base64.b64decode(b["image/png"]), b["text/plain"]


def test_panels_display_with_a_static_picture(panel):
    """Where no kernel runs the widgets (GitHub, nbviewer, an export) each panel shows a PNG of its charts and a line
    of text, not "VBox(children=…)"."""
    png, text = _static(SchedulerPlayground(SYNTHETIC_BACKGROUND, R=8))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and text.startswith("SchedulerPlayground: R = 8 requests")
    rng = np.random.default_rng(1)
    conf = rng.beta(5, 2, size=(200, 4))
    m = (rng.random((200, 4)) < conf).cumprod(axis=1).sum(axis=1)
    png, text = _static(CalibrationExplorer(conf, m, n_bins=5))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and text == "CalibrationExplorer: STS on, every position, 200 rounds"
    b = panel._repr_mimebundle_()
    assert "image/png" not in b and b["text/plain"].startswith("DecodePanel:")   # nothing drawn before a round
    panel.step()
    png, text = _static(panel)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and "1 rounds" in text and "<" not in text
