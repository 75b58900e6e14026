"""The shipped data (the top-level ``assets/`` folder) is found however the package is used: from a clone on
the path, from an editable install, and from a wheel, which carries it as package data and decodes with it.

Each case runs in a fresh interpreter whose path holds that install and not the repository. The wheel is built
from this checkout and installed without dependencies into a temporary folder. The editable install is made from
a copy of the checkout into a temporary folder too, and its interpreter starts without site processing, so that
an editable install of the checkout itself (``make setup``) cannot answer in its place. The few-token kernel is
switched off in the wheel's run (DSPARK_SKINNY=0): compiling it for a second source location would only cost time,
and its sources are checked to be in the wheel instead.
"""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What every install must find: the data folder, each kind of shipped file, read through the package's own readers.
DATA = r"""
import json
from pathlib import Path
import dspark_viz as dv
from dspark_viz.cost import SPSProfile, named_profile
from dspark_viz.datasets.traces import load_bundle
from dspark_viz.drafters.config import SHIPPED
from dspark_viz.drafters.neural import read_card
from dspark_viz.settings import assets, assets_dir

out = {"file": dv.__file__, "assets": str(assets_dir())}
out["profiles"] = {p.name: len(SPSProfile.load(p).batch) for p in sorted(assets("profiles").glob("*.json"))}
out["cpu_profile"] = named_profile("cpu").name
out["traces"] = {p.name: sum(len(t.rounds) for t in load_bundle(p)) for p in sorted(assets("traces").glob("*.json.gz"))}
out["prompts"] = {p.name: sum(1 for _ in open(p, encoding="utf-8")) for p in sorted(assets("prompts").glob("*.jsonl"))}
out["cards"] = {name: read_card(assets("drafters", stem + ".json"))["algo"] for name, stem in SHIPPED.items()}
print(json.dumps(out))
"""


def _run(code: str, cwd: Path, env: dict, argv0: list[str] | None = None) -> dict:
    run = subprocess.run([*(argv0 or [sys.executable]), "-c", code], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _env(**kw) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(kw)
    return env


def _check_data(out: dict, home: Path, data: Path) -> None:
    """``out`` (DATA's answer) found the package at ``home`` and the shipped data at ``data``, all of it."""
    assert Path(out["file"]).is_relative_to(home), out["file"]
    assert Path(out["assets"]) == data, out["assets"]
    shipped = {p.name for p in (ROOT / "assets" / "profiles").glob("*.json")}
    assert shipped and set(out["profiles"]) == shipped and all(n > 1 for n in out["profiles"].values())
    assert out["cpu_profile"] != "gpu-like"                                 # the measured profile was found
    traces = {p.name for p in (ROOT / "assets" / "traces").glob("*.json.gz")}
    assert traces and set(out["traces"]) == traces and all(n > 0 for n in out["traces"].values())
    assert out["prompts"]["train.jsonl"] > 0 and out["prompts"]["eval.jsonl"] > 0
    assert out["cards"] == {"dspark": "dspark", "dspark-rnn": "dspark-rnn", "dflash": "dflash", "eagle": "eagle"}


def test_assets_are_one_top_level_folder():
    """assets/ sits beside dspark_viz/ as one real folder: no copy or link inside the package."""
    assert (ROOT / "assets").is_dir() and not (ROOT / "assets").is_symlink()
    assert not (ROOT / "dspark_viz" / "assets").exists()


def test_a_clone_on_the_path_finds_the_assets(tmp_path):
    out = _run(DATA, tmp_path, _env(PYTHONPATH=str(ROOT)))
    _check_data(out, ROOT / "dspark_viz", ROOT / "assets")


def _copy_checkout(dest: Path) -> Path:
    """The files an install reads (package, data, build configuration), copied to ``dest``."""
    dest.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("dspark_viz", "assets"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.mark.slow
def test_an_editable_install_finds_the_assets(tmp_path):
    pytest.importorskip("setuptools")
    src, target = _copy_checkout(tmp_path / "src"), tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(src),
                    "--target", str(target)], check=True, cwd=tmp_path, capture_output=True)
    # -S: no site processing, so only this editable install's finder is on the import path; the dependencies
    # come from this interpreter's site-packages, added after it
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    code = (f"import site, sys; site.addsitedir({str(target)!r}); sys.path += {deps!r}\n" + DATA)
    out = _run(code, tmp_path, _env(), [sys.executable, "-S"])
    _check_data(out, src / "dspark_viz", src / "assets")


# The wheel's run also decodes: every shipped drafter loads on the embedded target, and one request runs.
DECODE = DATA.replace("print(json.dumps(out))", "") + r"""
from dspark_viz.drafters import NEURAL
out["csrc"] = sorted(p.name for p in Path(dv.__file__).parent.joinpath("fast", "csrc").iterdir())
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
    wheels, installed = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), str(ROOT)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("dspark_viz-*.whl")
    with zipfile.ZipFile(wheel) as z:                                      # the data inside the package only
        tops = {n.split("/")[0] for n in z.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"dspark_viz"}, tops
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(installed), str(wheel)],
                   check=True, cwd=tmp_path)
    out = _run(DECODE, tmp_path, _env(PYTHONPATH=str(installed), DSPARK_SKINNY="0"))

    _check_data(out, installed, installed / "dspark_viz" / "assets")        # not the checkout: package data
    assert {"skinny_linear.cpp", "skinny_kernels.h", "decoder_layer.h", "draft_loops.h"} <= set(out["csrc"])
    assert set(out["drafters"]) == {"dspark", "dspark-rnn", "dflash", "eagle"}
    assert out["drafters"]["dspark"]["confidence"] and out["drafters"]["dspark"]["calibrated"]
    assert not out["drafters"]["dflash"]["confidence"]
    assert 0 < out["generated"] <= 16                                       # a stop token may end it early
    assert out["rounds"] > 0 and out["confidences"]
