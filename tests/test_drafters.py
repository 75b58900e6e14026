"""Neural drafters: masks, heads, losses, training, checkpoints, train/inference agreement."""
from __future__ import annotations

import json

import pytest
import torch

from dspark_viz.decode import plain_generate, speculative_generate
from dspark_viz.drafters import speed_only
from dspark_viz.drafters.config import DrafterConfig
from dspark_viz.drafters.neural import build_model, init_from_target, load_drafter_file, save_drafter
from dspark_viz.drafters.neural_drafter import NeuralDrafter
from dspark_viz.model.toy import tiny_llama_target
from dspark_viz.train.config import TrainConfig
from dspark_viz.train.data import features_batch
from dspark_viz.train.losses import confidence_label, l1_distance, target_probs
from dspark_viz.train.trainer import batch_loss, build_draft_vocab, dspark_forward, eagle_forward

GAMMA = 5


@pytest.fixture(scope="module")
def tiny():
    t = tiny_llama_target(vocab_size=48, hidden_size=64, n_layers=4)
    g = torch.Generator().manual_seed(0)
    seqs = []
    for i in range(6):
        ids = torch.randint(0, 48, (36,), generator=g).tolist()
        f, h, l = features_batch(t, [ids])[0]
        seqs.append(dict(id=f"{i:06d}", n=36, prompt_len=8, ids=torch.tensor(ids), feats=f, hidden=h, lse=l))
    return t, seqs


def make(t, seqs, algo, **kw):
    cfg = DrafterConfig.for_target(t, algo, draft_vocab=32, rank=8, gamma=GAMMA, **kw)
    torch.manual_seed(0)
    m = build_model(cfg, t, build_draft_vocab(seqs, 32))
    init_from_target(m, t)
    with torch.no_grad():                      # non-trivial heads (W2 starts at zero)
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return m


def test_block_sees_only_context_before_anchor_and_its_own_block(tiny):
    t, seqs = tiny
    m = make(t, seqs, "dspark")
    s = seqs[0]
    anchors = torch.tensor([12, 20])
    with torch.no_grad():
        base = dspark_forward(m, s, anchors)[0]
        # the anchor's own target feature (position 20) and everything later: block 2 unchanged
        s2 = dict(s, feats=s["feats"].clone())
        s2["feats"][20:] += 5
        assert torch.equal(dspark_forward(m, s2, anchors)[0][1], base[1])
        # a feature strictly before the anchor does change it
        s3 = dict(s, feats=s["feats"].clone())
        s3["feats"][19] += 5
        assert not torch.allclose(dspark_forward(m, s3, anchors)[0][1], base[1])
        # block 1 (anchor 12) never sees block 2's anchor token
        s4 = dict(s, ids=s["ids"].clone())
        s4["ids"][20] = (s4["ids"][20] + 1) % 48
        assert torch.allclose(dspark_forward(m, s4, anchors)[0][0], base[0], atol=1e-6)


def test_markov_and_rnn_bias_at_known_token(tiny):
    t, seqs = tiny
    for algo in ("dspark", "dspark-rnn"):
        m = make(t, seqs, algo)
        prev = torch.tensor([3])
        h = torch.randn(1, 64)
        b, state, e = m.head.step(prev, h, m.head.init_state(1))
        assert torch.equal(e, m.head.W1.weight[3:4])
        if algo == "dspark":
            assert torch.allclose(b, m.head.W1.weight[3:4] @ m.head.W2.weight.T)
        else:
            r = m.head.r
            z = torch.cat([torch.zeros(1, r), e, h], -1)
            g, c, o = m.head.gate(z).chunk(3, -1)
            assert torch.allclose(state, (1 - torch.sigmoid(g)) * torch.tanh(c))
            assert torch.allclose(b, torch.tanh(o) @ m.head.W2.weight.T)


def test_confidence_label_is_one_minus_half_l1():
    p_d = torch.tensor([[[0.5, 0.3, 0.2]]])
    p_t = torch.tensor([[[0.2, 0.3, 0.4]]])           # 0.1 of target mass outside the draft vocabulary
    l1 = l1_distance(p_d, p_t)
    assert torch.allclose(l1, torch.tensor([[0.3 + 0.0 + 0.2 + 0.1]]))
    assert torch.allclose(confidence_label(l1), 1 - 0.5 * l1)


