"""Building, saving and loading the neural drafters (safetensors weights + a JSON card).

The target's embedding and LM head are shared and frozen: they are never written to the drafter
file. Loading checks the card against the target (vocabulary hash, hidden size, feature layers)
and the weights file against the card's sha256, refusing a mismatched or corrupted drafter.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from .. import fast, registry
from ..calibration import STSCalibration
from ..settings import assets
from .config import SHIPPED, DrafterConfig
from .deepspec_config import calibration_file, is_drafter_dir
from .dspark import DSparkModel
from .eagle import EagleModel
from .neural_drafter import NeuralDrafter

FORMAT = "dspark_viz-drafter/1"
ASSETS = assets("drafters")
# the neural families: registry.DrafterEntry.family → model class (drafters.register_drafter(…, model=) adds one)
MODELS: dict[str, type] = {"dspark": DSparkModel, "eagle": EagleModel}


def model_class(algo: str) -> type:
    """The model class of a neural drafter, by its table entry's family."""
    entry = registry.DRAFTERS.get(algo)
    if entry is None or entry.family not in MODELS:
        known = ", ".join(n for n, e in registry.DRAFTERS.items() if e.family in MODELS)
        raise ValueError(f"{algo!r} is not a neural drafter: {known}")
    return MODELS[entry.family]


def build_model(cfg: DrafterConfig, target, vocab_ids: torch.Tensor):
    emb, head = target.embed_weight.detach(), target.lm_head_weight.detach()
    return model_class(cfg.algo)(cfg, emb, head, vocab_ids).to(target.device)


def init_from_target(model, target) -> None:
    """Copy the target's top decoder layers into the draft layers (same parameter names)."""
    tl = target.model.model.layers
    layers = list(model.layers) if hasattr(model, "layers") and not hasattr(model, "backbone") else \
        list(model.backbone.layers)
    for i, layer in enumerate(layers):
        src = tl[len(tl) - len(layers) + i].state_dict()
        missing = layer.load_state_dict({k: v for k, v in src.items() if k in layer.state_dict()}, strict=False)
        if missing.missing_keys:
            raise RuntimeError(f"cannot initialise draft layer from target: {missing.missing_keys}")
    if hasattr(model, "backbone"):
        model.backbone.mask_emb.data.copy_(target.embed_weight.detach().float().mean(0))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def trainable_state(model) -> dict[str, torch.Tensor]:
    """Everything the drafter owns (not the target's frozen embedding / LM head)."""
    return {k: v for k, v in model.state_dict().items()}


def save_drafter(model, target, path: str | Path, card_extra: dict | None = None, dtype=torch.float16) -> Path:
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    st = {k: (v.to(dtype) if v.is_floating_point() else v).contiguous().cpu() for k, v in trainable_state(model).items()}
    weights = path.with_suffix(".safetensors")
    save_file(st, str(weights))
    card = {"format": FORMAT, "algo": model.cfg.algo, "config": model.cfg.to_dict(), "target_id": target.name,
            "vocab_hash": target.vocab_hash, "vocab_size": target.vocab_size, "draft_vocab": int(model.vocab_ids.numel()),
            "n_params": int(sum(v.numel() for v in st.values())), "sha256": _sha256(weights), **(card_extra or {})}
    path.with_suffix(".json").write_text(json.dumps(card, indent=1))
    return weights


def read_card(path: str | Path) -> dict:
    p = Path(path).with_suffix(".json")
    if not p.exists():
        raise FileNotFoundError(f"no drafter card at {p}")
    try:
        card = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"drafter card {p} is not valid JSON: {e}") from e
    if not isinstance(card, dict) or card.get("format") != FORMAT:
        raise ValueError(f"{p} is not a dspark_viz drafter card (format {FORMAT!r} expected)")
    return card


def load_drafter_file(path: str | Path, target, name: str | None = None) -> NeuralDrafter:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    card = read_card(path)
    weights = path.with_suffix(".safetensors")
    if not weights.exists():
        raise FileNotFoundError(f"drafter weights missing: {weights}")
    if card.get("vocab_hash") != target.vocab_hash or card.get("vocab_size") != target.vocab_size:
        raise ValueError(f"drafter {path.name} was trained for target {card.get('target_id')!r} "
                         f"(vocabulary {card.get('vocab_hash')}), not for {target.name!r} ({target.vocab_hash})")
    if card.get("sha256") and _sha256(weights) != card["sha256"]:
        raise ValueError(f"drafter weights {weights} are corrupted (checksum does not match its card)")
    cfg = DrafterConfig.from_dict(card["config"])
    if cfg.hidden_size != target.hidden_size or any(l >= target.n_layers for l in cfg.feature_layers):
        raise ValueError(f"drafter {path.name} does not fit target {target.name} (hidden size / layers)")
    try:
        st = load_file(str(weights))
    except (SafetensorError, OSError) as e:
        raise ValueError(f"drafter weights {weights} cannot be read: {e}") from e
    model = build_model(cfg, target, st["vocab_ids"])
    missing, unexpected = model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in st.items()},
                                                strict=False)
    if unexpected or missing:
        raise ValueError(f"drafter weights {weights} do not match its config (missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]})")
    model.to(device=target.device, dtype=target.dtype if target.dtype != torch.float16 else torch.float32)
    model.W_vd = model.W_vd.to(next(model.parameters()).dtype)
    model.vocab_product = fast.install_drafter(model, getattr(target, "paths", None))   # the target's kernel too
    return NeuralDrafter(model, name or card["algo"], target, card)


def is_card_path(name) -> bool:
    """A drafter given as its card file (``… .json``) rather than a shipped name."""
    return str(name).endswith(".json")


def calibration_path(name: str) -> Path:
    """Where `dspark-viz calibrate` saves a drafter's STS temperatures: beside the shipped file, or beside a
    drafter given as its card (FILE.json → FILE.sts.json)."""
    if is_card_path(name):
        return Path(name).with_suffix(".sts.json")
    if is_drafter_dir(name):                                           # a DeepSpec folder DIR → DIR.sts.json
        return calibration_file(name)
    return ASSETS / f"{SHIPPED.get(name, name)}.sts.json"


def _calibrate(d: NeuralDrafter, cal: Path, calibrated: bool) -> NeuralDrafter:
    """Attach the saved STS calibration (if any; used by decoding) to a drafter with a confidence head."""
    if calibrated and d.has_confidence and cal.exists():
        d.calibration = STSCalibration.load(cal)
    return d


def load_shipped(name: str, target, path: str | Path | None = None, calibrated: bool = True) -> NeuralDrafter:
    """A shipped drafter by name; its saved STS calibration (if any) is attached and used by decoding."""
    if name not in SHIPPED:
        raise ValueError(f"unknown neural drafter {name!r}: {', '.join(SHIPPED)}")
    p = Path(path) if path else ASSETS / f"{SHIPPED[name]}.json"
    if not p.exists():
        raise FileNotFoundError(f"the shipped drafter {name!r} is missing ({p}); train it with "
                                f"`dspark-viz train --algo {name}`")
    return _calibrate(load_drafter_file(p, target, name), calibration_path(name), calibrated)


def load_card(path: str | Path, target, calibrated: bool = True) -> NeuralDrafter:
    """A drafter from its card file (e.g. one `dspark-viz train --out FILE.json` wrote), with the STS
    calibration saved beside it (FILE.sts.json) when there is one."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no drafter card at {p} (give a .json card written by `dspark-viz train --out`)")
    return _calibrate(load_drafter_file(p, target), calibration_path(str(p)), calibrated)
