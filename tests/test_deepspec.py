"""DeepSpec checkpoints in, our drafters out: Qwen3 targets, DeepSpec folders as drafters, errors, export.

Legend: V vocabulary, d hidden size, L target layers, γ block size, r Markov rank.

The DeepSpec folders here are written by the test itself (config.json + model.safetensors in DeepSpec's
parameter names, random weights) next to a random tiny Qwen3 target saved with the embedded SmolLM2
tokenizer. ``reference_round`` is a deliberately plain float64 forward written from the method's
semantics; it shares no code with drafters/deepspec.py.
"""
from __future__ import annotations

import json
import math
import shutil
from fractions import Fraction

import pytest
import torch
from safetensors.torch import load_file, save_file

from dspark_viz.decode import plain_generate, speculative_generate
from dspark_viz.drafters import load_drafter
from dspark_viz.drafters.config import DrafterConfig
from dspark_viz.drafters.deepspec_export import export_drafter, measure_qk_scale
from dspark_viz.drafters.neural import build_model, init_from_target
from dspark_viz.drafters.neural_drafter import NeuralDrafter
from dspark_viz.exact import exact_output_distribution, target_output_distribution
from dspark_viz.model.target import TargetModel, load_target
from dspark_viz.model.toy import CharTokenizer, tiny_llama_target
from dspark_viz.protocol import Context
from dspark_viz.sampling import sample
from dspark_viz.scheduler import FixedLength, HardwareAware

HEADS = [("vanilla", True, True), ("gated", True, True), ("rnn", True, True), ("vanilla", True, False),
         (None, False, False)]
HEAD_IDS = ["vanilla", "gated", "rnn", "conf-without-markov", "dflash"]
LAYER_IDS = [-1, 1, 2]                  # embedding output, decoder layers 1 and 2 of a 4-layer target
TOK_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json")


def qwen3_config(V: int, d: int = 32, L: int = 4):
    from transformers import Qwen3Config

    return Qwen3Config(vocab_size=V, hidden_size=d, intermediate_size=2 * d, num_hidden_layers=L,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=d // 4, max_position_embeddings=512,
                       tie_word_embeddings=True, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})


def random_qwen3(cfg, seed: int = 0):
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(seed)
    m = Qwen3ForCausalLM(cfg)
    with torch.no_grad():                        # a peaky toy LM (as model/toy.tiny_llama_target)
        m.get_input_embeddings().weight.mul_(20)
    return m.eval()


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory):
    """A random tiny Qwen3 saved as a Hugging Face folder with the embedded SmolLM2 tokenizer."""
    from dspark_viz.model.target import find_embedded_gguf, resolve_model_dir

    try:
        find_embedded_gguf()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    smol, _ = resolve_model_dir(None)
    out = tmp_path_factory.mktemp("qwen3-tiny")
    random_qwen3(qwen3_config(49152)).save_pretrained(out)
    for f in TOK_FILES:
        if (smol / f).exists():
            shutil.copy(smol / f, out / f)
    return out


@pytest.fixture(scope="module")
def qwen(qwen_dir):
    return load_target(qwen_dir, device="cpu", dtype="fp32", feature_layers=[i + 1 for i in LAYER_IDS])


