"""Training from token ids: features computed inside the training step equal the feature cache's, and a drafter
trains on them without a cache."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from dspark_viz.model.toy import tiny_llama_target
from dspark_viz.train import corpus
from dspark_viz.train.config import TrainConfig
from dspark_viz.train.data import FeatureStore, build_features
from dspark_viz.train.online import CorpusFeatures, cache_bytes, with_features
from dspark_viz.train.trainer import batch_loss, train


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("online")
    toy = tiny_llama_target(vocab_size=32, hidden_size=32, n_layers=3, eos=31)
    rng = np.random.default_rng(0)
    p = tmp / "p.jsonl"
    p.write_text("".join(json.dumps({"turns": ["".join(rng.choice(list("abcdefgh"), 5))],
                                     "domain": ["math", "code", "chat"][i % 3]}) + "\n" for i in range(14)))
    out = tmp / "corpus"
    corpus.make_answers(toy, [p], out, token_budget=None, batch_size=7, max_new_tokens=24, temperature=1.0)
    feat = build_features(toy, out, tmp / "feat", seqs_per_shard=4, finished_only=False)
    return toy, out, FeatureStore(feat), tmp


def test_online_features_equal_the_cache(made):
    toy, out, store, _ = made
    online = CorpusFeatures(toy, out, finished_only=False)
    assert [s["ids"].tolist() for s in online.seqs] == [s["ids"].tolist() for s in store.seqs]
    assert [s["prompt_len"] for s in online.seqs] == [s["prompt_len"] for s in store.seqs]
    assert online.n_tokens() == store.n_tokens()
    assert [s["id"] for s in online.split()[1]] == [f"corpus:{store.seqs.index(s)}" for s in store.split()[1]]
    got = with_features(online.seqs[:5])
    assert "feats" not in online.seqs[0]                          # computed for the step, not kept
    for g, c in zip(got, store.seqs[:5]):
        assert g["feats"].dtype == c["feats"].dtype == torch.float16 and g["lse"].dtype == torch.float32
        assert torch.allclose(g["feats"].float(), c["feats"].float(), atol=2e-3)
        assert torch.allclose(g["hidden"].float(), c["hidden"].float(), atol=2e-3)
        assert torch.allclose(g["lse"], c["lse"], atol=1e-4)
    assert with_features(store.seqs[:3]) is not None and with_features(store.seqs[:3])[0] is store.seqs[0]


def test_a_drafter_trains_online_and_the_loss_matches_the_cache(made):
    toy, out, store, tmp = made
    online = CorpusFeatures(toy, out, finished_only=False)
    tc = TrainConfig(steps=3, blocks_per_seq=3, seqs_per_step=2, ckpt_every=3, warmup=1, compile="off",
                     precision="fp32")
    over = dict(draft_vocab=24, rank=8, gamma=4)
    ck = train(toy, "dspark", None, tmp / "run", tmp / "d.json", tc, cfg_overrides=over, store=online,
               log=lambda *_: None)
    state = torch.load(ck, weights_only=True)
    assert state["step"] == 3 and state["positions"] > 0
    card = json.loads((tmp / "d.json").read_text())
    assert card["train"]["data_sequences"] == len(online.split()[0]) and card["val"]
    from dspark_viz.drafters.config import DrafterConfig
    from dspark_viz.drafters.neural import build_model
    from dspark_viz.train.vocab import build_draft_vocab
    cfg = DrafterConfig.for_target(toy, "dspark", **over)
    torch.manual_seed(0)
    m = build_model(cfg, toy, build_draft_vocab(store.seqs, 24))
    with torch.no_grad():
        a = batch_loss(m, online.seqs[:4], tc, torch.Generator().manual_seed(5))[0]
        b = batch_loss(m, store.seqs[:4], tc, torch.Generator().manual_seed(5))[0]
    assert torch.allclose(a, b, rtol=1e-3, atol=1e-4)


def test_online_refuses_another_targets_corpus_and_sizes_the_cache(made):
    toy, out, _, _ = made
    other = tiny_llama_target(vocab_size=40, hidden_size=32, n_layers=3, eos=39)
    with pytest.raises(ValueError, match="made by another target"):
        CorpusFeatures(other, out)
    with pytest.raises(ValueError, match="manifest.json missing"):
        CorpusFeatures(toy, out / "nowhere")
    per = 2 * len(toy.feature_layers) * toy.hidden_size + 2 * toy.hidden_size + 8
    assert cache_bytes(toy, 1000) == 1000 * per


def test_train_cli_reads_the_cache_where_there_is_one_and_refuses_without_data(made, tmp_path):
    import argparse

    from dspark_viz.cli.train import online_store
    toy, _, store, _ = made
    a = argparse.Namespace(features="auto", corpus=str(tmp_path / "none"), target=None, max_seqs=None)
    assert online_store(a, store.feat_dir, toy) is None                    # a cache exists: it is read
    with pytest.raises(ValueError, match="no feature cache at .* and no corpus at"):
        online_store(a, tmp_path / "empty", toy)
    a.features = "online"
    with pytest.raises(ValueError, match="no corpus at"):
        online_store(a, store.feat_dir, toy)


def test_several_corpora_train_as_one_and_the_feature_batch_is_kept(made):
    toy, out, _, _ = made
    one = CorpusFeatures(toy, out, finished_only=False)
    two = CorpusFeatures(toy, [out, out], finished_only=False, feature_batch=3)
    assert [s["ids"].tolist() for s in two.seqs] == [s["ids"].tolist() for s in one.seqs] * 2
    assert len({s["id"] for s in two.seqs}) == len(two.seqs) and two.feature_batch == 3
    assert one.feature_batch == 8                                          # a CPU target's default
    got = with_features(two.seqs[:7])
    assert all(torch.equal(a["ids"], b["ids"]) and "feats" in a for a, b in zip(got, two.seqs[:7]))
    with pytest.raises(ValueError, match="feature_batch"):
        CorpusFeatures(toy, out, feature_batch=-1)


def test_a_run_fits_its_steps_to_its_minutes(made):
    from dspark_viz.train.schedule import fitted_steps
    tc = TrainConfig(steps=1000)
    assert fitted_steps(tc, 1.0, seconds_so_far=10, seconds_per_step=0.5, done=12) == 12 + 100
    assert fitted_steps(tc, 100.0, seconds_so_far=10, seconds_per_step=0.5, done=12) == 1000     # at most steps
    assert fitted_steps(tc, 0.1, seconds_so_far=10, seconds_per_step=0.5, done=12) == 12          # over already
    toy, out, _, tmp = made
    online = CorpusFeatures(toy, out, finished_only=False)
    tc = TrainConfig(steps=400, blocks_per_seq=2, seqs_per_step=1, ckpt_every=1000, warmup=1, compile="off",
                     precision="fp32")
    said = []
    train(toy, "dflash", None, tmp / "fit", tmp / "fit.json", tc, cfg_overrides=dict(draft_vocab=24, gamma=4),
          store=online, log=said.append, fit_minutes=0.01)
    card = json.loads((tmp / "fit.json").read_text())
    assert 12 <= card["train"]["steps"] < 400 and card["train"]["recipe"]["steps"] == card["train"]["steps"]
    assert card["train"]["fitted_to_minutes"] == 0.01 and any("fit" in x for x in said)
    state = torch.load(tmp / "fit" / "ckpt.pt", weights_only=True)
    assert state["schedule_steps"] == card["train"]["steps"]


def test_fit_minutes_is_for_one_drafter(capsys):
    from dspark_viz.cli import main
    for bad in (["--algo", "dspark,dflash", "--fit-minutes", "1"], ["--algo", "dspark", "--fit-minutes", "0"]):
        assert main(["train", *bad]) == 2
        assert "sets one drafter's step count" in capsys.readouterr().err


def test_position_decay_reaches_the_recipe_and_bad_values_are_refused(capsys, made):
    from dspark_viz.cli import main
    assert main(["train", "--algo", "dspark", "--position-decay", "0"]) == 2
    assert "--position-decay must be > 0" in capsys.readouterr().err
    from dspark_viz.train.losses import position_weights
    w7, w4 = position_weights(7), position_weights(7, 4.0)
    assert torch.allclose(w4 / w4.sum(), torch.exp(-torch.arange(1, 8) / 4.0) / torch.exp(-torch.arange(1, 8) / 4.0).sum())
    assert w7[0] == w4[0] == 1 and w7[-1] > w4[-1]                 # the paper's fall more slowly over the block


def test_a_corpus_with_nothing_to_train_on_is_refused_with_the_way_out(made, tmp_path):
    """Answers all cut at the length limit: finished-only training says so and names --unfinished, which trains
    on them."""
    toy, _, _, tmp = made
    p = tmp_path / "p.jsonl"
    p.write_text("".join(json.dumps({"turns": [w], "domain": "chat"}) + "\n" for w in ("abcab", "hgfed", "aabbc")))
    cut = tmp_path / "cut"
    corpus.make_answers(toy, [p], cut, token_budget=None, batch_size=3, max_new_tokens=6, temperature=1.0)
    if corpus.summary(corpus.load_manifest(cut))["finished"]:
        pytest.skip("a toy answer ended on the stop token within 6 tokens")
    with pytest.raises(ValueError, match="--unfinished"):
        CorpusFeatures(toy, cut)
    assert len(CorpusFeatures(toy, cut, finished_only=False).seqs) == 3
