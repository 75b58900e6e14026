"""A normal (non-editable) install works: the wheel carries its assets and decodes with them.

The wheel is built from this checkout, installed without dependencies into a temporary folder, and used
from a fresh interpreter whose path holds that folder and not the repository. The few-token kernel is
switched off there (DSPARK_SKINNY=0): compiling it for a second source location would only cost time,
and its sources are checked to be in the wheel instead.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHECK = r"""
import json, sys
from pathlib import Path
import dspark_viz as dv
from dspark_viz.drafters import NEURAL
from dspark_viz.drafters.neural import ASSETS, SHIPPED
from dspark_viz.serving.profile import SPSProfile, named_profile
from dspark_viz.settings import assets

out = {"file": dv.__file__}
out["csrc"] = sorted(p.name for p in Path(dv.__file__).parent.joinpath("fast", "csrc").iterdir())
out["profiles"] = {p.name: len(SPSProfile.load(p).batch) for p in sorted(assets("profiles").glob("*.json"))}
out["cpu_profile"] = named_profile("cpu").name
from dspark_viz.trace_store import load_bundle
out["traces"] = {p.name: sum(len(t.rounds) for t in load_bundle(p)) for p in sorted(assets("traces").glob("*.json.gz"))}
out["prompts"] = {p.name: sum(1 for _ in open(p, encoding="utf-8")) for p in sorted(assets("prompts").glob("*.jsonl"))}
target = dv.load_target(device="cpu", dtype="fp32")
out["drafters"] = {}
for name in NEURAL:
    d = dv.load_drafter(name, target)
    out["drafters"][name] = {"gamma": d.gamma, "confidence": d.has_confidence,
                             "calibrated": getattr(d, "calibration", None) is not None}
tr = dv.speculative_generate(target, dv.load_drafter("dspark", target), "What is 12 * 7?",
                             policy=dv.HardwareAware(), max_new_tokens=16)
out["generated"] = tr.n_generated
out["rounds"] = len(tr.rounds)
out["confidences"] = any(d.confidence is not None for r in tr.rounds for d in r.drafts)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_wheel_installed_elsewhere_decodes_with_the_shipped_assets(tmp_path):
    pytest.importorskip("setuptools")
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), str(ROOT)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("dspark_viz-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(site), DSPARK_SKINNY="0")
    run = subprocess.run([sys.executable, "-c", CHECK], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])

    assert Path(out["file"]).is_relative_to(site), out["file"]            # not the checkout
    assert {"skinny_linear.cpp", "skinny_kernels.h", "decoder_layer.h"} <= set(out["csrc"])
    shipped = {p.name for p in (ROOT / "dspark_viz" / "assets" / "profiles").glob("*.json")}
    assert set(out["profiles"]) == shipped and all(n > 1 for n in out["profiles"].values())
    assert out["cpu_profile"] != "gpu-like"                                 # the measured profile was found
    traces = {p.name for p in (ROOT / "dspark_viz" / "assets" / "traces").glob("*.json.gz")}
    assert traces and set(out["traces"]) == traces and all(n > 0 for n in out["traces"].values())
    assert out["prompts"]["train.jsonl"] > 0 and out["prompts"]["eval.jsonl"] > 0
    assert set(out["drafters"]) == {"dspark", "dspark-rnn", "dflash", "eagle"}
    assert out["drafters"]["dspark"]["confidence"] and out["drafters"]["dspark"]["calibrated"]
    assert not out["drafters"]["dflash"]["confidence"]
    assert 0 < out["generated"] <= 16                                       # a stop token may end it early
    assert out["rounds"] > 0 and out["confidences"]