def test_target_probs_from_hidden_and_lse(tiny):
    t, seqs = tiny
    s = seqs[0]
    W = t.lm_head_weight.detach()
    p = target_probs(s["hidden"][None, :4].float(), s["lse"][None, :4], W)
    logits = s["hidden"][:4].float() @ W.T
    assert torch.allclose(p[0], torch.softmax(logits, -1), atol=2e-3)


@pytest.mark.parametrize("algo,precision", [("dspark", "fp32"), ("dspark-rnn", "fp32"), ("dflash", "fp32"),
                                             ("eagle", "fp32"), ("dspark", "bf16"), ("eagle", "bf16")])
def test_loss_falls_over_50_steps(tiny, algo, precision):
    """Every drafter learns, in fp32 and under bf16 autocast (the trainer's choice on bf16-capable CPUs)."""
    t, seqs = tiny
    m = make(t, seqs, algo)
    tc = TrainConfig(blocks_per_seq=8, seqs_per_step=2)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(50):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss, st = batch_loss(m, seqs[:3], tc, gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(st["loss"])
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5


@pytest.mark.parametrize("algo", ["dspark", "dspark-rnn"])
def test_detached_confidence_loss_trains_its_head_only(tiny, algo):
    """conf_grad=False: the confidence loss alone reaches the confidence head and nothing else; with the default the
    backbone and the sequential head get its gradient too."""
    t, seqs = tiny
    grads = {}
    for conf_grad in (True, False):
        m = make(t, seqs, algo)
        tc = TrainConfig(blocks_per_seq=8, seqs_per_step=2, w_ce=0.0, w_l1=0.0, w_conf=1.0, conf_grad=conf_grad)
        loss, _ = batch_loss(m, seqs[:2], tc, torch.Generator().manual_seed(0))
        loss.backward()
        grads[conf_grad] = {n: p.grad is not None and bool(p.grad.abs().sum() > 0)
                            for n, p in m.named_parameters() if p.requires_grad}
    for conf_grad, g in grads.items():
        assert g["conf.lin.weight"]
        assert any(v for n, v in g.items() if n.startswith("backbone.")) == conf_grad
        assert g["head.W1.weight"] == conf_grad


@pytest.mark.parametrize("algo", ["dspark", "dspark-rnn", "eagle"])
def test_training_forward_equals_inference(tiny, algo):
    """With teacher tokens equal to the greedy drafts, training logits give the same drafts."""
    t, seqs = tiny
    m = make(t, seqs, algo)
    s, p = dict(seqs[1]), 15
    st = m.begin(s["feats"][:p].float(), s["ids"][:p].tolist())
    toks, p_full, conf, _ = m.propose(st, int(s["ids"][p]), p, 0.0, None)
    ids = s["ids"].clone()
    ids[p + 1:p + 1 + GAMMA] = torch.tensor(toks)
    s["ids"] = ids
    fwd = eagle_forward if algo == "eagle" else dspark_forward
    with torch.no_grad():
        logits, c, *_ = fwd(m, s, torch.tensor([p]))
    assert m.vocab_ids[logits[0].argmax(-1)].tolist() == toks
    if c is not None:
        assert torch.allclose(torch.sigmoid(c[0]), torch.tensor(conf), atol=1e-5)


@pytest.mark.parametrize("algo", ["dspark", "dspark-rnn", "dflash", "eagle"])
def test_greedy_equality_with_plain_decoding_tiny(tiny, algo):
    t, seqs = tiny
    d = NeuralDrafter(make(t, seqs, algo), algo, t)
    prompt = seqs[2]["ids"][:8].tolist()
    sp = speculative_generate(t, d, prompt_ids=prompt, max_new_tokens=24, temperature=0)
    pl = plain_generate(t, prompt_ids=prompt, max_new_tokens=24, temperature=0)
    assert sp.output_ids == pl.output_ids
    assert all(len(r.drafts) == GAMMA for r in sp.rounds)


def test_checkpoint_card_validation(tiny, tmp_path):
    t, seqs = tiny
    m = make(t, seqs, "dspark")
    path = tmp_path / "d.json"
    save_drafter(m, t, path, {"train": {"steps": 1}})
    card = json.loads(path.read_text())
    assert card["vocab_hash"] == t.vocab_hash and card["algo"] == "dspark"
    assert not any("embed" in k or "lm_head" in k for k in
                   __import__("safetensors.torch", fromlist=["load_file"]).load_file(str(tmp_path / "d.safetensors")))
    d = load_drafter_file(path, t)
    assert d.gamma == GAMMA and d.has_confidence
    other = tiny_llama_target(vocab_size=40, hidden_size=64, n_layers=4)
    with pytest.raises(ValueError, match="trained for target"):
        load_drafter_file(path, other)
    w = tmp_path / "d.safetensors"
    raw = bytearray(w.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    w.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="corrupted"):
        load_drafter_file(path, t)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_drafter_file(path, t)
    with pytest.raises(FileNotFoundError):
        load_drafter_file(tmp_path / "missing.json", t)


def test_remap_vocab_keeps_shared_rows_and_backbone(tiny):
    """Warm start onto a new draft vocabulary: the Markov bias between tokens both vocabularies
    hold is unchanged, new tokens start fresh (zero bias), the backbone is copied."""
    from dspark_viz.train.trainer import remap_vocab

    t, seqs = tiny
    old = make(t, seqs, "dspark")
    new_ids = torch.tensor(sorted(set(old.vocab_ids[::2].tolist()) | {40, 41, 42, 43, 44, 45, 46, 47}))
    cfg = old.cfg
    fresh = build_model(cfg, t, new_ids)
    fresh.load_state_dict(remap_vocab(old.state_dict(), old.vocab_ids, new_ids, fresh.state_dict()))
    shared = [x for x in new_ids.tolist() if x in set(old.vocab_ids.tolist())]
    assert shared and len(shared) < new_ids.numel()

    def bias(m, prev_tok, toks):
        e = m.head.W1(m.full2draft[torch.tensor([prev_tok])])                             # (1, r)
        return m.head.W2(e)[0, m.full2draft[torch.tensor(toks)]]

    with torch.no_grad():
        assert torch.allclose(bias(fresh, shared[0], shared), bias(old, shared[0], shared))
        added = [x for x in new_ids.tolist() if x not in set(old.vocab_ids.tolist())]
        assert torch.all(bias(fresh, shared[0], added) == 0)
        for k, v in old.backbone.state_dict().items():
            assert torch.equal(fresh.backbone.state_dict()[k], v)


def test_train_in_turns_resumes_and_streams_new_shards(tiny, tmp_path):
    """Two drafters take turns on one store; a shard written between calls joins the data, and a
    second call resumes both runs at the step they reached."""
    from dspark_viz.train.data import save_shard, write_index
    from dspark_viz.train.trainer import train_in_turns

    t, seqs = tiny
    data = tmp_path / "data"
    data.mkdir()

    def shard(i, part):
        save_shard(data / f"feat_{i:05d}.pt", [dict(s, ids=s["ids"].tolist(), domain="mixed") for s in part])
        write_index(t, data, "in memory", 0.0)

    shard(0, seqs[:3])
    outs = {a: tmp_path / f"{a}.json" for a in ("dspark", "dflash")}
    over = dict(draft_vocab=32, rank=8, gamma=GAMMA)
    tc = TrainConfig(steps=4, blocks_per_seq=4, seqs_per_step=1, ckpt_every=2, warmup=1)
    train_in_turns(t, ["dspark", "dflash"], data, tmp_path / "runs", outs, tc, turn=2, cfg_overrides=over,
                   log=lambda *_: None)
    for a in outs:
        ck = torch.load(tmp_path / "runs" / a / "ckpt.pt", weights_only=True)
        assert ck["step"] == 4
        assert json.loads(outs[a].read_text())["train"]["data_sequences"] >= 2
    shard(1, seqs[3:])
    train_in_turns(t, ["dspark", "dflash"], data, tmp_path / "runs", outs,
                   TrainConfig(steps=6, blocks_per_seq=4, seqs_per_step=1, ckpt_every=2, warmup=1),
                   turn=2, cfg_overrides=over, log=lambda *_: None)
    for a in outs:
        assert torch.load(tmp_path / "runs" / a / "ckpt.pt", weights_only=True)["step"] == 6
        card = json.loads(outs[a].read_text())
        assert card["train"]["steps"] == 6 and card["train"]["data_sequences"] > 3
    # a fixed data budget: only the first N cached sequences, whatever the cache holds (here 2-layer drafters)
    capped = {a: tmp_path / "capped" / f"{a}.json" for a in outs}
    train_in_turns(t, ["dspark", "dflash"], data, tmp_path / "runs_capped", capped, tc, turn=2,
                   cfg_overrides=dict(over, n_layers=2), log=lambda *_: None, max_seqs=3)
    for a in capped:
        card = json.loads(capped[a].read_text())
        assert card["train"]["data_sequences"] <= 3 and card["config"]["n_layers"] == 2


@pytest.mark.parametrize("algo", ["dspark", "dspark-rnn", "dflash", "eagle"])
def test_every_drafter_decodes_in_bf16(tiny, algo, tmp_path):
    """A drafter file loads into a bf16 target and drafts at that dtype (the bench's --dtype bf16 runs all four)."""
    t, seqs = tiny
    path = tmp_path / f"{algo}.json"
    save_drafter(make(t, seqs, algo), t, path, {"train": {"steps": 1}})
    tb = tiny_llama_target(vocab_size=48, hidden_size=64, n_layers=4, dtype=torch.bfloat16)
    d = load_drafter_file(path, tb)
    assert next(d.model.parameters()).dtype == torch.bfloat16
    prompt = seqs[2]["ids"][:8].tolist()
    sp = speculative_generate(tb, d, prompt_ids=prompt, max_new_tokens=16, temperature=0)
    pl = plain_generate(tb, prompt_ids=prompt, max_new_tokens=16, temperature=0)
    assert sp.output_ids == pl.output_ids
    assert len(sp.rounds) < 16 and all(len(r.drafts) == GAMMA for r in sp.rounds)


def test_a_drafter_card_file_loads_by_path_with_its_calibration(tiny, tmp_path):
    """`--drafter FILE.json`: a drafter you trained loads from its card, alone or with lookup, and the STS
    calibration saved beside it (FILE.sts.json) is attached; a missing card says what to give."""
    from dspark_viz.calibration import STSCalibration
    from dspark_viz.drafters import HybridDrafter, load_drafter
    from dspark_viz.drafters.neural import calibration_path

    t, seqs = tiny
    path = tmp_path / "mine.json"
    save_drafter(make(t, seqs, "dspark"), t, path, {"train": {"steps": 1}})
    d = load_drafter(str(path), t)
    assert d.has_confidence and d.gamma == GAMMA and d.calibration is None
    assert calibration_path(str(path)) == tmp_path / "mine.sts.json"
    STSCalibration([1.5] * GAMMA).save(tmp_path / "mine.sts.json")
    assert load_drafter(str(path), t).calibration.temperatures == [1.5] * GAMMA
    assert load_drafter(str(path), t, calibrated=False).calibration is None
    h = load_drafter(f"{path}+lookup", t)
    assert isinstance(h, HybridDrafter)
    prompt = seqs[2]["ids"][:8].tolist()
    assert speculative_generate(t, d, prompt_ids=prompt, max_new_tokens=12, temperature=0).output_ids == \
        plain_generate(t, prompt_ids=prompt, max_new_tokens=12, temperature=0).output_ids
    with pytest.raises(FileNotFoundError, match="no drafter card"):
        load_drafter(str(tmp_path / "absent.json"), t)
    with pytest.raises(ValueError, match="unknown drafter"):
        load_drafter("mine", t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("temperature", [1.0, 0.0], ids=["T1", "T0"])
@pytest.mark.parametrize("algo", ["dspark", "dspark-rnn", "dflash", "eagle"])
def test_diagnostics_off_drafts_the_same(tiny, algo, temperature, dtype, tmp_path):
    """diagnostics=False (the bench) skips the per-slot top-k for the charts and changes nothing else: same
    tokens, same distributions (over the full vocabulary, zero outside the draft vocabulary), same confidences —
    DSpark-Markov's slot loop then runs as one native call (greedy and sampled, from the same generator), and
    DFlash-style's greedy slots at once."""
    from dspark_viz.fast import kernels
    t, seqs = tiny
    path = tmp_path / f"{algo}.json"
    save_drafter(make(t, seqs, algo), t, path, {"train": {"steps": 1}})
    if dtype != torch.float32:
        t = tiny_llama_target(vocab_size=48, hidden_size=64, n_layers=4, dtype=dtype)
    d = load_drafter_file(path, t)
    prompt = seqs[1]["ids"][:8].tolist()
    on = speculative_generate(t, d, prompt_ids=prompt, max_new_tokens=12, temperature=temperature, seed=3)
    speed_only(d)                                       # what the bench and `dspark-viz profile` do
    if algo == "dspark" and kernels.load() is not None:
        assert d.model._native_loop(temperature, False) is not None
    off = speculative_generate(t, d, prompt_ids=prompt, max_new_tokens=12, temperature=temperature, seed=3)
    assert on.output_ids == off.output_ids
    for a, b in zip(on.rounds, off.rounds):
        assert [x.token for x in a.drafts] == [x.token for x in b.drafts]
        assert [x.p_draft for x in a.drafts] == [x.p_draft for x in b.drafts]
        assert [x.confidence for x in a.drafts] == [x.confidence for x in b.drafts]
        assert all(x.diag for x in a.drafts) and not any(x.diag for x in b.drafts)


def _benchmarks_on_path() -> None:
    """benchmarks/ holds scripts, not a package: make confidence_ceiling importable."""
    import sys
    from pathlib import Path

    path = str(Path(__file__).resolve().parents[1] / "benchmarks")
    if path not in sys.path:
        sys.path.insert(0, path)


def test_confidence_ceiling_on_a_tiny_drafter(tiny):
    """benchmarks/confidence_ceiling.py: chances, head scores and the oracle AUROC on held-out blocks."""
    _benchmarks_on_path()
    from confidence_ceiling import block_chances, ceiling

    t, seqs = tiny
    ch = block_chances(make(t, seqs, "dspark").float(), seqs, blocks_per_seq=6)
    n = ch["c_star"].shape[0]
    assert n > 0 and all(v.shape == (n, GAMMA) for v in ch.values())
    assert ((ch["c_star"] >= 0) & (ch["c_star"] <= 1)).all() and ((ch["peak"] > 0) & (ch["peak"] <= 1)).all()
    res = ceiling(ch)
    assert all(len(v) == GAMMA for v in res.values())
    assert all(a >= b - 1e-12 for a, b in zip(res["survival"], res["survival"][1:]))   # survival only falls
    for k in range(GAMMA):                  # scoring by the chance itself is the ceiling of any score
        if res["auroc_oracle"][k] == res["auroc_oracle"][k]:
            assert res["auroc_oracle"][k] >= max(res["auroc_head"][k], res["auroc_peak"][k]) - 1e-12


def test_perfect_head_replay_on_a_tiny_drafter(tiny):
    _benchmarks_on_path()
    from confidence_ceiling import block_chances, perfect_head_replay, replay_traces

    t, seqs = tiny
    ch = block_chances(make(t, seqs, "dspark").float(), seqs, blocks_per_seq=6)
    trs = replay_traces(ch["c_star"][:5], [0, 2, GAMMA, 1, 0], per_trace=2)
    assert [len(x.rounds) for x in trs] == [2, 2, 1]
    assert [r.accepted for x in trs for r in x.rounds] == [0, 2, GAMMA, 1, 0]
    assert [d.status for d in trs[0].rounds[1].drafts][:4] == ["accepted", "accepted", "rejected", "not_reached"]
    out = perfect_head_replay(ch, replicas=2, rounds=10)
    assert out["rounds_replayed"] == 2 * ch["c_star"].shape[0]
    for key in ("perfect_head", "shipped_head_sts", "oracle"):
        assert all(v == v and v > 0 for v in out[key].values()), key


def test_precision_choice():
    from dspark_viz.train.precision import cpu_has_bf16, resolve_precision

    cpu = torch.device("cpu")
    assert resolve_precision("fp32", cpu) == "fp32" and resolve_precision("bf16", cpu) == "bf16"
    assert resolve_precision("auto", cpu) == ("time" if cpu_has_bf16() else "fp32")
    assert resolve_precision("auto", torch.device("cuda")) == "bf16"
    with pytest.raises(ValueError):
        resolve_precision("fp16", cpu)


def test_faster_precision_times_both(tiny):
    from dspark_viz.train.trainer import faster_precision

    t, seqs = tiny
    m = make(t, seqs, "dspark")
    assert faster_precision(m, seqs, TrainConfig(blocks_per_seq=4, seqs_per_step=2), "cpu", steps=1) in ("fp32", "bf16")
    assert all(p.grad is None for p in m.parameters())


def test_target_rows_are_the_rows_of_every_block(tiny):
    """p_target computed once per distinct position and gathered equals computing it for every slot."""
    from dspark_viz.train.trainer import target_rows, vocab_weight
    t, seqs = tiny
    m = make(t, seqs, "dspark")
    W = vocab_weight(m, torch.float32)
    pos = [torch.tensor([[3, 4, 5], [4, 5, 6], [4, 5, 6]]), torch.tensor([[10, 11, 12]])]   # overlapping blocks
    got = target_rows(seqs[:2], pos, W)                                                      # (4, 3, V_d)
    want = torch.cat([target_probs(s["hidden"][p].float(), s["lse"][p], W) for s, p in zip(seqs[:2], pos)])
    assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-5, atol=1e-8)   # gemm blocking may differ


def test_block_attention_is_the_masked_attention_of_training_blocks():
    """backbone.block_attention scores only the keys a row may see; output and gradients equal scaled-dot-product
    attention under the full mask [context < anchor | own block] over [context; every block] (float rounding)."""
    from dspark_viz.drafters.backbone import block_attention

    gen = torch.Generator().manual_seed(3)
    H, Hk, Dh, n, N, g = 6, 2, 16, 11, 5, 4
    T = N * g
    q = torch.randn(H, T, Dh, generator=gen, requires_grad=True)
    kc, vc, kb, vb = (torch.randn(Hk, m, Dh, generator=gen, requires_grad=True) for m in (n, n, T, T))
    anchors = torch.tensor([1, 4, 7, 9, 11])
    ctx_len = anchors.repeat_interleave(g)
    blk = torch.arange(N).repeat_interleave(g)
    mask = torch.cat([torch.arange(n)[None, :] < ctx_len[:, None], blk[:, None] == blk[None, :]], 1)   # (T, n + T)
    k = torch.cat([kc, kb], 1).repeat_interleave(H // Hk, 0)
    v = torch.cat([vc, vb], 1).repeat_interleave(H // Hk, 0)
    ref = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask[None, None])[0]
    got = block_attention(q, kc, vc, kb, vb, ctx_len, g)
    assert torch.allclose(got, ref, atol=1e-5)
    w = torch.randn(H, T, Dh, generator=gen)
    g_ref = torch.autograd.grad((ref * w).sum(), (q, kc, vc, kb, vb))
    g_got = torch.autograd.grad((got * w).sum(), (q, kc, vc, kb, vb))
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g_got, g_ref))


