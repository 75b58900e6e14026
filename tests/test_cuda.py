"""The library on a GPU: the checks a CUDA machine runs (tools/gpu_recipe.sh runs this file there); each is skipped
where torch sees no CUDA device. ``DSPARK_TEST_DEVICE=cpu`` runs the same checks on the CPU (the accelerator's
code paths forced), to try them before a GPU is at hand.

Legend: V vocabulary, T temperature.
"""
from __future__ import annotations

import os

import pytest
import torch

DEVICE = os.environ.get("DSPARK_TEST_DEVICE", "cuda")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="no CUDA device here")]

PROMPTS = ("What is 17 + 25?", "Write a haiku about rain.", "Name three primary colours.")


def _target(dtype: str):
    from dspark_viz.model.target import find_embedded_gguf, load_target
    try:
        find_embedded_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    return load_target(device=DEVICE, dtype=dtype)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_greedy_speculative_decoding_equals_plain_decoding_on_cuda(dtype):
    """Every shipped drafter at T = 0 gives plain decoding's tokens, on the GPU, at both dtypes."""
    from dspark_viz.decode import plain_generate, speculative_generate
    from dspark_viz.drafters import load_drafter
    t = _target(dtype)
    for name in ("dspark", "dflash", "eagle"):
        dr = load_drafter(name, t)
        for p in PROMPTS:
            plain = plain_generate(t, p, max_new_tokens=32, temperature=0).output_ids
            assert speculative_generate(t, dr, p, max_new_tokens=32, temperature=0).output_ids == plain, (name, p)


def test_the_ragged_forward_on_cuda_is_the_stock_forward():
    """Three prompts prefilled in one ragged call on the GPU (attend_grouped), then one decode row each: the stock
    forward's logits to within fp32 rounding."""
    from dspark_viz.fast import ragged
    t = _target("fp32")
    prompts = [t.chat_ids(p) for p in PROMPTS]
    fwd = ragged.RaggedForward(t)
    assert fwd.grouped == (DEVICE != "cpu")
    fwd.grouped = True
    cache = fwd.cache(len(prompts), 8)
    cache.reserve(max(map(len, prompts)) + 2)
    ids = torch.tensor([x for p in prompts for x in p])
    slot = torch.cat([torch.full((len(p),), s) for s, p in enumerate(prompts)])
    pos = torch.cat([torch.arange(len(p)) for p in prompts])
    pre = fwd(cache, ids, slot, pos, torch.arange(len(ids))).float()
    nxt = [11, 12, 13]
    dec = fwd(cache, torch.tensor(nxt), torch.arange(3), torch.tensor([len(p) for p in prompts]),
              torch.arange(3)).float()
    o = 0
    for s, p in enumerate(prompts):
        with torch.inference_mode():
            full = t.model(input_ids=torch.tensor([p + [nxt[s]]], device=DEVICE)).logits[0].float()
        got = torch.cat([pre[o:o + len(p)], dec[s:s + 1]])
        assert (got - full).abs().max() < 2e-3
        o += len(p)


def test_answers_on_cuda_follow_the_cpu_draws():
    """The corpus sampler on the GPU draws with the same per-row uniforms as on the CPU: at T = 0 its answers are
    greedy decoding's."""
    from dspark_viz.decode import plain_generate
    from dspark_viz.train.sample import sample_stream
    from dspark_viz.fast import ragged
    t = _target("fp32")
    ragged.forward_for(t).grouped = True
    items = [(i, t.chat_ids(p), i) for i, p in enumerate(PROMPTS)]
    got = dict(sample_stream(t, items, 0.0, max_new_tokens=24, slots=2))
    for i, p in enumerate(PROMPTS):
        plain = plain_generate(t, p, max_new_tokens=24, temperature=0).output_ids
        assert got[i] == plain[:len(got[i])] and len(got[i]) >= min(len(plain), 24)


def test_a_drafter_trains_on_cuda_from_token_ids(tmp_path):
    """A few steps of the trainer on the GPU with features computed online: finite losses, a drafter written."""
    import json

    from dspark_viz.train import corpus
    from dspark_viz.train.cards import device_name
    from dspark_viz.train.config import TrainConfig
    from dspark_viz.train.online import CorpusFeatures
    from dspark_viz.train.trainer import train
    t = _target("fp32")
    p = tmp_path / "p.jsonl"
    p.write_text("".join(json.dumps({"turns": [x]}) + "\n" for x in PROMPTS * 4))
    corpus.make_answers(t, [p], tmp_path / "c", token_budget=None, batch_size=4, max_new_tokens=48, temperature=1.0,
                        slots=8)
    store = CorpusFeatures(_target("bf16"), tmp_path / "c", finished_only=False)
    assert store.feature_batch == (8 if DEVICE == "cpu" else 64)
    out = tmp_path / "d.json"
    train(t, "dspark", None, tmp_path / "run", out, TrainConfig(steps=4, seqs_per_step=2, blocks_per_seq=8,
                                                                ckpt_every=4, compile="off"), store=store)
    card = json.loads(out.read_text())
    assert card["train"]["steps"] == 4 and card["train"]["device"] == device_name(torch.device(DEVICE))
    assert all(torch.isfinite(torch.tensor(v)) for v in card["val"].values() if isinstance(v, float))
