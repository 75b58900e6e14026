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
    """A batch, an explicit mask, an empty cache, 9 tokens, autograd or the stock path go through ``model(...)``."""
    t = target
    cache = t.new_cache()
    ids = torch.tensor([NEW[:2]])
    assert not stack.applies(t.model, ids, cache, {})                       # empty cache: prefill
    cache, _ = t.prefill(t.chat_ids("Hi"))
    assert stack.applies(t.model, ids, cache, {})
    assert not stack.applies(t.model, ids, cache, {"attention_mask": torch.ones(1, 10)})
    assert not stack.applies(t.model, torch.tensor([NEW[:2], NEW[2:4]]), cache, {})
    assert not stack.applies(t.model, torch.tensor([NEW + NEW[:1]]), cache, {})   # 9 tokens: not few-token
    with torch.inference_mode(False), torch.enable_grad():
        assert not stack.applies(t.model, ids, cache, {})
    with lean.stock_layers(t.model):
        assert stack.layer_forwards(t.model) is None