def test_rotary_table_rows_equal_rope_cos_sin(tiny):
    """The drafter backbone's rotary rows (a table, doubled when outgrown) equal rope_cos_sin of those positions,
    in fp32 and in the layers' dtype."""
    from dspark_viz.drafters.backbone import rope_cos_sin
    t, seqs = tiny
    bb = make(t, seqs, "dspark").backbone
    for grad in (False, True):                           # inference reads the table; training computes afresh
        with torch.inference_mode(not grad), torch.set_grad_enabled(grad):
            for start, n in ((0, 7), (250, 7), (700, 3), (3000, 1)):
                want = rope_cos_sin(torch.arange(start, start + n), bb.head_dim, bb.rope_theta)
                got = bb.rope_rows(start, n, torch.device("cpu"))
                assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (start, n)
                c16, s16 = bb.rope_rows(start, n, torch.device("cpu"), torch.bfloat16)
                assert torch.equal(c16, want[0].to(torch.bfloat16)[None])
                assert torch.equal(s16, want[1].to(torch.bfloat16)[None])
        from dspark_viz.memo import peek
        assert peek(bb, "rope_table") is not None


def test_sequences_follow_the_drafter_to_its_device():
    """On an accelerator the trainer moves a cached sequence's tensors to the drafter's device (its scalars stay);
    on the device it already sits on, the same dict comes back (no copy a step on CPU)."""
    from dspark_viz.train.trainer import on_device

    s = {"ids": torch.arange(6), "feats": torch.zeros(6, 4, dtype=torch.float16), "n": 6, "prompt_len": 2}
    assert on_device(s, torch.device("cpu")) is s
    moved = on_device(s, torch.device("meta"))
    assert moved["ids"].device.type == "meta" and moved["feats"].dtype == torch.float16
    assert moved["n"] == 6 and moved["prompt_len"] == 2 and s["ids"].device.type == "cpu"