def write_deepspec(folder, target_cfg, head=("vanilla", True, True), gamma: int = 4, n_layers: int = 2,
                   rank: int = 8, layer_ids=LAYER_IDS, mask: int = 5, seed: int = 1, embed=None, lm=None):
    """A DeepSpec-layout drafter folder for a target config: random weights, DeepSpec's parameter names."""
    kind, conf, with_markov = head
    c = target_cfg
    d, H, Hk, Dh, F_, V = c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, \
        c.intermediate_size, c.vocab_size
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, s=0.2):
        return torch.randn(*shape, generator=g) * s

    def ones(n):
        return 1 + rnd(n, s=0.1)

    st = {"embed_tokens.weight": embed if embed is not None else rnd(V, d, s=1.0),
          "lm_head.weight": lm if lm is not None else rnd(V, d, s=1.0),
          "fc.weight": rnd(d, len(layer_ids) * d), "hidden_norm.weight": ones(d), "norm.weight": ones(d)}
    for i in range(n_layers):
        p = f"layers.{i}."
        st |= {p + "self_attn.q_proj.weight": rnd(H * Dh, d), p + "self_attn.k_proj.weight": rnd(Hk * Dh, d),
               p + "self_attn.v_proj.weight": rnd(Hk * Dh, d), p + "self_attn.o_proj.weight": rnd(d, H * Dh),
               p + "self_attn.q_norm.weight": ones(Dh), p + "self_attn.k_norm.weight": ones(Dh),
               p + "mlp.gate_proj.weight": rnd(F_, d), p + "mlp.up_proj.weight": rnd(F_, d),
               p + "mlp.down_proj.weight": rnd(d, F_), p + "input_layernorm.weight": ones(d),
               p + "post_attention_layernorm.weight": ones(d)}
    if kind:
        st |= {"markov_head.markov_w1.weight": rnd(V, rank, s=1.0), "markov_head.markov_w2.weight": rnd(V, rank)}
        if kind == "gated":
            st |= {"markov_head.gate_proj.weight": rnd(rank, d + rank), "markov_head.gate_proj.bias": rnd(rank)}
        if kind == "rnn":
            st |= {"markov_head.joint_proj.weight": rnd(3 * rank, 2 * rank + d),
                   "markov_head.joint_proj.bias": rnd(3 * rank)}
    if conf:
        st |= {"confidence_head.proj.weight": rnd(1, d + (rank if with_markov else 0)),
               "confidence_head.proj.bias": rnd(1)}
    cfg = c.to_dict() | {"architectures": ["Qwen3DSparkModel"], "num_target_layers": c.num_hidden_layers,
                         "num_hidden_layers": n_layers, "block_size": gamma, "tie_word_embeddings": False,
                         "mask_token_id": mask, "target_layer_ids": list(layer_ids), "num_anchors": 512,
                         "enable_confidence_head": conf, "markov_rank": rank if kind else 0}
    if kind:
        cfg["markov_head_type"] = kind
    if conf:
        cfg["confidence_head_with_markov"] = with_markov
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in st.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


