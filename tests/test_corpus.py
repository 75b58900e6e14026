"""Training corpus: the data sampler, Magpie-style prompts and their filters, answer shards, the feature cache."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import torch

from dspark_viz.model.toy import tiny_llama_target
from dspark_viz.train import corpus, magpie
from dspark_viz.train.data import FeatureStore, build_features, check_cache_dtype
from dspark_viz.train.sample import next_tokens, sample_rows


def test_next_tokens_greedy_and_exact_distribution():
    logits = torch.tensor([[0.0, 2.0, -1.0, 1.0]]).repeat(40_000, 1)               # (b, V)
    assert next_tokens(logits[:3], 0.0, torch.Generator()).tolist() == [1, 1, 1]
    g = torch.Generator().manual_seed(0)
    draws = next_tokens(logits, 0.7, g)
    freq = torch.bincount(draws, minlength=4).double() / len(draws)
    p = torch.softmax(logits[0].double() / 0.7, -1)
    se = (p * (1 - p) / len(draws)).sqrt()
    assert ((freq - p).abs() < 5 * se + 1e-9).all(), (freq, p)


@pytest.fixture(scope="module")
def toy():
    return tiny_llama_target(vocab_size=32, hidden_size=32, n_layers=3, eos=31)


def test_sample_rows_stops_and_keeps_rows_apart(toy):
    g = torch.Generator().manual_seed(0)
    out = sample_rows(toy, [[1, 2, 3], [4, 5]], 1.0, 20, g)
    assert len(out) == 2
    for r in out:
        assert 1 <= len(r) <= 20
        assert all(t not in toy.stop_ids for t in r[:-1])        # a stop token ends the row
    greedy = sample_rows(toy, [[1, 2, 3], [4, 5]], 0.0, 12, g)
    alone = sample_rows(toy, [[4, 5]], 0.0, 12, g)
    assert greedy[1] == alone[0]                                  # left padding does not change a row
    with pytest.raises(ValueError):
        sample_rows(toy, [[]], 1.0, 4, g)


def test_growing_cache_holds_what_a_dynamic_cache_holds():
    from transformers import DynamicCache

    from dspark_viz.model.cache import GrowingCache
    g = torch.Generator().manual_seed(0)
    grow, dyn = GrowingCache(), DynamicCache()
    for q in (5, 1, 1, 70, 1):                                    # past the first capacity (64), then doubling
        k, v = torch.randn(4, 2, q, 8, generator=g), torch.randn(4, 2, q, 8, generator=g)
        for c in (grow, dyn):
            kk, vv = c.update(k, v, 0)
        assert torch.equal(kk, dyn.layers[0].keys) and torch.equal(grow.layers[0].values, dyn.layers[0].values)
    keep = torch.tensor([0, 2, 3])
    grow.batch_select_indices(keep)
    dyn.batch_select_indices(keep)
    assert grow.get_seq_length() == dyn.get_seq_length() == 78
    assert torch.equal(grow.layers[0].keys, dyn.layers[0].keys)
    for c in (grow, dyn):                                         # a rejected draft: only the length moves back
        c.crop(-3)
    assert grow.get_seq_length() == dyn.get_seq_length() == 75
    assert torch.equal(grow.layers[0].keys, dyn.layers[0].keys) and torch.equal(grow.layers[0].values,
                                                                                dyn.layers[0].values)
    with pytest.raises(ValueError):
        grow.layers[0].crop(2)
    layer = grow.layers[0]                                        # an assigned tensor becomes the buffer, full
    layer.keys, layer.values = dyn.layers[0].keys.repeat(2, 1, 1, 1), dyn.layers[0].values.repeat(2, 1, 1, 1)
    assert layer.get_seq_length() == 75 and layer.keys.shape[0] == 6
    k1 = torch.randn(6, 2, 1, 8, generator=g)
    kk, _ = layer.update(k1, k1)
    assert kk.shape[-2] == 76 and torch.equal(kk[..., -1:, :], k1)


def test_sample_rows_do_not_depend_on_the_slot_count(toy):
    """Rows finishing at different steps, their slots refilled with the next prompts: one slot, three or
    sixteen give the same samples (each row's k-th uniform depends on its own seed and k only)."""
    prompts = [[1 + i, 2 + (i * 7) % 20, 3 + (i * 3) % 25][: 1 + i % 3] for i in range(16)]
    runs = [sample_rows(toy, prompts, 4.0, 40, torch.Generator().manual_seed(3), slots=s) for s in (1, 3, 16)]
    assert runs[0] == runs[1] == runs[2]
    lengths = {len(r) for r in runs[0]}
    assert len(lengths) > 3 and min(lengths) < 40            # rows did finish at different steps


def test_sample_stream_matches_the_padded_stock_forward(toy):
    """The ragged continuous-batching sampler and the left-padded Hugging Face batch draw the same tokens."""
    from dspark_viz.train import sample
    prompts = [[1 + i, 2 + (i * 7) % 20, 3 + (i * 3) % 25][: 1 + i % 3] for i in range(12)]
    items = [(i, p, 1000 + i) for i, p in enumerate(prompts)]
    fast = dict(sample.sample_stream(toy, items, 1.0, 24, slots=5))
    stock = dict(sample._padded_stream(toy, items, 1.0, 24, 12))
    assert fast == stock and len(fast) == 12


def test_uniforms_are_per_row_and_step():
    from dspark_viz.train.sample import uniforms
    seeds, steps = np.array([1, 2, 1, 7], np.uint64), np.array([0, 0, 0, 5], np.uint64)
    u = uniforms(seeds, steps)
    assert u.dtype == torch.float32 and u[0] == u[2] and u[0] != u[1]
    assert torch.equal(uniforms(seeds[3:], steps[3:]), u[3:])
    big = uniforms(np.arange(200_000, dtype=np.uint64), np.zeros(200_000, np.uint64))
    assert float(big.min()) >= 0 and float(big.max()) < 1 and abs(float(big.mean()) - 0.5) < 0.005


def test_clean_filters():
    assert magpie.clean("What is the sum of 17 and 25, and how do I check it?") is not None
    assert magpie.clean("too short") is None
    assert magpie.clean("Sure! Here is the answer you asked for, with all the details.") is None
    assert magpie.clean("Wie kann ich die Summe von zwei Zahlen in Python berechnen, bitte?") is None
    assert magpie.clean("Что такое рекурсия и как её использовать в Python для задач?") is None


def test_near_duplicates_and_contamination():
    nd = magpie.NearDuplicates()
    a = "Write a Python function that returns the largest number in a list of integers."
    assert not nd.seen(a)
    assert nd.seen("Write a Python function that returns the largest number in a list of integers!")
    assert not nd.seen("Explain how photosynthesis turns light into chemical energy in plants.")
    bench = ["Mira's hens lay 14 eggs per day. She cooks two for lunch every afternoon and sells the rest at noon."]
    c = magpie.Contamination(bench)
    assert c.hits("Tell me: mira's hens lay 14 eggs per day. She cooks two for lunch every day.")
    assert not c.hits("A farmer has 12 cows and buys 5 more. How many cows does the farmer have now?")


def test_plan_follows_the_mix():
    plan = magpie.plan_steers(40, 100, seed=1)
    doms = [d for batch in plan for d, _ in batch]
    for d, share in magpie.MIX.items():
        assert abs(doms.count(d) / len(doms) - share) < 0.03
    assert all(o in magpie.STEERS[d][1] for batch in plan for d, o in batch)


def test_filter_prompts_counts(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [{"domain": "math", "opening": "", "text": "How many apples are left if I eat 3 of 10 apples?", "closed": True},
            {"domain": "math", "opening": "", "text": "How many apples are left if I eat 3 of 10 apples?", "closed": True},
            {"domain": "code", "opening": "", "text": "Write a function that reverses a string in Python.", "closed": True},
            {"domain": "chat", "opening": "", "text": "Give me five ideas for a rainy weekend at home", "closed": False},
            {"domain": "chat", "opening": "", "text": "ok", "closed": True},
            {"domain": "chat", "opening": "", "text": "Write a cheerful diary entry about a rainy visit to the old "
             "harbour museum, mentioning three exhibits.", "closed": True}]
    with gzip.open(raw / "raw_00000.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    avoid = ["Write a cheerful diary entry about a rainy visit to the old harbour museum, mentioning three exhibits "
             "and must-see attractions."]
    counts = magpie.filter_prompts(raw, tmp_path / "suite.jsonl.gz", avoid)
    assert counts["generated"] == 6 and counts["kept"] == 2 and counts["duplicate"] == 1
    assert counts["unclosed"] == 1 and counts["filtered"] == 1 and counts["contaminated"] == 1
    recs = corpus.read_prompt_records(tmp_path / "suite.jsonl.gz")
    assert [r["domain"] for r in recs] == ["math", "code"] and all(r["source"] == "magpie" for r in recs)
    with pytest.raises(ValueError):
        magpie.filter_prompts(tmp_path / "none", tmp_path / "x.jsonl.gz")


def _toy_prompts(toy, tmp_path, n=10):
    p = tmp_path / "p.jsonl"
    rng = np.random.default_rng(0)
    p.write_text("".join(json.dumps({"turns": ["".join(rng.choice(list("abcdefgh"), 5))],
                                     "domain": ["math", "code", "chat"][i % 3]}) + "\n" for i in range(n)))
    return p


def test_answers_resume_and_read_back(toy, tmp_path):
    p = _toy_prompts(toy, tmp_path)
    out = tmp_path / "corpus"
    s1 = corpus.make_answers(toy, [p], out, token_budget=10, batch_size=4, max_new_tokens=16)
    assert s1["shards"] >= 1
    man = corpus.load_manifest(out)
    assert man["settings"]["temperature"] == 0.7 and man["settings"]["top_p"] == 1.0
    s2 = corpus.make_answers(toy, [p], out, token_budget=None, batch_size=4, max_new_tokens=16)
    assert s2["answers"] == 10 and s2["shards"] == 3                # resumed: the first shards kept
    assert corpus.load_manifest(out)["shards"][0] == man["shards"][0]
    recs = list(corpus.iter_corpus(out, finished_only=False))
    assert len(recs) == 10 and all(d in ("math", "code", "chat") for _, _, d in recs)
    fin = list(corpus.iter_corpus(out))
    assert len(fin) == s2["finished"] and all(a[-1] in toy.stop_ids for _, a, _ in fin)
    with pytest.raises(ValueError, match="other settings"):
        corpus.make_answers(toy, [p], out, token_budget=None, batch_size=4, max_new_tokens=16, temperature=1.0)
    assert 0.0 <= corpus.repeated_span_share(out, span=4) <= 1.0


def test_answers_follow_a_growing_prompt_file(toy, tmp_path):
    p = _toy_prompts(toy, tmp_path, n=12)
    lines = p.read_text().splitlines(keepends=True)
    p.write_text("".join(lines[:6]))
    out = tmp_path / "corpus"
    s1 = corpus.make_answers(toy, [p], out, token_budget=None, batch_size=4, max_new_tokens=8, max_shards=1)
    assert s1["answers"] == 4 and s1["unanswered"] == 2 and not s1["budget_met"]
    first = corpus.load_manifest(out)["shards"][0]
    p.write_text("".join(lines + lines[:3]))                          # grown, with repeats
    s2 = corpus.make_answers(toy, [p], out, token_budget=None, batch_size=4, max_new_tokens=8)
    assert s2["answers"] == 12 and s2["unanswered"] == 0              # every distinct prompt once
    assert corpus.load_manifest(out)["shards"][0] == first
    keys = [int(k) for sh in corpus.load_manifest(out)["shards"]
            for k in np.load(out / sh["file"])["key"]]
    want = {corpus.prompt_key(json.loads(x)["turns"][0]) for x in lines}
    assert sorted(keys) == sorted(want)
    # the seeded hash order: appending prompts never reorders the ones already there
    short = tmp_path / "short.jsonl"
    short.write_text("".join(lines[:6]))
    a = [r["key"] for r in corpus.prompt_order([short], seed=3)]
    b = [r["key"] for r in corpus.prompt_order([p], seed=3)]
    assert [k for k in b if k in set(a)] == a and a != [r["key"] for r in corpus.prompt_order([short], 4)]


def test_feature_cache_is_mapped_and_matches_a_forward(toy, tmp_path):
    p = _toy_prompts(toy, tmp_path, n=12)
    out = tmp_path / "corpus"
    corpus.make_answers(toy, [p], out, token_budget=None, batch_size=6, max_new_tokens=24, temperature=1.0)
    feat = build_features(toy, out, tmp_path / "feat", seqs_per_shard=4, finished_only=False)
    store = FeatureStore(feat)
    fin = list(corpus.iter_corpus(out, finished_only=False))
    usable = [r for r in fin if len(r[1]) >= 3]
    assert len(store.seqs) == len(usable)
    s, (pr, an, dom) = store.seqs[0], usable[0]
    assert s["ids"].tolist() == pr + an and s["prompt_len"] == len(pr) and s["domain"] == dom
    with torch.inference_mode():
        o = toy.model(input_ids=torch.tensor([pr + an]), output_hidden_states=True)
    want = torch.cat([o.hidden_states[l] for l in toy.feature_layers], -1)[0].half()
    assert torch.allclose(s["feats"].float(), want.float(), atol=2e-3)
    assert torch.allclose(s["lse"], torch.logsumexp(o.logits[0].float(), -1), atol=1e-4)
    idx = json.loads((feat / "index.json").read_text())
    assert idx["dtype"] == "fp32"                       # the forward's dtype, recorded
    check_cache_dtype(feat, "fp32")                     # same dtype: extending is allowed
    with pytest.raises(ValueError, match="computed in fp32; extend it with --dtype fp32"):
        check_cache_dtype(feat, "bf16")                 # one cache, one arithmetic
    idx["format"] = 1
    (feat / "index.json").write_text(json.dumps(idx))
    with pytest.raises(ValueError, match="older format"):
        FeatureStore(feat)


def test_corpus_cli_refuses_bad_settings(tmp_path, capsys):
    from dspark_viz.cli import main

    assert main(["corpus", "prompts", "--raw", str(tmp_path), "--batches", "0"]) == 2
    assert main(["corpus", "answers", "--prompts", "x.jsonl", "--out", str(tmp_path), "--token-budget", "0"]) == 2
    assert main(["corpus", "filter", "--raw", str(tmp_path / "none"), "--out", str(tmp_path / "s.jsonl.gz")]) == 2
    assert main(["corpus", "stats", "--out", str(tmp_path)]) == 2
    assert main(["data", "--prompts", "x.jsonl", "--dtype", "bf16", "--out", str(tmp_path / "f")]) == 2
    assert "error" in capsys.readouterr().err


def test_feature_cache_grows_with_max_seqs_without_a_gap(toy, tmp_path):
    """A cache built for the first 6 answers, then for the first 10, holds the first 10 in corpus order: the short
    last shard of the smaller build is rebuilt, not skipped."""
    p = _toy_prompts(toy, tmp_path, n=12)
    out = tmp_path / "corpus"
    corpus.make_answers(toy, [p], out, token_budget=None, batch_size=6, max_new_tokens=24, temperature=1.0)
    fin = list(corpus.iter_corpus(out, finished_only=False))
    feat = tmp_path / "feat"
    build_features(toy, out, feat, seqs_per_shard=4, finished_only=False, max_seqs=6)
    assert len(FeatureStore(feat).seqs) <= 6
    build_features(toy, out, feat, seqs_per_shard=4, finished_only=False, max_seqs=10)
    got = [s["ids"].tolist() for s in FeatureStore(feat).seqs]
    want = [pr + an for pr, an, _ in fin[:10] if len(an) >= 3]
    assert got == want
