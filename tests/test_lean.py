"""The lean decoder-layer forward (lean.py): bit-identical to transformers' layers where it runs, stock elsewhere."""
from __future__ import annotations

import pytest
import torch

from dspark_viz.fast import kernels, lean


def _forward(t, ids, new, **kw):
    cache, _ = t.prefill(ids)
    return t.forward(torch.tensor([new]), cache, features=True, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 11])
def test_logits_and_features_equal_stock_layers(real_target, n):
    t = real_target
    if t.paths.layers != "lean":
        pytest.skip(f"target layers: {t.paths.layers}")
    ids = t.chat_ids("Name three colours.")
    new = [1000 + 37 * i for i in range(n)]
    with lean.unfused(t.model):                          # the Python lean forward; fused: see below
        fast = _forward(t, ids, new)
    with lean.stock_layers(t.model):
        stock = _forward(t, ids, new)
    assert torch.equal(fast.logits, stock.logits) and torch.equal(fast.features, stock.features)
    assert "forward" in t.model.model.layers[0].__dict__              # reinstalled after the block


@pytest.mark.slow
def test_lean_path_runs_and_steps_aside(real_target, monkeypatch):
    """1–8 rows (decode steps and verification blocks) take the lean forward in every layer; prefill keeps
    the stock one."""
    t = real_target
    if t.paths.layers != "lean":
        pytest.skip(f"target layers: {t.paths.layers}")
    calls = {"n": 0}
    norm = lean._norm

    def counting(*a):
        calls["n"] += 1
        return norm(*a)

    monkeypatch.setattr(lean, "_norm", counting)
    cache, _ = t.prefill(t.chat_ids("Hi."))           # prefill: stock
    assert calls["n"] == 0
    with lean.unfused(t.model):
        t.forward(torch.tensor([[11]]), cache)            # 1 row: lean, two norms per layer
        assert calls["n"] == 2 * t.n_layers
        t.forward(torch.tensor([[12, 13, 14]]), cache)    # 3 rows: lean
    assert calls["n"] == 4 * t.n_layers


def test_switch_off_and_shape_checks(monkeypatch):
    monkeypatch.setenv("DSPARK_LEAN_LAYERS", "0")
    assert not lean.enabled()
    assert not lean.install(torch.nn.Linear(2, 2), ext=object())           # off by env: nothing installed
    monkeypatch.delenv("DSPARK_LEAN_LAYERS")
    assert not lean._fits(torch.nn.Linear(2, 2))                            # not a decoder layer