# -- the plain reference --------------------------------------------------------------------------
def reference_round(folder, hs, ctx_len: int, anchor: int, toks: list[int]):
    """DeepSpec's drafting, spelled out in float64 from config.json + model.safetensors: → logits (γ, V)
    (backbone + sequential bias, before temperature), confidences (γ,) or None. ``hs`` are the target's
    hidden_states over at least ``ctx_len`` positions; ``toks`` the drafted x_1..x_γ (x_{k−1} for the heads)."""
    c = json.loads((folder / "config.json").read_text())
    W = {k: v.double() for k, v in load_file(str(folder / "model.safetensors")).items()}
    eps, g, d = c["rms_norm_eps"], c["block_size"], c["hidden_size"]
    H, Hk = c["num_attention_heads"], c["num_key_value_heads"]
    Dh = c.get("head_dim") or d // H
    theta = (c.get("rope_parameters") or {}).get("rope_theta", c.get("rope_theta"))

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w

    def rope(x, pos):                                   # x (T, heads, Dh), half-rotation layout
        inv = 1.0 / theta ** (torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)
        ang = pos.double()[:, None] * inv[None]         # (T, Dh/2)
        cos, sin = ang.cos()[:, None], ang.sin()[:, None]
        x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    feats = torch.cat([hs[0 if i == -1 else i + 1][0, :ctx_len] for i in c["target_layer_ids"]], -1).double()
    ctx = rms(feats @ W["fc.weight"].T, W["hidden_norm.weight"])
    x = W["embed_tokens.weight"][[anchor] + [c["mask_token_id"]] * (g - 1)]
    p_ctx, p_blk = torch.arange(ctx_len), torch.arange(ctx_len, ctx_len + g)
    for i in range(c["num_hidden_layers"]):
        w = {k[len(f"layers.{i}."):]: v for k, v in W.items() if k.startswith(f"layers.{i}.")}
        h = rms(x, w["input_layernorm.weight"])
        q = rope(rms((h @ w["self_attn.q_proj.weight"].T).view(g, H, Dh), w["self_attn.q_norm.weight"]), p_blk)
        src = torch.cat([ctx, h])
        k = (src @ w["self_attn.k_proj.weight"].T).view(-1, Hk, Dh)
        k = rope(rms(k, w["self_attn.k_norm.weight"]), torch.cat([p_ctx, p_blk]))
        v = (src @ w["self_attn.v_proj.weight"].T).view(-1, Hk, Dh)
        o = torch.zeros(g, H, Dh, dtype=torch.float64)
        for j in range(H):
            kv = j // (H // Hk)
            a = torch.softmax(q[:, j] @ k[:, kv].T / math.sqrt(Dh), -1)        # every block row sees all
            o[:, j] = a @ v[:, kv]
        x = x + o.reshape(g, H * Dh) @ w["self_attn.o_proj.weight"].T
        h = rms(x, w["post_attention_layernorm.weight"])
        gate = h @ w["mlp.gate_proj.weight"].T
        x = x + (gate * torch.sigmoid(gate) * (h @ w["mlp.up_proj.weight"].T)) @ w["mlp.down_proj.weight"].T
    hN = rms(x, W["norm.weight"])
    logits = hN @ W["lm_head.weight"].T
    kind = c.get("markov_head_type") if c["markov_rank"] > 0 else None
    prev, s, conf = [anchor] + toks[:-1], None, []
    for kk in range(g):
        e = W["markov_head.markov_w1.weight"][prev[kk]] if kind else None
        if kind == "vanilla":
            logits[kk] += W["markov_head.markov_w2.weight"] @ e
        elif kind == "gated":
            gate = W["markov_head.gate_proj.weight"] @ torch.cat([hN[kk], e]) + W["markov_head.gate_proj.bias"]
            z = torch.sigmoid(gate)
            logits[kk] += W["markov_head.markov_w2.weight"] @ (z * e)
        elif kind == "rnn":
            s = torch.zeros_like(e) if s is None else s
            out = W["markov_head.joint_proj.weight"] @ torch.cat([s, e, hN[kk]]) + W["markov_head.joint_proj.bias"]
            gt, cand, ot = out.chunk(3)
            s = torch.sigmoid(gt) * s + (1 - torch.sigmoid(gt)) * torch.tanh(cand)
            logits[kk] += W["markov_head.markov_w2.weight"] @ torch.tanh(ot)
        if c["enable_confidence_head"]:
            f = torch.cat([hN[kk], e]) if c.get("confidence_head_with_markov") else hN[kk]
            logit = W["confidence_head.proj.weight"][0] @ f + W["confidence_head.proj.bias"][0]
            conf.append(float(torch.sigmoid(logit)))
    return logits, (conf or None)


def _hidden_states(target, ids):
    with torch.no_grad():
        return target.model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states


# -- Qwen3 targets ----------------------------------------------------------------------------------
def test_qwen3_target_loads_with_stock_forwards(qwen):
    assert qwen.config.model_type == "qwen3"
    assert (qwen.paths.matmul, qwen.paths.layers) == ("stock", "stock") and qwen.paths.attention == "sdpa"
    ids = qwen.chat_ids("Hi there")
    _, out = qwen.prefill(ids, features=True)
    hs = _hidden_states(qwen, ids)
    want = torch.cat([hs[0], hs[2], hs[3]], -1)               # layer 0 = the embedding output
    assert torch.equal(out.features, want)
    with pytest.raises(ValueError, match="feature layers"):
        TargetModel(qwen.model, qwen.tokenizer, "q", "cpu", torch.float32, feature_layers=[1, 4])


