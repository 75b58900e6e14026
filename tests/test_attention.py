"""Packed grouped-query attention (attention.py): same logits as transformers' SDPA, where it applies."""
import torch
import torch.nn.functional as F

from dspark_viz.fast import attention, lean
from dspark_viz.model.toy import tiny_llama_target


def _target():
    t = tiny_llama_target(vocab_size=48, hidden_size=64, n_layers=4)
    assert t.model.config.num_attention_heads != t.model.config.num_key_value_heads   # a GQA model
    return t


def _logits(t, ids, split, q):
    cache, _ = t.prefill(ids[0, :split].tolist())
    return t.forward(ids[:, split:split + q], cache).logits                               # (1, q, V)


def test_installed_on_cpu_targets_and_off_by_env(monkeypatch):
    t = _target()
    assert t.paths.attention == "packed-gqa"
    assert t.model.config._attn_implementation == attention.NAME
    monkeypatch.setenv("DSPARK_PACKED_GQA", "0")
    assert _target().paths.attention == "sdpa"


def test_same_logits_as_sdpa_for_every_block_size():
    t = _target()
    ids = torch.randint(0, 48, (1, 40), generator=torch.Generator().manual_seed(0))
    packed = {q: _logits(t, ids, 25, q) for q in range(1, 12)}
    attention.uninstall(t.model)
    for q, out in packed.items():
        ref = _logits(t, ids, 25, q)
        assert torch.allclose(out, ref, atol=1e-5, rtol=1e-5), q


def test_packed_path_runs_without_repeating_the_cache(monkeypatch):
    """1–8 query tokens reach SDPA with the key/value heads as they are (no repeat_kv copy);
    prefill-sized forwards take transformers' own route."""
    t = _target()
    H, Hk = t.model.config.num_attention_heads, t.model.config.num_key_value_heads
    seen = []
    orig = F.scaled_dot_product_attention

    def spy(q, k, v, **kw):
        seen.append((q.shape, k.shape))
        return orig(q, k, v, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)      # every SDPA call, ours and transformers'
    ids = torch.randint(0, 48, (1, 40), generator=torch.Generator().manual_seed(1))
    for q in (1, 2, 5, 8, 12):
        cache, _ = t.prefill(ids[0, :20].tolist())
        seen.clear()
        with lean.unfused(t.model):                                  # fused layers attend natively, no SDPA
            t.forward(ids[:, 20:20 + q], cache)
        assert len(seen) == t.n_layers
        packed = [qs[1] == Hk and qs[2] == (H // Hk) * q for qs, _ in seen]
        if q <= attention.MAX_Q:
            assert all(ks[1] == Hk for _, ks in seen)                 # the cache's own heads: no copy
        assert all(packed) if q <= attention.MAX_Q else not any(packed)


def test_batched_left_padded_rows_match_single_requests():
    """Batched verification (per-row masks and positions) gives each row the logits it gets alone."""
    from dspark_viz.decode import plain_generate
    from dspark_viz.drafters import LookupDrafter
    from dspark_viz.serving.batched import batched_generate

    t = _target()
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(0, 47, (n,), generator=g).tolist() for n in (5, 9, 14)]
    res = batched_generate(t, LookupDrafter(gamma=4, vocab_size=48), prompt_ids=prompts, max_new_tokens=12,
                           temperature=0)
    for p, tr in zip(prompts, res.traces):
        assert tr.output_ids == plain_generate(t, prompt_ids=p, max_new_tokens=12, temperature=0).output_ids
