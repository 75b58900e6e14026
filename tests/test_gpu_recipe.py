"""The prepared GPU run (tools/gpu_recipe.sh) at toy scale on the CPU: every stage runs (the model in two halves,
answers, the four drafters trained with the same steps, the CUDA test file, a bench) and what would come back keeps
the device's limits (tools/gpu_bundle.py), in two bundles, each drafter's parts joined again to the very file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gpu_bundle  # noqa: E402


@pytest.mark.slow
def test_the_gpu_recipe_dry_run_passes_every_stage_within_the_limits():
    from conftest import embedded_target
    embedded_target()                                   # skips where the embedded model is not installed
    r = subprocess.run(["bash", str(ROOT / "tools/gpu_recipe.sh"), "dry-run"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(summary["steps"]) == {"dspark_markov", "dflash", "dspark_rnn", "eagle"}
    assert sum(map(len, summary["bundles"])) == 4
    assert "call 1 carries" in r.stdout


def test_a_bundle_takes_whole_drafters_within_the_limits():
    MiB = 1 << 20
    sizes = {"a": 26 * MiB, "b": 25 * MiB, "c": 27 * MiB, "d": 10 * MiB}
    assert gpu_bundle.plan_bundle(sizes) == ["a", "b", "d"]            # c would pass 62 MiB: it waits
    assert gpu_bundle.plan_bundle({"c": 27 * MiB}) == ["c"]
    assert gpu_bundle.plan_bundle({k: 15 * MiB for k in "abcdefgh"}) == list("abcd")   # 4 × 15 MiB, then bytes
    assert gpu_bundle.plan_bundle({k: MiB for k in "abcdefgh"}) == list("abcdefg")     # 7 files + the results
    assert gpu_bundle.n_parts(16 * MiB) == 1 and gpu_bundle.n_parts(16 * MiB + 1) == 2


def test_the_limits_are_checked_on_what_comes_back(tmp_path):
    (tmp_path / "ok.bin").write_bytes(b"x")
    assert len(gpu_bundle.check(tmp_path)) == 1
    (tmp_path / "bad name.bin").write_bytes(b"x")
    with pytest.raises(ValueError, match="names"):
        gpu_bundle.check(tmp_path)
    (tmp_path / "bad name.bin").unlink()
    (tmp_path / "big.bin").write_bytes(b"x" * 40)
    with pytest.raises(ValueError, match="over"):
        gpu_bundle.check(tmp_path, file_bytes=32)
    with pytest.raises(ValueError, match="files"):
        gpu_bundle.check(tmp_path, files=1)


def test_parts_that_do_not_make_the_file_are_refused(tmp_path):
    d, out = tmp_path / "d", tmp_path / "out"
    d.mkdir()
    (d / "m.safetensors").write_bytes(bytes(range(256)) * 100)
    (d / "m.json").write_text("{}")
    (tmp_path / "logs").mkdir()
    plan = gpu_bundle.out(d, tmp_path / "logs", out, tmp_path / "state.json", ["m"])
    assert plan["drafters"]["m"]["bytes"] == 25600 and not plan["left"]
    assert gpu_bundle.join([out], tmp_path / "j") == {"m": 25600}
    assert (tmp_path / "j/m.safetensors").read_bytes() == (d / "m.safetensors").read_bytes()
    (out / "m.safetensors.part0").write_bytes(b"broken")
    with pytest.raises(ValueError, match="do not make"):
        gpu_bundle.join([out], tmp_path / "j2")