# -- DeepSpec folders as drafters -------------------------------------------------------------------
@pytest.mark.parametrize("head", HEADS, ids=HEAD_IDS)
def test_draft_logits_equal_the_plain_reference(qwen, tmp_path, head):
    folder = write_deepspec(tmp_path / "ds", qwen.config, head)
    dr = load_drafter(folder, qwen)
    assert dr.has_confidence == head[1] and dr.gamma == 4
    ids = qwen.chat_ids("Write a haiku about rivers.")
    _, out = qwen.prefill(ids, features=True)
    st = dr.begin(Context(ids, out.features[0]))
    n, more = len(ids), [17, 42, 9]
    for pos, anchor, seq in [(n, 17, ids), (n + 3, 101, ids + more)]:
        if pos > n:                                      # commit x0 and two drafts, then draft the next round
            hs = _hidden_states(qwen, seq)
            dr.commit(st, more, torch.cat([hs[0], hs[2], hs[3]], -1)[0, n:])
        toks, _, conf, _ = dr.model.propose(st, anchor, pos, 0.0, None)
        _, p, conf1, _ = dr.model.propose(st, anchor, pos, 1.0, None, forced=toks)
        ref, ref_conf = reference_round(folder, _hidden_states(qwen, seq), pos, anchor, toks)
        assert toks == ref.argmax(-1).tolist()
        torch.testing.assert_close(p.log().double(), torch.log_softmax(ref, -1), atol=2e-4, rtol=1e-4)
        assert conf == conf1
        if head[1]:
            assert conf == pytest.approx(ref_conf, abs=1e-5)
        else:
            assert conf is None


def test_p_draft_is_exactly_the_vector_sampled_from(qwen, tmp_path):
    dr = load_drafter(write_deepspec(tmp_path / "ds", qwen.config, ("rnn", True, True)), qwen)
    ids = qwen.chat_ids("Name three colours.")
    _, out = qwen.prefill(ids, features=True)
    st = dr.begin(Context(ids, out.features[0]))
    d = dr.propose(st, 17, len(ids), 1.0, torch.Generator().manual_seed(7))
    _, rows, _, _ = dr.model.propose(st, 17, len(ids), 1.0, None, forced=d.tokens)
    assert torch.equal(rows, d.p_draft)                           # rows are p_draft given the sampled prefix
    g = torch.Generator().manual_seed(7)
    assert [sample(rows[k], g) for k in range(dr.gamma)] == d.tokens


@pytest.mark.parametrize("head", HEADS, ids=HEAD_IDS)
def test_greedy_speculative_equals_plain(qwen, tmp_path, head):
    dr = load_drafter(write_deepspec(tmp_path / "ds", qwen.config, head), qwen)
    ids = qwen.chat_ids("Count to five.")
    pl = plain_generate(qwen, prompt_ids=ids, max_new_tokens=20, temperature=0)
    for pol in [FixedLength(dr.gamma)] + ([HardwareAware()] if dr.has_confidence else []):
        sp = speculative_generate(qwen, dr, prompt_ids=ids, max_new_tokens=20, temperature=0, policy=pol)
        assert sp.output_ids == pl.output_ids
        assert all((x.confidence is not None) == dr.has_confidence for r in sp.rounds for x in r.drafts)


def _toy_qwen(V: int = 6):
    cfg = qwen3_config(V, d=16, L=4)
    return TargetModel(random_qwen3(cfg, seed=3), CharTokenizer(V), "toy-qwen3", "cpu", torch.float32,
                       feature_layers=[i + 1 for i in LAYER_IDS])


def test_greedy_equality_on_a_toy_vocabulary_accepts_drafts(tmp_path):
    t = _toy_qwen()
    dr = load_drafter(write_deepspec(tmp_path / "ds", t.config, ("vanilla", True, True), mask=0), t)
    sp = speculative_generate(t, dr, prompt_ids=[0, 1, 2], max_new_tokens=40, temperature=0, policy=FixedLength(4))
    assert sp.output_ids == plain_generate(t, prompt_ids=[0, 1, 2], max_new_tokens=40, temperature=0).output_ids
    assert sum(r.accepted for r in sp.rounds) > 0


