"""Training settings of a drafter (frozen dataclass; the loss weights and position decay follow the paper, §3.3)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 4000
    lr: float = 6e-4
    warmup: int = 100
    weight_decay: float = 0.0
    blocks_per_seq: int = 64             # anchors sampled per sequence (its context is encoded once)
    seqs_per_step: int = 4
    w_ce: float = 0.1
    w_l1: float = 0.9
    w_conf: float = 1.0
    conf_grad: bool = True               # the confidence loss also trains the backbone and the sequential head (the
                                         # paper trains the three terms jointly); False: it trains the confidence head only
    decay: float | None = None           # w_k = exp(−(k−1)/decay); None: decay = γ (the paper)
    seed: int = 0
    precision: str = "auto"             # fp32 | bf16 (autocast) | auto: bf16 on CUDA; on a CPU the faster, timed
    ckpt_every: int = 200
    compile: str = "auto"               # the loss through torch.compile: on | off | auto (runs of ≥ 300 steps)
