"""``dspark-viz export DRAFTER OUT_DIR``: one of our DSpark-family drafters as a DeepSpec checkpoint folder."""
from __future__ import annotations

import argparse
import json

import torch

from .. import registry
from ..drafters import load_drafter
from ..drafters.deepspec_config import is_drafter_dir
from ..drafters.deepspec_export import EXPORTABLE, QK_NORMS, export_drafter, measure_qk_scale
from ..evaluation.full_block import load_eval_prompts
from ..settings import assets
from .common import add_target_args, load_target_from_args

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("drafter", help=f"a shipped drafter ({', '.join(EXPORTABLE)}) or a drafter card FILE.json "
                   "you trained")
    p.add_argument("out_dir", help="the folder to write config.json and model.safetensors into")
    p.add_argument("--out-dtype", default="fp32", choices=sorted(DTYPES),
                   help="fp32 (default) keeps every weight exact; bf16 halves the size and rounds the weights")
    p.add_argument("--qk-norm", default="none", choices=list(QK_NORMS),
                   help="none (default): no q/k norm tensors, drafts exactly as here; unit / scaled: q/k RMSNorm "
                   "tensors that DeepSpec and vLLM need, weights 1 or each layer's measured RMS (a different "
                   "drafter: see docs/deepspec.md)")
    p.add_argument("--scale-prompts", default=str(assets("prompts", "train.jsonl")),
                   help="JSONL prompts the scaled q/k norm is measured on (default: the shipped train prompts)")
    p.add_argument("--scale-per-domain", type=int, default=8, help="prompts per domain for --qk-norm scaled")
    p.add_argument("--mask-token-id", type=int, default=None,
                   help="embedding row that holds our MASK vector (default: a stop token of the target)")
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty OUT_DIR")
    add_target_args(p)


def run_export(a: argparse.Namespace) -> int:
    name = a.drafter.strip()
    if name.endswith("+lookup") or (name in registry.DRAFTERS and name not in EXPORTABLE):   # eagle, lookup, …
        raise ValueError(f"{name!r} cannot be exported: an EAGLE-style drafter has no DeepSpec equivalent, and "
                         f"lookup has no weights; export {', '.join(EXPORTABLE)} or a card of one of them")
    if is_drafter_dir(name):
        raise ValueError(f"{name} is a folder (already a DeepSpec checkpoint?): give a shipped drafter name or a "
                         f"drafter card FILE.json")
    target = load_target_from_args(a)
    drafter = load_drafter(name, target)
    scale = None
    if a.qk_norm == "scaled":
        recs = load_eval_prompts([a.scale_prompts], per_domain=a.scale_per_domain)
        scale = measure_qk_scale(drafter, target, [r["turns"][0] for r in recs])
    out = export_drafter(drafter, target, a.out_dir, dtype=DTYPES[a.out_dtype], mask_token_id=a.mask_token_id,
                         qk_norm=a.qk_norm, qk_scale=scale, overwrite=a.overwrite)
    cfg = json.loads((out / "config.json").read_text())
    print(f"wrote {out}/config.json and model.safetensors: {cfg['markov_head_type']} head, rank "
          f"{cfg['markov_rank']}, block {cfg['block_size']}, target_layer_ids {cfg['target_layer_ids']}, "
          f"mask_token_id {cfg['mask_token_id']}, qk_norm {a.qk_norm}; load it with --drafter {out}")
    return 0
