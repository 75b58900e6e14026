"""The straight-line model forward (fast/stack.py) computes what ``model(...)`` computes: for every few-token width,
at fp32 and bf16, the same logits, hidden states and cache contents, bit for bit.

Legend: n new tokens, V vocabulary, d hidden size, L decoder layers.
"""
from __future__ import annotations

import pytest
import torch
from conftest import embedded_target

from dspark_viz.fast import lean, stack

pytestmark = pytest.mark.slow                        # the embedded target, at two dtypes

NEW = [1000 + 611 * i for i in range(8)]


@pytest.fixture(scope="module", params=["fp32", "bf16"])
def target(request):
    t = embedded_target(request.param, tune_paths=False)
    if stack.layer_forwards(t.model) is None:
        pytest.skip(f"no lean layers here (layers: {t.paths.layers})")
    return t


@torch.inference_mode()
def _hf(t, cache, ids):
    out = t.model(input_ids=ids, cache=cache, use_cache=True, output_hidden_states=True, logits_to_keep=0)
    return out.logits, out.hidden_states


@torch.inference_mode()
def _ours(t, cache, ids):
    assert stack.applies(t.model, ids, cache, {})
    return stack.forward(t.model, ids, cache, True, False)


@pytest.mark.parametrize("fused", [True, False])
def test_stack_forward_equals_the_model_at_every_width(target, fused):
    """Logits (1, n, V), the L + 1 hidden states (1, n, d) and the keys/values written: torch.equal, n = 1 … 8,
    on the fused layers (the stack calls their native functions itself) and on the Python lean layers."""
    t = target
    prompt = t.chat_ids("Name three prime numbers.")
    cache, _ = t.prefill(prompt)
    P = len(prompt)
    ctx = lean.unfused(t.model) if not fused else torch.no_grad()
    with ctx, torch.inference_mode():
        plan = stack._native_plan(t.model, stack.layer_forwards(t.model))
        assert (plan is not None) == (fused and lean.fused(t.model))    # fused: the layers as their native calls
        for n in range(1, 9):
            ids = torch.tensor([NEW[:n]])
            t.crop(cache, P)
            ref_logits, ref_hs = _hf(t, cache, ids)
            ref_k = cache.layers[-1].keys.clone()
            t.crop(cache, P)
            logits, hs = _ours(t, cache, ids)
            assert torch.equal(logits, ref_logits), n
            assert len(hs) == len(ref_hs) == t.n_layers + 1
            assert all(torch.equal(a, b) for a, b in zip(hs, ref_hs)), n
            assert torch.equal(cache.layers[-1].keys, ref_k), n
            t.crop(cache, P)
            l1, _ = stack.forward(t.model, ids, cache, False, True)
            assert torch.equal(l1, ref_logits[:, -1:]), n


@torch.inference_mode()
def test_target_forward_takes_the_stack_only_where_it_applies(target):
    """A batch, an explicit mask, an empty cache, 65 tokens, autograd or the stock path go through ``model(...)``."""
    t = target
    cache = t.new_cache()
    ids = torch.tensor([NEW[:2]])
    assert not stack.applies(t.model, ids, cache, {})                       # empty cache: prefill
    cache, _ = t.prefill(t.chat_ids("Hi"))
    assert stack.applies(t.model, ids, cache, {})
    assert not stack.applies(t.model, ids, cache, {"attention_mask": torch.ones(1, 10)})
    assert not stack.applies(t.model, torch.tensor([NEW[:2], NEW[2:4]]), cache, {})
    assert stack.applies(t.model, torch.tensor([NEW + NEW[:1]]), cache, {})       # 9 tokens: a block
    assert not stack.applies(t.model, torch.tensor([NEW * 8 + NEW[:1]]), cache, {})   # 65 tokens: prefill
    with torch.inference_mode(False), torch.enable_grad():
        assert not stack.applies(t.model, ids, cache, {})
    with lean.stock_layers(t.model):
        assert stack.layer_forwards(t.model) is None


@torch.inference_mode()
def test_all_layers_in_one_native_call_equal_the_calls_one_by_one(target):
    """``StackPlan.step`` (every layer in one call, keys and values written into the cache's buffers) against each
    layer's two native calls from Python with the cache's own append: logits, hidden states, cache, bit for bit,
    at every width and past the cache's first capacity."""
    t = target
    plan = stack._native_plan(t.model, stack.layer_forwards(t.model))
    if plan is None or plan[2] is None:
        pytest.skip("the fused layers or the extension's StackPlan are not available here")
    key, kept = t.model.__dict__["_dspark_plan"]
    prompt = t.chat_ids("Name three prime numbers.") + NEW * 7              # ≈ 80 positions: the first capacity is 64
    P = len(prompt)
    runs = []
    try:
        for whole in (kept, (kept[0], kept[1], None)):
            t.model.__dict__["_dspark_plan"] = (key, whole)
            cache, _ = t.prefill(prompt)
            got = []
            for n in range(1, 9):
                t.crop(cache, P)
                logits, hs = stack.forward(t.model, torch.tensor([NEW[:n]]), cache, True, False)
                got.append((logits, hs, cache.layers[3].keys.clone(), cache.layers[-1].values.clone()))
            runs.append(got)
    finally:
        t.model.__dict__["_dspark_plan"] = (key, kept)
    for (l1, h1, k1, v1), (l2, h2, k2, v2) in zip(*runs):
        assert torch.equal(l1, l2) and torch.equal(k1, k2) and torch.equal(v1, v2)
        assert all(torch.equal(a, b) for a, b in zip(h1, h2))


@torch.inference_mode()
def test_rotary_table_rows_equal_the_module_forward(target):
    """cos / sin of positions far past the table's first capacity equal the rotary module's own forward."""
    rot = target.model.model.rotary_emb
    x = torch.zeros(1, 1, target.model.config.hidden_size, dtype=target.dtype)
    for P, n in ((0, 1), (17, 8), (300, 3), (1500, 1)):
        want = rot.forward(x, (torch.arange(n) + P).unsqueeze(0))
        got = stack._rotary(rot, x, P, n)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (P, n)