def test_warm_start_is_recorded_on_the_card(tiny, tmp_path):
    """A drafter trained on from another keeps that one's hash and training record on its card, also after a
    resume from its checkpoint, so the card counts every step behind its weights (``total_steps``)."""
    from dspark_viz.train.data import save_shard, write_index
    from dspark_viz.train.cards import total_steps
    from dspark_viz.train.trainer import train

    t, seqs = tiny
    data = tmp_path / "data"
    data.mkdir()
    save_shard(data / "feat_00000.pt", [dict(s, ids=s["ids"].tolist(), domain="mixed") for s in seqs])
    write_index(t, data, "in memory", 0.0)
    over = dict(draft_vocab=32, rank=8, gamma=GAMMA)
    tc = TrainConfig(steps=4, blocks_per_seq=4, seqs_per_step=1, ckpt_every=2, warmup=1)
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    train(t, "dspark", data, tmp_path / "run1", first, tc, cfg_overrides=over, log=lambda *_: None)
    base = json.loads(first.read_text())
    assert "warm_start" not in base["train"] and base["train"]["device"] == "cpu"
    assert total_steps(base["train"]) == 4
    short = TrainConfig(steps=2, blocks_per_seq=4, seqs_per_step=1, ckpt_every=2, warmup=1)
    train(t, "dspark", data, tmp_path / "run2", second, short, cfg_overrides=over, init=first, log=lambda *_: None)
    train(t, "dspark", data, tmp_path / "run2", second, tc, cfg_overrides=over, init=first, log=lambda *_: None)
    card = json.loads(second.read_text())
    assert card["train"]["warm_start"] == {"sha256": base["sha256"], "train": base["train"]}
    assert card["train"]["steps"] == 4 and total_steps(card["train"]) == 8


