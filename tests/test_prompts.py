"""Tests for the prompt suites: the reader ``dspark_viz.datasets.prompts`` and the generator ``tools/make_prompts.py``."""

import importlib.util
import json
import random
from pathlib import Path

import pytest

from dspark_viz.datasets import prompts as P
from dspark_viz.settings import assets

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_prompts", ROOT / "tools" / "make_prompts.py")
T = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(T)


@pytest.fixture(scope="module")
def spec():
    return T.load_spec()


@pytest.fixture(scope="module")
def suites(spec):
    return T.build_suites(spec=spec)


def _texts(recs):
    return [r["turns"][0] for r in recs]


# -- the generator -----------------------------------------------------------------------------------
def test_regenerates_the_shipped_suites_byte_for_byte(tmp_path):
    paths = T.write_suites(tmp_path)
    for split in ("train", "eval"):
        assert paths[split].read_bytes() == assets("prompts", f"{split}.jsonl").read_bytes(), split


def test_deterministic_for_a_seed(suites, spec):
    assert T.build_suites(spec=spec) == suites
    assert T.build_suites(seed=1, spec=spec) != suites


def test_default_counts_and_balance(suites):
    train, evals = suites
    assert len(train) == 2400
    for d in T.DOMAINS:
        assert sum(r["domain"] == d for r in train) == 800
        assert sum(r["domain"] == d for r in evals) == 80


def test_small_custom_sizes(spec):
    train, evals = T.build_suites(seed=3, n_train=31, n_eval_per_domain=7, spec=spec)
    assert len(train) == 31
    assert sorted(sum(r["domain"] == d for r in train) for d in T.DOMAINS) == [10, 10, 11]
    assert all(sum(r["domain"] == d for r in evals) == 7 for d in T.DOMAINS)


def test_record_shape_and_domains(suites):
    for rec in suites[0] + suites[1]:
        assert set(rec) == {"turns", "domain"}
        assert rec["domain"] in T.DOMAINS
        assert len(rec["turns"]) == 1 and isinstance(rec["turns"][0], str)
        assert rec["turns"][0].strip() == rec["turns"][0] and 10 <= len(rec["turns"][0]) <= 600


def test_unique_and_disjoint(suites):
    train, evals = suites
    tr = {T.normalize(t) for t in _texts(train)}
    ev = {T.normalize(t) for t in _texts(evals)}
    assert len(tr) == len(train)
    assert len(ev) == len(evals)
    assert not tr & ev


def test_eval_holds_out_handwritten_prompts(suites, spec):
    train, evals = suites
    tr = set(_texts(train))
    for d in T.DOMAINS:
        assert len(spec.handwritten[d]) >= 40
        _, held = T.split_handwritten(spec.handwritten[d])
        assert not tr & set(held)
        assert sum(t in held for t in _texts(r for r in evals if r["domain"] == d)) >= 10


def test_no_template_dominates(suites):
    train, _ = suites
    for d in T.DOMAINS:
        heads = {}
        for t in _texts(r for r in train if r["domain"] == d):
            key = " ".join(t.split()[:4])
            heads[key] = heads.get(key, 0) + 1
        assert max(heads.values()) < 0.1 * 800


def test_every_template_renders_from_every_slot_part(spec):
    for part in ("train", "eval", "all"):
        slots = T.slot_part(spec.slots, part)
        for d in T.DOMAINS:
            for name, template in {**spec.templates[d], **spec.eval_only[d]}.items():
                for seed in range(20):
                    text = T.render(template, random.Random(seed), slots)
                    assert "{" not in text or d == "code", (d, name, text)
                    assert 10 <= len(text) <= 600, (d, name, text)


def test_template_language():
    rng, slots = random.Random(0), {"people": [["Ada", "she"], ["Bo", "he"]]}
    t = {"draw": [["(n1, p1), (n2, _)", "sample", "people", 2], ["k", "randint", 2, 2], ["x", "let", "k * 3 + 1"],
                  {"if": "x > 5", "then": [["w", "format", "big {x:03d}"]], "else": [["w", "format", "small"]]},
                  ["i", "randrange", 1], {"case": "i", "of": [[["c", "choice", ["{{lit}} {cap(p1)}"]]]]}],
         "text": "{n1}/{n2}: {w}, {c}, {money(2.5)} {money(3)} {and_list(xs)} {xs[1:]}"}
    with pytest.raises(NameError, match="xs"):
        T.render(t, rng, slots)
    t["draw"].append(["xs", "ints", 3, 1, 1])
    assert T.render(t, random.Random(0), slots) in {"Ada/Bo: big 007, {lit} She, $2.50 $3 1, 1 and 1 [1, 1]",
                                                    "Bo/Ada: big 007, {lit} He, $2.50 $3 1, 1 and 1 [1, 1]"}
    with pytest.raises(ValueError, match="not allowed"):
        T.evaluate("x.upper()", {"x": "a"})
    with pytest.raises(ValueError, match="not allowed"):
        T.evaluate("open('f')", {})


