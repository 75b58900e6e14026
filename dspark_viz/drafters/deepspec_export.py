"""Export one of our DSpark-family drafters (dspark, dspark-rnn, dflash) as a DeepSpec ``save_pretrained`` folder.

Legend: V target vocabulary, V_d our draft vocabulary (sorted token ids), d hidden size, r our head rank,
R = r + 1 the exported rank, C the constant logit of tokens outside V_d, L target layers.

What maps to what (drafters/deepspec.py reads it back; docs/deepspec.md):
  backbone.fc / ctx_norm / norm / layers.i.*  → fc / hidden_norm / norm / layers.i.* (same parameter names)
  backbone.mask_emb                            → embed_tokens[mask_token_id]; the other rows are the target's
                                                 embedding. The mask id is a stop token of the target by
                                                 default: a round never starts from a stop token, so no anchor
                                                 is embedded through the overwritten row.
  target LM head rows of V_d                   → lm_head rows of V_d; every other row is 0
  head.W1 (V_d + 1, r), head.W2 (r → V_d)      → markov_w1 (V, R), markov_w2 (R → V): token t gets W1's row for
                                                 t (the shared "outside" row when t ∉ V_d); the extra dimension
                                                 r carries 1 into markov_w2[:, r] = C for tokens ∉ V_d, 0 inside.
  RNN gate (2r + d → 3r)                        → joint_proj (2R + d → 3R), the extra output unit of o pinned
                                                 to tanh(PIN) = 1 so the same C reaches markov_w2.
  DFlash (no head)                             → a rank-1 vanilla head that only adds C outside V_d.
  conf.lin ([h; W1[x]] → 1)                    → confidence_head.proj, weight 0 on the extra dimension.
Tokens outside V_d thus get the logit C = OUTSIDE_LOGIT exactly (lm_head row 0 + bias C), never −inf (bf16 and
engines handle a finite constant everywhere): softmax((U + B) / T) gives them probability exactly 0 in float32
for every T ≤ 10, the same as our drafter's p_draft, and argmax never picks them — the drafts stay identical.
Feature layers: our hidden_states index l becomes DeepSpec's target_layer_id l − 1.

Our draft layers have no per-head q/k RMSNorm, which DeepSpec's (and vLLM's) Qwen3 draft layer always
applies, and a per-token normalisation cannot be undone through its weights. ``qk_norm="none"`` (default)
omits q_norm / k_norm and records ``dspark_viz.qk_norm: false``: this folder drafts identically here, but
DeepSpec / vLLM would refuse it (missing tensors) or run an initialised norm. The other two write the norms,
so every engine loads the folder and runs the same — different — drafter: ``"unit"`` with weights 1 (attention
logits shrink to unit-RMS queries and keys), ``"scaled"`` with each layer's mean per-head RMS of q and of k
measured on prompts (measure_qk_scale), which keeps the logits at their usual size.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..protocol import Context
from .deepspec_config import calibration_file
from .dspark import DSparkModel

OUTSIDE_LOGIT = -1.0e4          # C: the logit of every token outside our draft vocabulary
PIN = 30.0                      # tanh(PIN) == 1.0 in float32 and bfloat16
EXPORTABLE = ("dspark", "dspark-rnn", "dflash")
QK_NORMS = ("none", "unit", "scaled")


def _refuse(drafter) -> None:
    model = getattr(drafter, "model", None)
    algo = getattr(getattr(model, "cfg", None), "algo", None)
    if algo == "eagle":
        raise ValueError("an EAGLE-style drafter has no DeepSpec equivalent (DeepSpec's EAGLE-3 is another model "
                         "with its own layout): export dspark, dspark-rnn or dflash")
    if not isinstance(model, DSparkModel) or algo not in EXPORTABLE:
        raise ValueError(f"only our DSpark-family drafters ({', '.join(EXPORTABLE)}) export to DeepSpec's layout; "
                         f"got {getattr(drafter, 'name', drafter)!r}")


def _heads(model: DSparkModel, V: int, C: float) -> tuple[dict[str, torch.Tensor], str, int]:
    """markov_head.* tensors at full vocabulary, the head type and the exported rank R."""
    vid, f2d = model.vocab_ids.cpu(), model.full2draft.cpu()
    head = model.head
    if head is None:                                                    # DFlash: only the vocabulary mask
        w1, w2 = torch.ones(V, 1), torch.full((V, 1), C)
        w2[vid] = 0.0
        return {"markov_head.markov_w1.weight": w1, "markov_head.markov_w2.weight": w2}, "vanilla", 1
    r = head.W1.weight.shape[1]
    R = r + 1
    w1 = torch.zeros(V, R)
    w1[:, :r] = head.W1.weight.detach().float().cpu()[f2d]               # (V, r): outside tokens share row V_d
    w2 = torch.zeros(V, R)
    w2[:, r] = C
    w2[vid, r] = 0.0
    w2[vid, :r] = head.W2.weight.detach().float().cpu()                  # (V_d, r)
    out = {"markov_head.markov_w1.weight": w1, "markov_head.markov_w2.weight": w2}
    if head.kind == "markov":
        w1[:, r] = 1.0                                                   # the constant that carries C
        return out, "vanilla", R
    d = model.cfg.hidden_size
    Wg, bg = head.gate.weight.detach().float().cpu(), head.gate.bias.detach().float().cpu()   # (3r, 2r+d), (3r,)
    W, b = torch.zeros(3 * R, 2 * R + d), torch.zeros(3 * R)
    for ri, ro in ((0, 0), (r, R), (2 * r, 2 * R)):                      # output blocks g, c, o: ours → exported
        b[ro:ro + r] = bg[ri:ri + r]
        for ci, co, w in ((0, 0, r), (r, R, r), (2 * r, 2 * R, d)):      # input blocks s, e, h: (ours, exported, width)
            W[ro:ro + r, co:co + w] = Wg[ri:ri + r, ci:ci + w]
    b[2 * R + r] = PIN                                                   # tanh(o_r) = 1 → bias C outside V_d
    out |= {"markov_head.joint_proj.weight": W, "markov_head.joint_proj.bias": b}
    return out, "rnn", R


@torch.inference_mode()
def measure_qk_scale(drafter, target, prompts: list[str], max_prompt_tokens: int = 512) -> list[tuple[float, float]]:
    """Per draft layer, (mean per-head RMS of the queries, of the keys) that ``drafter`` computes over the
    context and one draft block of each prompt: the scalar q_norm / k_norm weights for ``qk_norm="scaled"``."""
    _refuse(drafter)
    model, Dh = drafter.model, drafter.model.cfg.head_dim
    sums: dict[str, list[float]] = {}

    def hook(name):
        def record(mod, inp, out):                                       # out (T, heads · Dh)
            rms = out.float().reshape(-1, Dh).pow(2).mean(-1).sqrt()     # one RMS per (token, head)
            s = sums.setdefault(name, [0.0, 0])
            s[0], s[1] = s[0] + float(rms.sum()), s[1] + rms.numel()
        return record

    handles = [h for i, layer in enumerate(model.backbone.layers)
               for h in (layer.self_attn.q_proj.register_forward_hook(hook(f"q{i}")),
                         layer.self_attn.k_proj.register_forward_hook(hook(f"k{i}")))]
    try:
        for text in prompts:
            ids = target.chat_ids(text)[-max_prompt_tokens:]
            _, out = target.prefill(ids, features=True, last_only=True)
            st = drafter.begin(Context(ids, out.features[0]))
            drafter.propose(st, int(out.logits[0, -1].argmax()), len(ids), 0.0, None)
    finally:
        for h in handles:
            h.remove()
    if not sums:
        raise ValueError("measure_qk_scale needs at least one prompt")
    return [(sums[f"q{i}"][0] / sums[f"q{i}"][1], sums[f"k{i}"][0] / sums[f"k{i}"][1])
            for i in range(len(model.backbone.layers))]


def export_tensors(drafter, target, mask_token_id: int | None = None, qk_norm: str = "none",
                   qk_scale: list[tuple[float, float]] | None = None,
                   outside_logit: float = OUTSIDE_LOGIT) -> tuple[dict[str, torch.Tensor], dict]:
    """(state dict in DeepSpec's names, float32 on CPU; config.json as a dict) for ``drafter`` on ``target``."""
    _refuse(drafter)
    if qk_norm not in QK_NORMS:
        raise ValueError(f"qk_norm must be one of {', '.join(QK_NORMS)}, got {qk_norm!r}")
    model: DSparkModel = drafter.model
    if qk_norm == "scaled" and (qk_scale is None or len(qk_scale) != len(model.backbone.layers)):
        raise ValueError("qk_norm='scaled' needs qk_scale: one (q, k) pair per draft layer (measure_qk_scale)")
    cfg, V, L = model.cfg, target.vocab_size, target.n_layers
    if mask_token_id is None and not target.stop_ids:
        raise ValueError(f"target {target.name} has no stop token to hold the MASK embedding: give mask_token_id")
    mask = min(target.stop_ids) if mask_token_id is None else int(mask_token_id)
    if not 0 <= mask < V:
        raise ValueError(f"mask_token_id {mask} is outside the vocabulary 0…{V - 1}")
    f32 = {k: v.detach().float().cpu() for k, v in model.state_dict().items() if v.is_floating_point()}
    bb = model.backbone
    st: dict[str, torch.Tensor] = {}
    embed = target.embed_weight.detach().float().cpu().clone()                  # (V, d)
    embed[mask] = f32["backbone.mask_emb"]
    lm = torch.zeros(V, cfg.hidden_size)
    lm[model.vocab_ids.cpu()] = target.lm_head_weight.detach().float().cpu()[model.vocab_ids.cpu()]
    st |= {"embed_tokens.weight": embed, "lm_head.weight": lm, "fc.weight": f32["backbone.fc.weight"],
           "hidden_norm.weight": f32["backbone.ctx_norm.weight"], "norm.weight": f32["backbone.norm.weight"]}
    for i in range(len(bb.layers)):
        pre = f"backbone.layers.{i}."
        st |= {f"layers.{i}.{k[len(pre):]}": v for k, v in f32.items() if k.startswith(pre)}
        if qk_norm != "none":
            sq, sk = qk_scale[i] if qk_norm == "scaled" else (1.0, 1.0)
            st[f"layers.{i}.self_attn.q_norm.weight"] = torch.full((cfg.head_dim,), float(sq))
            st[f"layers.{i}.self_attn.k_norm.weight"] = torch.full((cfg.head_dim,), float(sk))
    heads, head_type, R = _heads(model, V, outside_logit)
    st |= heads
    if model.conf is not None:
        w = torch.zeros(1, cfg.hidden_size + R)
        w[:, :cfg.hidden_size + R - 1] = f32["conf.lin.weight"]
        st |= {"confidence_head.proj.weight": w, "confidence_head.proj.bias": f32["conf.lin.bias"]}
    if any(l >= L for l in cfg.feature_layers):
        raise ValueError(f"drafter feature layers {list(cfg.feature_layers)} do not fit a {L}-layer target")
    tc = target.config
    config = {
        "architectures": ["Qwen3DSparkModel"], "model_type": "qwen3",
        "vocab_size": V, "hidden_size": cfg.hidden_size, "intermediate_size": cfg.d_ff,
        "num_attention_heads": cfg.n_heads, "num_key_value_heads": cfg.n_kv_heads, "head_dim": cfg.head_dim,
        "hidden_act": "silu", "rms_norm_eps": cfg.rms_eps, "attention_bias": False, "attention_dropout": 0.0,
        "rope_theta": cfg.rope_theta, "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        "max_position_embeddings": int(getattr(tc, "max_position_embeddings", 2048) or 2048),
        "bos_token_id": getattr(tc, "bos_token_id", None), "eos_token_id": getattr(tc, "eos_token_id", None),
        "tie_word_embeddings": False, "use_cache": True, "dtype": "float32",
        "num_hidden_layers": len(bb.layers), "layer_types": ["full_attention"] * len(bb.layers),
        "num_target_layers": L, "block_size": cfg.gamma, "mask_token_id": mask,
        "target_layer_ids": [l - 1 for l in cfg.feature_layers], "num_anchors": 512,
        "markov_rank": R, "markov_head_type": head_type,
        "enable_confidence_head": model.conf is not None,
        **({"confidence_head_with_markov": True} if model.conf is not None else {}),
        "dspark_viz": {"qk_norm": qk_norm != "none", "qk_norm_weights": qk_norm, "source": drafter.name,
                       "algo": cfg.algo, "draft_vocab": int(model.vocab_ids.numel()), "outside_logit": outside_logit,
                       "target": target.name, "vocab_hash": target.vocab_hash},
    }
    return st, config


def export_drafter(drafter, target, out_dir, dtype: torch.dtype = torch.float32, mask_token_id: int | None = None,
                   qk_norm: str = "none", qk_scale: list[tuple[float, float]] | None = None,
                   overwrite: bool = False) -> Path:
    """Write ``drafter`` as ``out_dir/{config.json, model.safetensors}`` in DeepSpec's layout; returns out_dir.
    float32 (default) keeps every weight exact; bfloat16 halves the size and rounds the weights. With
    qk_norm "none" the drafter's STS calibration, if any, is saved beside the folder (``OUT_DIR.sts.json``),
    where loading finds it (the other variants are other drafters: calibrate them anew)."""
    from safetensors.torch import save_file

    out = Path(out_dir).expanduser()
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ValueError(f"{out} exists and is not empty: choose a new folder (or pass overwrite)")
    st, config = export_tensors(drafter, target, mask_token_id, qk_norm, qk_scale)
    config["dtype"] = str(dtype).replace("torch.", "")
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(dtype).contiguous() for k, v in st.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    if getattr(drafter, "calibration", None) is not None and qk_norm == "none":    # fitted on this drafter
        drafter.calibration.save(calibration_file(out))
    return out
