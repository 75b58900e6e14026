"""Tests for dspark_viz.train.prompts: the project's own math / code / chat prompt suites."""

import json

import pytest

from dspark_viz.train import prompts as P


@pytest.fixture(scope="module")
def suites():
    return P.build_suites()


def _texts(recs):
    return [r["turns"][0] for r in recs]


def test_deterministic_for_a_seed(suites):
    assert P.build_suites() == suites
    assert P.build_suites(seed=1) != suites


def test_default_counts_and_balance(suites):
    train, evals = suites
    assert len(train) == 2400
    for d in P.DOMAINS:
        assert sum(r["domain"] == d for r in train) == 800
        assert sum(r["domain"] == d for r in evals) == 80


def test_small_custom_sizes():
    train, evals = P.build_suites(seed=3, n_train=31, n_eval_per_domain=7)
    assert len(train) == 31
    assert sorted(sum(r["domain"] == d for r in train) for d in P.DOMAINS) == [10, 10, 11]
    assert all(sum(r["domain"] == d for r in evals) == 7 for d in P.DOMAINS)


def test_record_shape_and_domains(suites):
    for rec in suites[0] + suites[1]:
        assert set(rec) == {"turns", "domain"}
        assert rec["domain"] in P.DOMAINS
        assert len(rec["turns"]) == 1 and isinstance(rec["turns"][0], str)
        assert rec["turns"][0].strip() == rec["turns"][0] and 10 <= len(rec["turns"][0]) <= 600


def test_unique_and_disjoint(suites):
    train, evals = suites
    tr = {P._norm(t) for t in _texts(train)}
    ev = {P._norm(t) for t in _texts(evals)}
    assert len(tr) == len(train)
    assert len(ev) == len(evals)
    assert not tr & ev


def test_eval_holds_out_handwritten_prompts(suites):
    train, evals = suites
    tr = set(_texts(train))
    for d in P.DOMAINS:
        assert len(P.HANDWRITTEN[d]) >= 40
        _, held = P._split_handwritten(d)
        assert not tr & set(held)
        assert sum(t in held for t in _texts(r for r in evals if r["domain"] == d)) >= 10


def test_no_template_dominates(suites):
    train, _ = suites
    for d in P.DOMAINS:
        heads = {}
        for t in _texts(r for r in train if r["domain"] == d):
            key = " ".join(t.split()[:4])
            heads[key] = heads.get(key, 0) + 1
        assert max(heads.values()) < 0.1 * 800


def test_write_suites_roundtrip(tmp_path):
    paths = P.write_suites(tmp_path / "out", seed=2, n_train=60, n_eval_per_domain=5)
    assert set(paths) == {"train", "eval"}
    train, evals = P.build_suites(seed=2, n_train=60, n_eval_per_domain=5)
    assert P.load_prompts(paths["train"]) == train
    assert P.load_prompts(paths["eval"]) == evals
    assert P.load_prompts(paths["eval"], domain="code", limit=3) == [r for r in evals if r["domain"] == "code"][:3]
    raw = paths["train"].read_text(encoding="utf-8").splitlines()
    assert len(raw) == 60 and all(json.loads(line) for line in raw)


def test_main_writes_files(tmp_path, capsys):
    assert P.main([str(tmp_path), "--n-train", "30", "--n-eval-per-domain", "4"]) == 0
    assert (tmp_path / "train.jsonl").is_file() and (tmp_path / "eval.jsonl").is_file()
    assert "train: 30 prompts" in capsys.readouterr().out


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
