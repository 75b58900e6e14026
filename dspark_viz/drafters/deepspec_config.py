"""DeepSpec drafter folders (``save_pretrained`` layout): config.json read and checked against a target, the
safetensors weights read and checked against the config.

Legend: V vocabulary (embedding rows), d hidden size, L target decoder layers, m target layers read,
r Markov rank, γ block size.

A DeepSpec DSpark folder holds ``config.json`` — the target's own Qwen3 fields (hidden size, heads, head
size, RoPE, vocabulary) copied, plus the drafter's: ``block_size``, ``mask_token_id``, ``target_layer_ids``,
``num_hidden_layers`` (draft layers), ``markov_rank``, ``markov_head_type``, ``enable_confidence_head``,
``confidence_head_with_markov`` — and ``model.safetensors``. DeepSpec's DFlash drafters are the same model
class (``Qwen3DSparkModel``) with ``markov_rank`` 0 and no confidence head.

Layer ids: −1 is the embedding output and id l the raw output of decoder layer l (0-based), i.e.
transformers' ``hidden_states[l + 1]``. TargetModel.feature_layers index ``hidden_states`` directly, so
our feature layer = id + 1. The final layer L − 1 is never allowed: ``hidden_states[L]`` is the
final-norm output, not the raw layer output the drafter was trained on.

``config.json`` may carry a ``dspark_viz`` block (written by drafters/deepspec_export.py, ignored by DeepSpec):
``qk_norm: false`` marks draft layers without per-head q/k RMSNorm.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

ARCHITECTURES = ("Qwen3DSparkModel",)
HEAD_TYPES = ("vanilla", "gated", "rnn")
EXT = "dspark_viz"
REQUIRED = ("architectures", "block_size", "mask_token_id", "target_layer_ids", "num_hidden_layers", "markov_rank",
            "enable_confidence_head", "vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "rms_norm_eps")
OTHER_LAYOUTS = {
    "Gemma4DSparkModel": "a Gemma-4 DSpark drafter; only Qwen3 DSpark/DFlash drafters are supported",
    "Qwen3Eagle3Model": "an EAGLE-3 drafter, not a DSpark/DFlash one",
    "Gemma4Eagle3Model": "an EAGLE-3 drafter, not a DSpark/DFlash one",
    "DFlashDraftModel": "z-lab's DFlash layout (trust_remote_code); DeepSpec's own DFlash checkpoints "
                        "(dflash_qwen3_*_block7) use Qwen3DSparkModel and load here",
}


@dataclass(frozen=True)
class DeepSpecConfig:
    path: Path
    gamma: int                          # block_size γ: slots [x0, MASK × (γ − 1)]
    mask_token_id: int
    target_layer_ids: tuple[int, ...]   # DeepSpec ids (−1 = embedding output)
    n_layers: int                       # draft decoder layers
    vocab_size: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    rms_eps: float
    rope_theta: float
    attention_bias: bool
    markov_rank: int                    # 0: no sequential head (DFlash)
    head_type: str | None               # vanilla | gated | rnn | None
    confidence: bool
    confidence_with_markov: bool
    qk_norm: bool = True
    num_target_layers: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def feature_layers(self) -> list[int]:
        """Our TargetModel feature layers (hidden_states indices) for target_layer_ids."""
        return [i + 1 for i in self.target_layer_ids]

    @property
    def algo(self) -> str:
        return "dflash" if self.head_type is None else ("dspark-rnn" if self.head_type == "rnn" else "dspark")


def is_drafter_dir(name) -> bool:
    """A drafter given as a folder (a DeepSpec ``save_pretrained`` checkpoint) rather than a name or a card."""
    return name is not None and Path(str(name)).expanduser().is_dir()


def calibration_file(folder) -> Path:
    """Where a drafter folder's STS calibration lives: beside it, ``DIR.sts.json`` (checkpoint folders, e.g.
    a Hugging Face cache snapshot, stay untouched)."""
    p = Path(str(folder)).expanduser()
    return p.parent / f"{p.name}.sts.json"


def feature_layers_for(name) -> list[int] | None:
    """The target feature layers a drafter folder (``DIR`` or ``DIR+lookup``) needs; None for anything else,
    so a caller can always pass the result to load_target(feature_layers=…)."""
    if name is None:
        return None
    base = str(name).removesuffix("+lookup")
    if not (is_drafter_dir(base) and (Path(base).expanduser() / "config.json").is_file()):
        return None                       # not a checkpoint folder: load_drafter says what is wrong
    return read_config(base).feature_layers


def _rope_theta(raw: dict, where: Path) -> float:
    rp = raw.get("rope_parameters") or {}
    scaling = raw.get("rope_scaling") or {}
    kind = rp.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind != "default":
        raise ValueError(f"{where}: RoPE type {kind!r} is not supported (only the default RoPE of Qwen3)")
    theta = rp.get("rope_theta", raw.get("rope_theta"))
    if theta is None:
        raise ValueError(f"{where}: no rope_theta (neither top-level nor in rope_parameters)")
    return float(theta)


def read_config(path) -> DeepSpecConfig:
    """Parse and validate ``DIR/config.json`` on its own (target checks: check_target)."""
    folder = Path(str(path)).expanduser()
    cfg_file = folder / "config.json"
    if not folder.is_dir():
        raise FileNotFoundError(f"no drafter folder at {folder}")
    if not cfg_file.is_file():
        raise ValueError(f"{folder} has no config.json: a DeepSpec drafter folder holds config.json and "
                         f"model.safetensors (as written by save_pretrained)")
    try:
        raw = json.loads(cfg_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{cfg_file} is not valid JSON: {e}") from e
    if not isinstance(raw, dict):
        raise ValueError(f"{cfg_file} must hold a JSON object")
    arch = list(raw.get("architectures") or [])
    for a in arch:
        if a in OTHER_LAYOUTS:
            raise ValueError(f"{folder} is {OTHER_LAYOUTS[a]} (architectures {arch})")
    if arch and not set(arch) & set(ARCHITECTURES):
        raise ValueError(f"{folder}: architectures {arch} is not a DeepSpec DSpark/DFlash drafter "
                         f"(expected {ARCHITECTURES[0]})")
    missing = [k for k in REQUIRED if k not in raw]
    rank = raw.get("markov_rank")
    if isinstance(rank, int) and rank > 0 and "markov_head_type" not in raw:
        missing.append("markov_head_type")
    if raw.get("enable_confidence_head") and "confidence_head_with_markov" not in raw:
        missing.append("confidence_head_with_markov")
    if missing:
        raise ValueError(f"{cfg_file} lacks the fields {missing}: is this a DeepSpec DSpark/DFlash checkpoint "
                         f"(config.json of Qwen3DSparkModel.save_pretrained)?")
    ints = ("block_size", "mask_token_id", "num_hidden_layers", "markov_rank", "vocab_size", "hidden_size",
            "num_attention_heads", "num_key_value_heads", "intermediate_size")
    bad = [k for k in ints if not isinstance(raw[k], int) or isinstance(raw[k], bool)]
    if bad:
        raise ValueError(f"{cfg_file}: fields {bad} must be integers")
    ids = raw["target_layer_ids"]
    if (not isinstance(ids, list) or not ids or any(not isinstance(i, int) or isinstance(i, bool) for i in ids)
            or any(i < -1 for i in ids) or any(b <= a for a, b in zip(ids, ids[1:]))):
        raise ValueError(f"{cfg_file}: target_layer_ids {ids!r} must be a non-empty, strictly increasing list "
                         f"of layer ids ≥ −1 (−1 = the embedding output)")
    rank, head = raw["markov_rank"], raw.get("markov_head_type")
    head = str(head).lower() if rank > 0 else None
    if rank < 0 or (head is not None and head not in HEAD_TYPES):
        raise ValueError(f"{cfg_file}: markov_rank {rank} / markov_head_type {head!r} invalid "
                         f"(rank ≥ 0; type one of {', '.join(HEAD_TYPES)})")
    conf = bool(raw["enable_confidence_head"])
    with_markov = conf and bool(raw.get("confidence_head_with_markov"))
    if with_markov and head is None:
        raise ValueError(f"{cfg_file}: confidence_head_with_markov needs a Markov head (markov_rank > 0)")
    if raw["block_size"] < 1 or raw["num_hidden_layers"] < 1:
        raise ValueError(f"{cfg_file}: block_size and num_hidden_layers must be ≥ 1")
    if not 0 <= raw["mask_token_id"] < raw["vocab_size"]:
        raise ValueError(f"{cfg_file}: mask_token_id {raw['mask_token_id']} is outside the vocabulary "
                         f"0…{raw['vocab_size'] - 1}")
    if raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"{cfg_file}: hidden_act {raw['hidden_act']!r} is not supported (silu)")
    H, Hk = raw["num_attention_heads"], raw["num_key_value_heads"]
    if Hk < 1 or H % Hk:
        raise ValueError(f"{cfg_file}: {H} attention heads are not a multiple of {Hk} key/value heads")
    extra = raw.get(EXT) or {}
    n_target = raw.get("num_target_layers")
    return DeepSpecConfig(
        path=folder, gamma=raw["block_size"], mask_token_id=raw["mask_token_id"], target_layer_ids=tuple(ids),
        n_layers=raw["num_hidden_layers"], vocab_size=raw["vocab_size"], hidden_size=raw["hidden_size"],
        n_heads=H, n_kv_heads=Hk, head_dim=int(raw.get("head_dim") or raw["hidden_size"] // H),
        d_ff=raw["intermediate_size"], rms_eps=float(raw["rms_norm_eps"]), rope_theta=_rope_theta(raw, cfg_file),
        attention_bias=bool(raw.get("attention_bias", False)), markov_rank=rank, head_type=head, confidence=conf,
        confidence_with_markov=with_markov, qk_norm=bool(extra.get("qk_norm", True)),
        num_target_layers=int(n_target) if isinstance(n_target, int) else None, extra=dict(extra))


def check_target(cfg: DeepSpecConfig, target) -> None:
    """Refuse a drafter that was not trained for ``target`` (vocabulary, hidden size, layers)."""
    name = cfg.path.name
    fix = "load the target this drafter was trained for (e.g. Qwen/Qwen3-4B for dspark_qwen3_4b_block7)"
    if cfg.vocab_size != target.vocab_size:
        raise ValueError(f"drafter {name} has a vocabulary of {cfg.vocab_size} rows, target {target.name} has "
                         f"{target.vocab_size}: {fix}")
    if cfg.hidden_size != target.hidden_size:
        raise ValueError(f"drafter {name} reads hidden size {cfg.hidden_size}, target {target.name} has "
                         f"{target.hidden_size}: {fix}")
    L = target.n_layers
    if cfg.num_target_layers is not None and cfg.num_target_layers != L:
        raise ValueError(f"drafter {name} was trained on a {cfg.num_target_layers}-layer target, {target.name} "
                         f"has {L} layers: {fix}")
    bad = [i for i in cfg.target_layer_ids if i > L - 2]
    if bad:
        raise ValueError(f"drafter {name}: target_layer_ids {bad} out of range for a {L}-layer target (ids lie "
                         f"in −1…{L - 2}; the final layer {L - 1} is excluded because transformers returns its "
                         f"output after the final norm): {fix}")


def _weight_files(folder: Path) -> list[Path]:
    single, index = folder / "model.safetensors", folder / "model.safetensors.index.json"
    if single.is_file():
        return [single]
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{index} is not a safetensors index: {e}") from e
        files = [folder / n for n in names]
        gone = [f.name for f in files if not f.is_file()]
        if gone:
            raise ValueError(f"{folder}: weight shards {gone} listed in {index.name} are missing")
        return files
    raise ValueError(f"{folder} has no model.safetensors: a DeepSpec drafter folder holds config.json and "
                     f"model.safetensors (save_pretrained with safe_serialization)")


def read_weights(folder: Path, expected: dict[str, tuple]) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's safetensors file(s), checked by name and shape against ``expected``."""
    from safetensors import SafetensorError, safe_open

    found, out = {}, {}
    try:
        for f in _weight_files(folder):
            with safe_open(str(f), framework="pt") as fh:
                for k in fh.keys():
                    found[k] = (f, tuple(fh.get_slice(k).get_shape()))
    except (SafetensorError, OSError, ValueError) as e:
        if isinstance(e, ValueError) and "model.safetensors" in str(e):
            raise
        raise ValueError(f"the weights of {folder} cannot be read (corrupt or not safetensors): {e}") from e
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    shape = sorted(k for k in set(expected) & set(found) if found[k][1] != tuple(expected[k]))
    if missing or extra or shape:
        said = "; ".join(s for s in (f"missing {missing[:4]}" if missing else "",
                                     f"unexpected {extra[:4]}" if extra else "",
                                     ", ".join(f"{k} is {found[k][1]}, config says {tuple(expected[k])}"
                                               for k in shape[:4])) if s)
        raise ValueError(f"the weights of {folder} do not match its config.json ({said})")
    try:
        for f in sorted({v[0] for v in found.values()}):
            with safe_open(str(f), framework="pt") as fh:
                for k in fh.keys():
                    out[k] = fh.get_tensor(k)
    except (SafetensorError, OSError) as e:
        raise ValueError(f"the weights of {folder} cannot be read (corrupt file): {e}") from e
    return out