def test_write_suites_roundtrip(tmp_path, spec):
    paths = T.write_suites(tmp_path / "out", seed=2, n_train=60, n_eval_per_domain=5, spec=spec)
    assert set(paths) == {"train", "eval"}
    train, evals = T.build_suites(seed=2, n_train=60, n_eval_per_domain=5, spec=spec)
    assert P.load_prompts(paths["train"]) == train
    assert P.load_prompts(paths["eval"]) == evals
    assert P.load_prompts(paths["eval"], domain="code", limit=3) == [r for r in evals if r["domain"] == "code"][:3]
    raw = paths["train"].read_text(encoding="utf-8").splitlines()
    assert len(raw) == 60 and all(json.loads(line) for line in raw)


def test_main_writes_files(tmp_path, capsys):
    assert T.main(["--out", str(tmp_path), "--n-train", "30", "--n-eval-per-domain", "4"]) == 0
    assert (tmp_path / "train.jsonl").is_file() and (tmp_path / "eval.jsonl").is_file()
    assert "train: 30 prompts" in capsys.readouterr().out


# -- the reader --------------------------------------------------------------------------------------
def test_load_missing_file(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        P.load_prompts(tmp_path / "nope.jsonl")


def test_load_bad_json_line_names_the_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"turns": ["hi"]}\n\n{"turns": ["oops"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 3"):
        P.load_prompts(f)


@pytest.mark.parametrize("rec", [{"prompt": "hi"}, {"turns": []}, {"turns": "hi"}, {"turns": [1, 2]},
                                 {"turns": ["  "]}, ["hi"]])
def test_load_rejects_records_without_turns(tmp_path, rec):
    f = tmp_path / "x.jsonl"
    f.write_text(json.dumps({"turns": ["ok"]}) + "\n" + json.dumps(rec) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        P.load_prompts(f)


@pytest.mark.parametrize("name, domain", [
    ("gsm8k_first200.jsonl", "math"), ("GSM8K.jsonl", "math"), ("humaneval.jsonl", "code"),
    ("mt-bench.jsonl", "chat"), ("mt_bench_questions.jsonl", "chat"), ("prompts.jsonl", "mixed"),
])
def test_domain_inferred_from_file_name(tmp_path, name, domain):
    f = tmp_path / name
    lines = [{"turns": ["first", "second turn"]}, {"turns": ["tagged"], "domain": "code", "id": 7}]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    recs = P.load_prompts(f)
    assert recs[0] == {"turns": ["first", "second turn"], "domain": domain}
    assert recs[1] == {"turns": ["tagged"], "domain": "code", "id": 7}
    assert P.load_prompts(f, domain=domain) == ([recs[0], recs[1]] if domain == "code" else [recs[0]])
    assert P.load_prompts(f, limit=1) == [recs[0]]


def test_shipped_suites_load():
    for split, n in (("train", 2400), ("eval", 240)):
        recs = P.load_prompts(assets("prompts", f"{split}.jsonl"))
        assert len(recs) == n and {r["domain"] for r in recs} == set(T.DOMAINS)


def test_bench_half_is_a_fixed_partition(tmp_path):
    from dspark_viz.datasets.prompts import bench_half

    recs = [{"turns": [f"question number {i}: what is {i} + {i}?"], "domain": "math"} for i in range(400)]
    sel, rep = bench_half(recs, "select"), bench_half(recs, "report")
    assert len(sel) + len(rep) == 400 and 150 < len(sel) < 250
    assert not {r["turns"][0] for r in sel} & {r["turns"][0] for r in rep}
    assert bench_half(list(reversed(recs)), "select") == list(reversed(sel))      # order does not matter
    assert bench_half(recs[:100], "report") == [r for r in rep if r in recs[:100]]   # nor the others
    with pytest.raises(ValueError):
        bench_half(recs, "train")