@pytest.mark.parametrize("algo", ["dspark", "dspark-rnn", "dflash"])
def test_one_backbone_call_for_every_sequence_is_the_per_sequence_pass(tiny, algo):
    """The accelerator's training pass (every sequence's context and blocks in one backbone call, padded) gives
    the per-sequence pass's logits, confidences and gradients — sequences of different lengths and block counts."""
    from dspark_viz.train.trainer import forward_blocks
    t, seqs = tiny
    m = make(t, seqs, algo)
    cut = [dict(seqs[0]), dict(seqs[1]), dict(seqs[2])]
    for s, n in zip(cut, (36, 20, 29)):                      # contexts of different lengths
        s.update(n=n, ids=s["ids"][:n], feats=s["feats"][:n], hidden=s["hidden"][:n], lse=s["lse"][:n])
    anchors = [torch.tensor([8, 12, 20, 30]), torch.tensor([9, 15]), torch.tensor([8, 10, 11, 22, 27])]
    got = {}
    for batched in (False, True):
        m.zero_grad()
        logits, conf, lab, p_t, mask = forward_blocks(m, cut, anchors, batched=batched)
        (logits.float().logsumexp(-1).sum() + (conf.sum() if conf is not None else 0)).backward()
        got[batched] = (logits, conf, lab, mask, [p.grad.clone() for p in m.parameters() if p.grad is not None])
    (l0, c0, lab0, m0, g0), (l1, c1, lab1, m1, g1) = got[False], got[True]
    assert torch.allclose(l0, l1, atol=1e-5) and torch.equal(lab0, lab1) and torch.equal(m0, m1)
    assert (c0 is None) == (c1 is None) and (c0 is None or torch.allclose(c0, c1, atol=1e-5))
    assert len(g0) == len(g1) and all(torch.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(g0, g1))