def _fractions(row: torch.Tensor) -> list[Fraction]:
    f = [Fraction(float(x)) for x in row.double()]
    s = sum(f)
    return [x / s for x in f]


@pytest.mark.parametrize("policy", [FixedLength(2), HardwareAware()], ids=["fixed-2", "hardware-aware"])
def test_exact_output_distribution_on_a_toy_vocabulary(tmp_path, policy):
    """V = 6, γ = 2, 3 output tokens: every branch enumerated with the drafter's own rows and confidences
    (exact.py); the loop's output law equals the target's exactly."""
    t = _toy_qwen()
    dr = load_drafter(write_deepspec(tmp_path / "ds", t.config, ("rnn", True, True), gamma=2, mask=0), t)
    prompt, rows = [0, 1], {}

    def p_target(seq):
        key = tuple(seq)
        if key not in rows:
            _, out = t.prefill(prompt + list(seq))
            rows[key] = _fractions(torch.softmax(out.logits[0, -1], -1))
        return rows[key]

    def round_fn(seq):
        ctx = prompt + seq[:-1]
        _, out = t.prefill(ctx, features=True)
        st = dr.begin(Context(ctx, out.features[0]))
        memo = {}

        def block(s):
            drafts = tuple(s[len(seq):])
            if drafts not in memo:
                memo[drafts] = dr.model.propose(st, seq[-1], len(ctx), 1.0, None, forced=list(drafts))
            return memo[drafts], len(drafts)

        def dist(s):
            (_, p, _, _), k = block(s)
            return _fractions(p[k])

        def conf(s):
            (_, _, c, _), k = block(s)
            return c[k]

        return dist, conf, dr.gamma

    first = _fractions(torch.softmax(t.prefill(prompt)[1].logits[0, -1], -1))
    got = exact_output_distribution(p_target, None, None, policy, gamma=2, n_tokens=3, first_token_dist=first,
                                    round_fn=round_fn)
    want = target_output_distribution(p_target, first, n_tokens=3)
    assert sum(got.values()) == 1 and got == want


# -- errors -------------------------------------------------------------------------------------------
def _edit_config(folder, **changes):
    c = json.loads((folder / "config.json").read_text())
    for k, v in changes.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    (folder / "config.json").write_text(json.dumps(c))


def _edit_weights(folder, drop=None, reshape=None):
    st = load_file(str(folder / "model.safetensors"))
    if drop:
        st.pop(drop)
    if reshape:
        st[reshape] = torch.zeros(3, 3)
    save_file(st, str(folder / "model.safetensors"))