# -- the fused (native two-call) layer ---------------------------------------------------------------
def _tiny_llama(dtype, seed=0):
    """A 2-layer random Llama (GQA 4/2 heads, head size 16) with the target's fast paths installed."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from dspark_viz.fast import attention, kernels

    ext = kernels.load()
    if ext is None or not hasattr(ext, "layer_qkv"):
        pytest.skip("kernel extension not built on this machine")
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).eval().to(dtype)
    with torch.no_grad():                                   # larger-than-init weights: visible activations
        for p_ in model.parameters():
            p_.mul_(4.0) if p_.dim() == 2 else p_.uniform_(0.5, 1.5)
    kernels.patch_linears(model, ext)
    assert attention.install(model) and lean.install(model, ext)
    return model, ext


def _logits(model, ctx, new):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([ctx]), cache=cache, use_cache=True)
        return model(input_ids=torch.tensor([new]), cache=cache, use_cache=True).logits.float()


@pytest.mark.parametrize("dtype,rel", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_fused_layers_agree_with_stock_layers(dtype, rel, n):
    """fp32: the same function up to summation order (≈ 1e-7 relative). bf16: the same rounding points as
    transformers, so the gap is a few bf16 steps (2⁻⁸ relative each) where a summation order tips one.
    n = 1: a decode step, which transformers sends without a mask (every cached key visible). The 80-token
    context is a prefill (more than 64 rows): the stock layers."""
    model, ext = _tiny_llama(dtype)
    assert lean.fused(model)
    ctx, new = [int(i) for i in torch.randint(0, 97, (80,))], [int(i) for i in torch.randint(0, 97, (n,))]
    calls = {"n": 0}
    real = ext.layer_rest

    def counting(*a):
        calls["n"] += 1
        return real(*a)

    ext.layer_rest = counting
    try:
        fused = _logits(model, ctx, new)
    finally:
        ext.layer_rest = real
    assert calls["n"] == 2                                   # both layers took the native path
    with lean.stock_layers(model):
        stock = _logits(model, ctx, new)
    with lean.unfused(model):
        assert torch.equal(_logits(model, ctx, new), stock)  # the Python lean forward stays bit-identical
    scale = float(stock.abs().max())
    assert float((fused - stock).abs().max()) <= rel * scale
    assert lean.fused(model)                                 # unfused() restored the switch


def test_fused_path_only_for_one_plain_causal_sequence():
    ok = torch.ones(3, 7, dtype=torch.bool).tril(4)[None, None]                       # (1, 1, 3, 7)
    assert lean._plain_causal(ok, 3)
    assert not lean._plain_causal(ok, 2)                                                # another block size
    padded = ok.clone()
    padded[..., 0] = False                                                              # a padded first key
    assert not lean._plain_causal(padded, 3)
    assert not lean._plain_causal(None, 3) and not lean._plain_causal(ok.float(), 3)
    assert not lean._plain_causal(ok.expand(2, 1, 3, 7), 3)                             # a batch of two


def test_fused_switch_off(monkeypatch):
    monkeypatch.setenv("DSPARK_FUSED_LAYERS", "0")
    model, _ = _tiny_llama(torch.float32)
    assert not lean.fused(model)


@pytest.mark.slow
def test_fused_target_forward_agrees_with_stock(real_target):
    """The embedded target (fp32): fused verification logits within 1e-4 of the stock layers."""
    t = real_target
    if t.paths.layers != "lean" or not lean.fused(t.model):
        pytest.skip("fused layers not in use")
    ids, new = t.chat_ids("Name three colours."), [1000 + 37 * i for i in range(4)]
    fused = _forward(t, ids, new)
    with lean.stock_layers(t.model):
        stock = _forward(t, ids, new)
    assert float((fused.logits - stock.logits).abs().max()) < 1e-3
    assert torch.allclose(fused.features, stock.features, rtol=1e-4, atol=1e-3)


def test_sliding_window_model_stays_correct():
    """A Mistral with a small sliding window: its mask is not one sequence's plain causal mask once the context
    passes the window, so the fused path steps aside (or, on a trimming cache, finishes in Python)."""
    from transformers import MistralConfig, MistralForCausalLM

    from dspark_viz.fast import attention, kernels

    ext = kernels.load()
    if ext is None or not hasattr(ext, "layer_qkv"):
        pytest.skip("kernel extension not built on this machine")
    torch.manual_seed(1)
    cfg = MistralConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
                        sliding_window=16, attn_implementation="sdpa")
    model = MistralForCausalLM(cfg).eval()
    kernels.patch_linears(model, ext)
    assert attention.install(model) and lean.install(model, ext)
    for n_ctx in (10, 37):                              # inside the window (fused) and past it (Python path)
        for new in ([5, 7, 11], [5]):                   # a block, and a one-token step (no mask inside the window)
            ctx = [int(i) for i in torch.randint(0, 97, (n_ctx,))]
            fast = _logits(model, ctx, new)
            with lean.stock_layers(model):
                stock = _logits(model, ctx, new)
            assert float((fast - stock).abs().max()) <= 1e-5 * float(stock.abs().max())


def test_native_layer_rejects_misfitting_arguments():
    from dspark_viz.fast import kernels

    ext = kernels.load()
    if ext is None or not hasattr(ext, "layer_qkv"):
        pytest.skip("kernel extension not built on this machine")
    d, H, Hk, D, F, M, S = 64, 4, 2, 16, 96, 3, 10
    x, ln = torch.randn(1, M, d), torch.ones(d)
    cos = sin = torch.randn(1, M, D)
    Wq, Wk = torch.randn(H * D, d), torch.randn(Hk * D, d)
    q, k, v = ext.layer_qkv(x, ln, 1e-5, Wq, Wk, Wk.clone(), cos, sin, H, Hk)
    assert q.shape == (1, H, M, D) and k.shape == v.shape == (1, Hk, M, D)
    with pytest.raises(RuntimeError, match="inner sizes"):
        ext.layer_qkv(x, ln, 1e-5, torch.randn(H * D, d + 8), Wk, Wk, cos, sin, H, Hk)
    with pytest.raises(RuntimeError, match="one dtype"):
        ext.layer_qkv(x.bfloat16(), ln, 1e-5, Wq, Wk, Wk, cos, sin, H, Hk)
    K = V = torch.randn(1, Hk, S, D)
    Wo, Wg, Wd = torch.randn(d, H * D), torch.randn(F, d), torch.randn(d, F)
    assert ext.layer_rest(x, q, K, V, 0.25, Wo, ln, 1e-5, Wg, Wg.clone(), Wd).shape == (1, M, d)
    with pytest.raises(RuntimeError, match="MLP shapes"):
        ext.layer_rest(x, q, K, V, 0.25, Wo, ln, 1e-5, Wg, Wg, torch.randn(d, F + 8))
    with pytest.raises(RuntimeError, match="S ≥ M"):
        ext.layer_rest(x, q, K[:, :, :2], V[:, :, :2], 0.25, Wo, ln, 1e-5, Wg, Wg, Wd)


@pytest.mark.parametrize("dtype,rel", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("gamma", [1, 4, 8])
def test_native_draft_block_agrees_with_the_torch_layers(dtype, rel, gamma):
    """A parallel drafter's inference block (every row sees the context and the whole block) through the two native
    calls per layer agrees with the torch layers under an all-visible mask, to within the dtype's rounding."""
    from dspark_viz.drafters.backbone import ParallelBackbone

    ext = kernels.load()
    if ext is None:
        pytest.skip("the native extension is not available here")
    torch.manual_seed(0)
    bb = ParallelBackbone(d=64, m=2, n_layers=2, n_heads=4, n_kv=2, head_dim=16, d_ff=128, eps=1e-5,
                          rope_theta=10000.0)
    with torch.no_grad():
        for p_ in bb.parameters():
            p_.normal_(0, 0.3) if p_.dim() == 2 else p_.uniform_(0.5, 1.5)
    bb = bb.to(dtype).eval()
    n = 23
    with torch.inference_mode():
        ctx_kv = bb.context_kv(bb.fuse(torch.randn(n, 128, dtype=dtype)))
        x, pos = torch.randn(gamma, 64, dtype=dtype), torch.arange(n, n + gamma)
        assert bb.native_applies(ext, x)
        native = bb.forward_block(x, n, ctx_kv, ext).float()
        torch_ = bb(x, pos, ctx_kv, torch.ones(gamma, n + gamma, dtype=torch.bool)).float()
        assert torch.equal(bb.forward_block(x, n, ctx_kv, None).float(), torch_)    # no extension: torch's
    assert float((native - torch_).abs().max()) <= rel * float(torch_.abs().max())
    with torch.inference_mode():                                                     # rows see the whole block:
        flipped = bb.forward_block(x.flip(0), n, ctx_kv, ext).float()              # a later row changes row 0
    assert not torch.allclose(flipped[0], native[-1]) or gamma == 1


