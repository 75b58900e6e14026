"""Bad input gets a clear ValueError / FileNotFoundError (library) or one stderr line + exit 2 (CLI)."""
from __future__ import annotations

import json

import pytest

from dspark_viz import cli
from dspark_viz.decode import MAX_NEW_TOKENS, generate_rounds, plain_generate
from dspark_viz.drafters import load_drafter
from dspark_viz.model.target import load_target, resolve_model_dir
from dspark_viz.sampling import probs_from_logits
from dspark_viz.trace import Trace


# -- library --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prompt", ["", "   \n "])
def test_empty_prompt(real_target, prompt):
    with pytest.raises(ValueError, match="prompt is empty"):
        plain_generate(real_target, prompt, max_new_tokens=4)


def test_empty_prompt_ids_and_no_prompt(table_target):
    with pytest.raises(ValueError, match="prompt is empty"):
        generate_rounds(table_target, None, prompt_ids=[])
    with pytest.raises(ValueError, match="give a prompt or prompt_ids"):
        generate_rounds(table_target, None)


@pytest.mark.parametrize("n", [0, -3, MAX_NEW_TOKENS + 1, 10 ** 9, 2.5, "12"])
def test_bad_max_new_tokens(table_target, n):
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate_rounds(table_target, None, prompt_ids=[0], max_new_tokens=n)


def test_prompt_plus_budget_over_context(real_target):
    ids = real_target.chat_ids("hi")
    with pytest.raises(ValueError, match="exceeds the target's context"):
        generate_rounds(real_target, None, prompt_ids=ids * (real_target.max_context // len(ids)),
                        max_new_tokens=64)


@pytest.mark.parametrize("t", [-0.1, -5, float("nan"), 11.0])
def test_bad_temperature(table_target, t):
    with pytest.raises(ValueError, match="temperature"):
        generate_rounds(table_target, None, prompt_ids=[0], temperature=t)
    if t < 0:
        import torch
        with pytest.raises(ValueError, match="temperature must be ≥ 0"):
            probs_from_logits(torch.zeros(3), t)


def test_unknown_drafter(table_target):
    with pytest.raises(ValueError, match=r"unknown drafter 'nope'.*lookup"):
        load_drafter("nope", table_target)


def test_paths_that_are_not_models(tmp_path):
    empty_dir = tmp_path / "not_a_model"
    empty_dir.mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        load_target(empty_dir)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ValueError, match="is not a model"):
        load_target(text)
    fake = tmp_path / "model.gguf"
    fake.write_text("not really a gguf")
    with pytest.raises(ValueError, match="not a GGUF file"):
        load_target(fake)
    with pytest.raises(FileNotFoundError, match="no model at"):
        load_target(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no model at"):
        resolve_model_dir("~/definitely/not/here")


def test_folder_with_a_broken_config(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="could not load a causal LM"):
        load_target(tmp_path)


def test_unknown_dtype():
    with pytest.raises(ValueError, match="unknown dtype"):
        load_target(None, dtype="fp64")


@pytest.mark.parametrize("text, why", [
    ("{\"meta\": {}, \"prompt_ids\": [1], \"rounds\": [", "invalid JSON"),
    ("[1, 2, 3]", "top level is not an object"),
    ("{\"meta\": {}, \"prompt_ids\": [1]}", "not a dspark_viz Trace"),                  # missing fields
    ("{\"meta\": {}, \"prompt_ids\": [1], \"first_token\": 2, \"rounds\": [{\"index\": 0}]}", "not a dspark_viz Trace"),
    ("{\"meta\": {}, \"prompt_ids\": [1], \"first_token\": 2, \"rounds\": 5}", "not a dspark_viz Trace"),
])
def test_corrupted_trace_json(text, why, tmp_path):
    with pytest.raises(ValueError, match=why):
        Trace.from_json(text)
    path = tmp_path / "t.json"
    path.write_text(text if text.lstrip().startswith("{") else json.dumps({"x": text}))
    with pytest.raises(ValueError, match="not a dspark_viz Trace"):
        Trace.from_json(str(path))


def test_missing_trace_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Trace JSON file"):
        Trace.from_json(str(tmp_path / "nope.json"))


# -- CLI ----------------------------------------------------------------------------------------------------
def _cli(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


@pytest.mark.parametrize("argv, msg", [
    (["generate", "  "], "prompt is empty"),
    (["generate", "hi", "--temperature", "-1"], "temperature must be ≥ 0"),
    (["generate", "hi", "--max-new-tokens", "0"], "max_new_tokens must be a positive integer"),
    (["generate", "hi", "--max-new-tokens", "1000000000"], "too large"),
    (["generate", "hi", "--drafter", "nope"], "unknown drafter 'nope'"),
    (["generate", "hi", "--policy", "sometimes"], "unknown policy 'sometimes'"),
    (["generate", "hi", "--sps-profile", "warp-drive"], "unknown SPS profile"),
    (["generate", "hi", "--target", "/no/such/model"], "no model at"),
    (["generate", "hi", "--max-new-tokens", "ten"], "invalid int value"),                # argparse
    (["generate"], "the following arguments are required: prompt"),
    (["bench", "--methods", "hf_generate,warp"], "unknown bench method"),
    (["bench", "--prompts", "/no/such/file.jsonl"], "prompt file not found"),
    (["bench", "--mixed-dtypes", "fp32,fp32"], "once each"),
    (["bench", "--mixed-dtypes", "fp32,fp16"], "must list fp32 and/or bf16"),
    (["bench", "--mixed-dtypes", "fp32,bf16", "--dtypes", "fp32"], "not both"),
    (["frobnicate"], "invalid choice"),
])
def test_cli_bad_input_exits_2(capsys, argv, msg):
    rc, out, err = _cli(capsys, *argv)
    assert rc == 2 and msg in err


def test_cli_bad_target_paths(capsys, tmp_path):
    (tmp_path / "m").mkdir()
    rc, _, err = _cli(capsys, "generate", "hi", "--target", str(tmp_path / "m"))
    assert rc == 2 and "no config.json" in err
    (tmp_path / "w.txt").write_text("x")
    rc, _, err = _cli(capsys, "generate", "hi", "--target", str(tmp_path / "w.txt"))
    assert rc == 2 and "is not a model" in err


def test_cli_policy_needing_confidences_with_lookup(capsys, monkeypatch, real_target):
    monkeypatch.setattr("dspark_viz.model.target.load_target", lambda *a, **k: real_target)
    rc, _, err = _cli(capsys, "generate", "hi", "--policy", "hardware-aware")
    assert rc == 2 and "needs confidences" in err and "lookup" in err


def test_cli_no_command(capsys):
    rc, _, err = _cli(capsys)
    assert rc == 2 and "usage: dspark-viz" in err