BROKEN = {
    "vocabulary": (lambda f: _edit_config(f, vocab_size=1000), "vocabulary of 1000"),
    "hidden size": (lambda f: _edit_config(f, hidden_size=64), "hidden size 64"),
    "layer out of range": (lambda f: _edit_config(f, target_layer_ids=[-1, 1, 7]), "out of range"),
    "final layer": (lambda f: _edit_config(f, target_layer_ids=[-1, 1, 3]), "final layer 3 is excluded"),
    "layer order": (lambda f: _edit_config(f, target_layer_ids=[2, 1]), "strictly increasing"),
    "missing field": (lambda f: _edit_config(f, block_size=None), r"lacks the fields \['block_size'\]"),
    "missing head type": (lambda f: _edit_config(f, markov_head_type=None), "markov_head_type"),
    "gemma": (lambda f: _edit_config(f, architectures=["Gemma4DSparkModel"]), "only Qwen3"),
    "bad json": (lambda f: (f / "config.json").write_text("{oops"), "not valid JSON"),
    "no config": (lambda f: (f / "config.json").unlink(), "no config.json"),
    "missing tensor": (lambda f: _edit_weights(f, drop="layers.1.self_attn.k_norm.weight"),
                       r"missing \['layers.1.self_attn.k_norm.weight'\]"),
    "misshapen tensor": (lambda f: _edit_weights(f, reshape="fc.weight"), "fc.weight is"),
    "no weights": (lambda f: (f / "model.safetensors").unlink(), "no model.safetensors"),
    "corrupt weights": (lambda f: (f / "model.safetensors").write_bytes(b"\x00" * 64), "cannot be read"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_folder_or_a_wrong_pairing_says_what_is_wrong(qwen, tmp_path, case):
    folder = write_deepspec(tmp_path / "ds", qwen.config)
    breaks, message = BROKEN[case]
    breaks(folder)
    with pytest.raises(ValueError, match=message):
        load_drafter(folder, qwen)


def test_target_without_the_drafters_layers_is_told_how_to_load(qwen_dir, qwen, tmp_path):
    folder = write_deepspec(tmp_path / "ds", qwen.config, layer_ids=[0, 1])
    with pytest.raises(ValueError, match=r"feature_layers=\[1, 2\]"):
        load_drafter(folder, qwen)
    wider = TargetModel(qwen.model, qwen.tokenizer, "q", "cpu", torch.float32, feature_layers=[0, 1, 2, 3])
    narrow = load_drafter(write_deepspec(tmp_path / "ds2", qwen.config), wider)       # columns picked
    same = load_drafter(tmp_path / "ds2", qwen)
    ids = qwen.chat_ids("Hello")
    a = narrow.propose(narrow.begin(Context(ids, wider.prefill(ids, features=True)[1].features[0])), 5, len(ids),
                       0.0, None)
    b = same.propose(same.begin(Context(ids, qwen.prefill(ids, features=True)[1].features[0])), 5, len(ids), 0.0, None)
    assert a.tokens == b.tokens and a.confidence == b.confidence


def test_cli_generate_takes_a_drafter_folder(qwen_dir, qwen, tmp_path, capsys):
    from dspark_viz.cli import main

    folder = write_deepspec(tmp_path / "ds", qwen.config)
    rc = main(["generate", "Hi", "--drafter", str(folder), "--target", str(qwen_dir), "--device", "cpu",
               "--dtype", "fp32", "--max-new-tokens", "6", "--no-color"])
    assert rc == 0 and "drafter ds" in capsys.readouterr().err
    assert main(["export", "eagle", str(tmp_path / "out")]) == 2
    assert "no DeepSpec equivalent" in capsys.readouterr().err


# -- export -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_llama():
    return tiny_llama_target(vocab_size=48, hidden_size=64, n_layers=4, eos=47)


def _ours(t, algo):
    cfg = DrafterConfig.for_target(t, algo, draft_vocab=24, rank=8, gamma=4)
    torch.manual_seed(0)
    m = build_model(cfg, t, torch.arange(0, 48, 2))
    init_from_target(m, t)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return NeuralDrafter(m, algo, t)


@pytest.mark.parametrize("algo", ["dspark", "dspark-rnn", "dflash"])
def test_export_loads_back_and_drafts_identically(tiny_llama, tmp_path, algo):
    t, ours = tiny_llama, _ours(tiny_llama, algo)
    back = load_drafter(export_drafter(ours, t, tmp_path / "out"), t)
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["target_layer_ids"] == [l - 1 for l in t.feature_layers] and cfg["mask_token_id"] == 47
    ids = [1, 5, 9, 3, 7, 11, 2]
    _, out = t.prefill(ids, features=True)
    for T in (0.0, 1.0):
        a = ours.propose(ours.begin(Context(ids, out.features[0])), 4, len(ids), T, torch.Generator().manual_seed(2))
        b = back.propose(back.begin(Context(ids, out.features[0])), 4, len(ids), T, torch.Generator().manual_seed(2))
        assert a.tokens == b.tokens
        torch.testing.assert_close(a.p_draft, b.p_draft, atol=1e-6, rtol=1e-5)
        assert float(b.p_draft[:, 1::2].sum()) == 0.0                # outside the draft vocabulary: exactly 0
        assert (a.confidence is None) == (b.confidence is None)
        if a.confidence is not None:
            assert a.confidence == pytest.approx(b.confidence, abs=1e-6)
    sp = speculative_generate(t, back, prompt_ids=ids, max_new_tokens=16, temperature=0)
    assert sp.output_ids == speculative_generate(t, ours, prompt_ids=ids, max_new_tokens=16, temperature=0).output_ids


@pytest.mark.parametrize("qk_norm", ["unit", "scaled"])
def test_export_with_qk_norm_is_a_loadable_deepspec_model(tiny_llama, tmp_path, qk_norm):
    t, ours = tiny_llama, _ours(tiny_llama, "dspark")
    scale = measure_qk_scale(ours, t, ["abc", "hello"]) if qk_norm == "scaled" else None
    out = export_drafter(ours, t, tmp_path / "out", qk_norm=qk_norm, qk_scale=scale)
    st = load_file(str(out / "model.safetensors"))
    want = scale[0] if scale else (1.0, 1.0)
    assert float(st["layers.0.self_attn.q_norm.weight"][0]) == pytest.approx(want[0])
    assert float(st["layers.0.self_attn.k_norm.weight"][0]) == pytest.approx(want[1])
    back = load_drafter(out, t)
    assert back.model.cfg.qk_norm and back.has_confidence
    sp = speculative_generate(t, back, prompt_ids=[1, 2, 3], max_new_tokens=12, temperature=0)
    assert sp.output_ids == plain_generate(t, prompt_ids=[1, 2, 3], max_new_tokens=12, temperature=0).output_ids


def test_export_refuses_what_has_no_deepspec_equivalent(tiny_llama, tmp_path):
    t = tiny_llama
    eagle = NeuralDrafter(build_model(DrafterConfig.for_target(t, "eagle", draft_vocab=24, rank=8, gamma=4), t,
                                      torch.arange(24)), "eagle", t)
    with pytest.raises(ValueError, match="no DeepSpec equivalent"):
        export_drafter(eagle, t, tmp_path / "e")
    with pytest.raises(ValueError, match="needs qk_scale"):
        export_drafter(_ours(t, "dspark"), t, tmp_path / "s", qk_norm="scaled")
    export_drafter(_ours(t, "dspark"), t, tmp_path / "x")
    with pytest.raises(ValueError, match="not empty"):
        export_drafter(_ours(t, "dspark"), t, tmp_path / "x")


@pytest.mark.slow
def test_shipped_dspark_exports_and_drafts_identically(real_target, tmp_path):
    ours = load_drafter("dspark", real_target)
    back = load_drafter(export_drafter(ours, real_target, tmp_path / "dspark_deepspec"), real_target)
    ids = real_target.chat_ids("Explain step by step how to find the median of a list of numbers.")
    cache, out = real_target.prefill(ids, features=True, last_only=True)
    x0 = int(out.logits[0, -1].argmax())
    a = ours.propose(ours.begin(Context(ids, out.features[0])), x0, len(ids), 0.0, None)
    b = back.propose(back.begin(Context(ids, out.features[0])), x0, len(ids), 0.0, None)
    assert a.tokens == b.tokens
    assert a.confidence == pytest.approx(b.confidence, abs=1e-5)
    assert back.calibration is not None                          # the STS file travels beside the folder
    for pol in (FixedLength(7), None):                             # None: Algorithm 1 on calibrated confidences
        sa = speculative_generate(real_target, ours, prompt_ids=ids, max_new_tokens=48, temperature=0, policy=pol)
        sb = speculative_generate(real_target, back, prompt_ids=ids, max_new_tokens=48, temperature=0, policy=pol)
        assert sa.output_ids == sb.output_ids
        assert [(r.ell, r.accepted) for r in sa.rounds] == [(r.ell, r.accepted) for r in sb.rounds]