def test_native_draft_block_steps_aside(monkeypatch):
    from dspark_viz.drafters.backbone import ParallelBackbone

    ext = kernels.load()
    if ext is None:
        pytest.skip("the native extension is not available here")
    bb = ParallelBackbone(d=64, m=2, n_layers=1, n_heads=4, n_kv=2, head_dim=16, d_ff=128, eps=1e-5,
                          rope_theta=10000.0)
    x = torch.randn(4, 64)
    assert not bb.native_applies(ext, x)                     # autograd on: training takes the torch layers
    with torch.inference_mode():
        assert not bb.native_applies(None, x)
        assert not bb.native_applies(ext, torch.randn(65, 64))                         # more than 64 rows
        assert not bb.native_applies(ext, x.double())
    from dspark_viz import fast

    assert fast.layer_extension(fast.RowProduct(ext)) is ext and fast.layer_extension(fast.RowProduct()) is None
    monkeypatch.setenv("DSPARK_FUSED_LAYERS", "0")
    assert fast.layer_extension(fast.RowProduct(ext)) is None                          # the switch turns it off


@pytest.mark.parametrize("dtype,rel", [(torch.float32, 1e-6), (torch.bfloat16, 2.0 ** -6)])
def test_final_norm_native_agrees_with_transformers_and_keeps_each_row(dtype, rel):
    """The lean final norm (``rms_norm_rows``): transformers' LlamaRMSNorm up to the RMS mean's summation order, the
    same bits for a row alone or among 8, installed with the fused layers and switched off with them."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    model, ext = _tiny_llama(dtype)
    torch.manual_seed(1)
    norm = LlamaRMSNorm(64, eps=1e-5).to(dtype)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = (4 * torch.randn(1, 8, 64)).to(dtype)
    with torch.no_grad():
        got, ref = ext.rms_norm_rows(x, norm.weight, norm.variance_epsilon), norm(x)
    assert float((got.float() - ref.float()).abs().max()) <= rel * float(ref.float().abs().max())
    for m in range(8):
        assert torch.equal(ext.rms_norm_rows(x[:, m:m + 1].contiguous(), norm.weight, 1e-5), got[:, m:m + 1])
    with pytest.raises(RuntimeError, match="rms_norm_rows"):
        ext.rms_norm_rows(torch.randn(1, 2, 60).to(dtype), torch.ones(60).to(dtype), 1e-5)
    final = model.model.norm
    assert "forward" in final.__dict__ and final.__dict__["forward"].state["fused"]
    h = (4 * torch.randn(1, 3, 64)).to(dtype)
    with torch.inference_mode():
        assert torch.equal(final.forward(h), ext.rms_norm_rows(h, final.weight, final.variance_epsilon))
        with lean.unfused(model):                       # the bit-identical path: transformers' own norm
            assert torch.equal(final.forward(h), type(final).forward(final, h))
        with lean.stock_layers(model):
            assert "forward" not in final.__dict__
    assert final.__dict__["forward"].state["fused"]


def test_stack_plan_checks_its_weights():
    """StackPlan checks the weights once, at construction: a layer whose shapes do not fit is refused."""
    model, ext = _tiny_llama(torch.float32)
    if not hasattr(ext, "StackPlan"):
        pytest.skip("the extension's StackPlan is not available here")
    ws, n = [], len(model.model.layers)
    for l in model.model.layers:
        at, mlp = l.self_attn, l.mlp
        ws += [l.input_layernorm.weight, at.q_proj.weight, at.k_proj.weight, at.v_proj.weight, at.o_proj.weight,
               l.post_attention_layernorm.weight, mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight]
    args = ([1e-5] * n, [1e-5] * n, [0.25] * n, [4] * n, [2] * n)
    assert ext.StackPlan(ws, *args).n_layers() == n
    bad = list(ws)
    bad[8] = torch.randn(64, 88)                                      # down-projection of another MLP width
    with pytest.raises(RuntimeError, match="weight shapes"):
        ext.StackPlan(bad, *args)
    with pytest.raises(RuntimeError, match="head counts"):
        ext.StackPlan(ws, *args[:3], [3] * n, [2] * n)
