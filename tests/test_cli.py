"""The command line and the bench runner, on the session's real target (never loaded twice)."""
from __future__ import annotations

import json
import statistics

import pytest

from dspark_viz import cli
from dspark_viz.cli.generate import render_round, use_color
from dspark_viz.evaluation.speed_methods import METHODS, BenchSettings
from dspark_viz.evaluation.speed_report import format_table
from dspark_viz.evaluation.speed_runner import balanced_prompts, bench_methods, best_per_method, default_prompt_files
from dspark_viz.trace import Trace


@pytest.fixture
def patched_target(monkeypatch, real_target):
    monkeypatch.setattr("dspark_viz.model.target.load_target", lambda *a, **k: real_target)
    return real_target


def test_generate_prints_text_and_summary(capsys, patched_target, tmp_path):
    out_json = tmp_path / "trace.json"
    rc = cli.main(["generate", "Name three colours.", "--max-new-tokens", "12", "--trace-out", str(out_json)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    tr = Trace.from_json(str(out_json))
    assert out == tr.text() + "\n" and "\x1b[" not in out            # not a terminal: no colour
    assert "τ = " in err and "tok/s" in err and "drafter lookup" in err and tr.n_generated <= 12
    assert tr.meta["drafter"] == "lookup" and tr.meta["policy"] == "fixed-7"


def test_generate_with_the_fallback(capsys, patched_target, tmp_path):
    out_json = tmp_path / "trace.json"
    rc = cli.main(["generate", "Name three colours.", "--max-new-tokens", "24", "--fallback", "--trace-out",
                   str(out_json)])
    out, err = capsys.readouterr()
    tr = Trace.from_json(str(out_json))
    assert rc == 0 and tr.meta["fallback"] is True and "+ fallback (drafted in" in err
    assert all(r.gate is not None for r in tr.rounds)


def test_generate_plain_sampling(capsys, patched_target):
    rc = cli.main(["generate", "Say hi.", "--drafter", "none", "--max-new-tokens", "5", "--temperature", "0.8",
                   "--seed", "3"])
    out, err = capsys.readouterr()
    assert rc == 0 and "drafter plain" in err and "T = 0.8" in err and out.strip()


def test_render_round_colours():
    from test_trace_metrics import hand_trace

    r = hand_trace().rounds[1]                              # accepted t6, rejected t7, pruned t8, bonus t11
    s = render_round(r, color=True)
    assert s == "\x1b[32mt6\x1b[0m\x1b[9;31mt7\x1b[0m\x1b[33mt11\x1b[0m"
    assert render_round(r, color=False) == "t6t11"
    assert not use_color(False, stream=open(__file__))   # a file is not a terminal


def test_bench_json(capsys, patched_target, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"turns": ["Count from one to five."]}) + "\n"
                       + json.dumps({"turns": ["Repeat: a b c a b c"]}) + "\n")
    out_json = tmp_path / "bench.json"
    rc = cli.main(["bench", "--prompts", str(prompts), "--n-prompts", "1", "--max-new-tokens", "6",
                   "--no-warmup", "--json", str(out_json), "--dtype", "fp32",
                   "--methods", "hf_generate,hf_prompt_lookup,plain,plain_thread,lookup,dspark_sched,dspark_fallback"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    rep = json.loads(out_json.read_text())
    assert set(rep["methods"]) == {"hf_generate", "hf_prompt_lookup", "plain", "plain_thread", "lookup",
                                   "dspark_sched", "dspark_fallback"}
    for name, m in rep["methods"].items():
        assert m["tok_per_s"] > 0 and {"ratio_vs_plain", "ratio_vs_hf_generate", "tau", "drafted"} <= set(m)
        assert m["same_as_hf_generate"] == 1 and m["same_as_plain"] == 1     # greedy fp32: same tokens
    assert rep["methods"]["hf_generate"]["ratio_vs_hf_generate"] == 1.0
    assert rep["methods"]["plain"]["ratio_vs_plain"] == 1.0
    assert rep["methods"]["plain"]["tau"] == 1.0 and rep["methods"]["hf_generate"]["tau"] is None
    assert rep["methods"]["plain"]["drafted"] is None and 0 <= rep["methods"]["dspark_fallback"]["drafted"] <= 1
    assert rep["machine"]["torch"] and rep["command"].startswith("dspark-viz bench")
    floor = rep["memory_floor"]
    assert floor["read_GBps"] > 0 and set(floor["by_dtype"]) == {"float32"} and floor["read_buffers"] == 5
    f = floor["by_dtype"]["float32"]
    assert f["weight_MB"] > 4 * 100 and f["plain_ms_per_token"] > 0                # 135 M fp32 parameters
    plain_rows = [r for r in rep["per_prompt"] if r["method"] == "plain"]     # each read just before its decode
    assert all(r["read_GBps"] > 0 for r in plain_rows)
    assert f["read_samples_GBps"] == [r["read_GBps"] for r in plain_rows]
    assert all(r["read_GBps"] is None for r in rep["per_prompt"] if r["method"] != "plain")
    wb = f["weight_MB"] * 1e6
    assert f["floor_ms_per_token"] == pytest.approx(wb / (statistics.median(f["read_samples_GBps"]) * 1e9) * 1e3)
    ratios = [r["decode_s"] / (r["tokens"] - 1) / (wb / (r["read_GBps"] * 1e9)) for r in plain_rows]
    assert f["plain_over_floor"] == pytest.approx(statistics.median(ratios))
    assert "reads each taken just before a plain decode" in out
    assert "hf_generate" in out and "×hf_gen" in out and "×plain" in out and "memory floor at float32" in out
    assert "dspark_fallback = DSpark, hardware-aware + fallback" in out
    from dspark_viz.evaluation.speed_report import markdown_report
    from dspark_viz.evaluation.speed_runner import load_reports

    page = markdown_report(load_reports(out_json), notes=["The eagle rows predate the shipped drafter."])
    assert page.index(rep["command"]) < page.index("The eagle rows predate") < page.index("| CPU |")


def test_bench_default_runs_hf_at_both_dtypes_and_ours_at_the_machines(capsys, patched_target, tmp_path):
    """No dtype flag on CPU: HF methods at fp32 and bf16, ours at the machine's dtype (fp32 with DSPARK_TUNE=0),
    one interleaved run; the JSON records the machine's choice and each method's ratio to the fastest HF run."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"turns": ["Count from one to five."]}) + "\n")
    out_json = tmp_path / "bench.json"
    rc = cli.main(["bench", "--prompts", str(prompts), "--n-prompts", "1", "--max-new-tokens", "4", "--no-warmup",
                   "--json", str(out_json), "--methods", "hf_generate,hf_prompt_lookup,plain", "--no-bandwidth"])
    assert rc == 0, capsys.readouterr().err
    rep = json.loads(out_json.read_text())
    assert set(rep["methods"]) == {"hf_generate@fp32", "hf_generate@bf16", "hf_prompt_lookup@fp32",
                                   "hf_prompt_lookup@bf16", "plain@fp32", "plain@bf16"}
    for lab in ("fp32", "bf16"):                          # ×plain against plain decoding at the same dtype
        assert rep["methods"][f"plain@{lab}"]["ratio_vs_plain"] == 1.0
        assert rep["methods"][f"hf_generate@{lab}"]["ratio_vs_plain"] > 0
    assert rep["memory_floor"] == {}
    assert rep["machine"]["baseline"] in ("hf_generate@fp32", "hf_generate@bf16")
    assert rep["machine"]["lookup_baseline"] in ("hf_prompt_lookup@fp32", "hf_prompt_lookup@bf16")
    assert "cpu_flags" in rep["machine"] and set(rep["machine"]["paths"]) == {"fp32", "bf16"}
    assert all(m["ratio_vs_hf_prompt_lookup"] > 0 for m in rep["methods"].values())


def test_bench_mixed_targets_interleave_and_compare_with_the_fastest_baseline(real_target):
    """A {label: target} bench runs every method on each as method@label; ×hf_gen is against the fastest
    hf_generate@label, =hf against the same label's (the same fp32 target twice stands in for two dtypes)."""
    prompts = [dict(prompt="Count from one to five.", file="x.jsonl", index=0, domain="chat")]
    rep = bench_methods({"fp32": real_target, "copy": real_target}, prompts, ["hf_generate", "plain"],
                        BenchSettings(max_new_tokens=6), warmup=False)
    assert set(rep.methods) == {"hf_generate@fp32", "plain@fp32", "hf_generate@copy", "plain@copy"}
    base = rep.machine["baseline"]
    assert base in ("hf_generate@fp32", "hf_generate@copy")
    assert rep.methods[base]["tok_per_s"] == max(rep.methods[b]["tok_per_s"] for b in ("hf_generate@fp32",
                                                                                      "hf_generate@copy"))
    assert rep.methods[base]["ratio_vs_hf_generate"] == 1.0
    assert all(m["same_as_hf_generate"] == 1 and m["n_prompts"] == 1 for m in rep.methods.values())
    best = best_per_method(rep)
    assert set(best) == {"hf_generate", "plain"} and best["hf_generate"] == base
    assert rep.machine["dtype"] == "float32+float32" and "best dtype per method" in format_table(rep)


def test_bench_records_the_prompt_folder_by_its_role_in_either_flag_form():
    from dspark_viz.cli.bench import command_line

    assert command_line(["--bench-dir", "/home/me/b", "--temperatures", "0"], "/home/me/b") == \
        "dspark-viz bench --bench-dir BENCH_DIR --temperatures 0"
    assert command_line(["--bench-dir=/home/me/b"], "/home/me/b") == "dspark-viz bench --bench-dir=BENCH_DIR"
    assert command_line(["--n-prompts", "2"], None) == "dspark-viz bench --n-prompts 2"


def test_bench_registry_and_balanced_prompts(tmp_path):
    assert list(METHODS)[:4] == ["hf_generate", "hf_prompt_lookup", "plain", "lookup"]
    f = tmp_path / "gsm8k_x.jsonl"
    f.write_text("".join(json.dumps({"turns": [f"q{i}"]}) + "\n" for i in range(10)))
    g = tmp_path / "humaneval_y.jsonl"
    g.write_text("".join(json.dumps({"turns": [f"c{i}"]}) + "\n" for i in range(3)))
    ps = balanced_prompts([f, g], 3)
    assert [p["prompt"] for p in ps] == ["q0", "c0", "q4", "c1", "q9", "c2"]      # evenly spaced, interleaved
    assert {p["domain"] for p in ps} == {"math", "code"}
    with pytest.raises(ValueError, match="n-prompts"):
        balanced_prompts([f], 0)
    assert [p.name for p in default_prompt_files()] == ["eval.jsonl"] or len(default_prompt_files()) == 3


@pytest.mark.slow
def test_profile_drafters_only_keeps_the_table(capsys, patched_target, tmp_path):
    from dspark_viz.cost import SPSProfile, gpu_like

    f = tmp_path / "p.json"
    gpu_like(bmax=16).save(f)
    assert cli.main(["profile", "--drafters-only", "--out", str(f), "--repeats", "1", "--ctx-len", "24"]) == 0
    p = SPSProfile.load(f)
    assert (p.batch, p.sps) == (gpu_like(bmax=16).batch, gpu_like(bmax=16).sps)      # the table is kept
    assert set(p.meta["draft_s"]) == {"dspark", "dspark-rnn", "dflash", "eagle"}
    assert all(0 < v < 1 for v in p.meta["draft_s"].values()) and "draft dspark" in capsys.readouterr().out
    assert p.meta["draft_s_when"].startswith("20")
    assert cli.main(["profile", "--drafters-only", "--out", str(tmp_path / "none.json")]) != 0
    assert cli.main(["profile", "--drafters-only", "--no-drafters", "--out", str(f)]) != 0


@pytest.mark.slow
def test_profile_names_the_memory_floor_it_was_measured_against(capsys, patched_target, tmp_path):
    from dspark_viz.cost import SPSProfile
    from dspark_viz.evaluation.machine_info import weight_bytes

    f = tmp_path / "p.json"
    assert cli.main(["profile", "--no-tune", "--no-drafters", "--bmax", "2", "--repeats", "1", "--ctx-len", "24",
                     "--out", str(f)]) == 0
    p = SPSProfile.load(f)
    assert p.batch[:2] == [1, 2] and p.meta["read_GBps"] > 0
    assert p.meta["floor_ms"] == pytest.approx(weight_bytes(patched_target) / p.meta["read_GBps"] / 1e6, rel=0.01)
    assert "memory floor of a one-token step" in capsys.readouterr().out


def test_record_writes_one_bundle_per_drafter_and_temperature(capsys, patched_target, tmp_path):
    from dspark_viz.datasets.traces import read_bundle

    args = ["record", "--drafters", "lookup", "dspark", "--temperatures", "0", "1", "--per-domain", "1",
            "--max-new-tokens", "8", "--batch", "3", "--out", str(tmp_path)]
    assert cli.main(args) == 0
    names = sorted(p.name for p in tmp_path.glob("*.json.gz"))
    assert names == ["dspark_T0.json.gz", "dspark_T1.json.gz", "lookup_T0.json.gz", "lookup_T1.json.gz"]
    meta, traces = read_bundle(tmp_path / "dspark_T1.json.gz")
    assert meta["drafter"] == "dspark" and meta["temperature"] == 1.0 and meta["dtype"] == "fp32"
    assert sorted(t.meta["domain"] for t in traces) == ["chat", "code", "math"]
    assert all(d.confidence is not None for t in traces for r in t.rounds for d in r.drafts)
    greedy = {n: [t.output_ids for t in read_bundle(tmp_path / f"{n}_T0.json.gz")[1]] for n in ("lookup", "dspark")}
    assert greedy["lookup"] == greedy["dspark"]                       # greedy: the same answers, any drafter
    capsys.readouterr()
    assert cli.main(args) == 0 and "exists" in capsys.readouterr().out       # resumable: nothing re-decoded
    assert cli.main(["record", "--per-domain", "0", "--out", str(tmp_path)]) == 2
