"""Toy targets with the TargetModel interface, for exact tests and teaching.

Legend: V vocabulary (3–8 for the table target), d hidden size, m feature layers, n positions.

* ``TableTarget``: the next-token distribution is an explicit bigram table P[prev] (exact
  fractions kept in ``table_fractions``), so every speculative-decoding outcome can be enumerated.
* ``tiny_llama_target``: a randomly initialised Llama built from an in-memory config, wrapped by
  the real ``TargetModel`` (KV cache, layer features, crop) — the neural drafters' test bed.
"""
from __future__ import annotations

from fractions import Fraction

import torch

from .target import TargetModel, TargetOutput


class CharTokenizer:
    """Minimal tokenizer: one symbol per id (letters a, b, c, … then '.', the stop symbol)."""

    def __init__(self, vocab_size: int, eos: int | None = None):
        self.symbols = [chr(ord("a") + i) if i < 26 else f"<{i}>" for i in range(vocab_size)]
        self.eos_token_id = eos
        self.unk_token_id = None
        self.chat_template = None
        self._ids = {s: i for i, s in enumerate(self.symbols)}

    def get_vocab(self) -> dict[str, int]:
        return dict(self._ids)

    def convert_tokens_to_ids(self, t: str):
        return self._ids.get(t)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        bad = [c for c in text if c not in self._ids]
        if bad:
            raise ValueError(f"symbols {bad[:3]} are not in this toy vocabulary {self.symbols}")
        return [self._ids[c] for c in text]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(self.symbols[i] for i in ids)


class _LenCache:
    def __init__(self):
        self.n = 0

    def get_seq_length(self) -> int:
        return self.n

    def crop(self, n: int) -> None:
        self.n = n


class TableTarget:
    """Bigram target: p_target(x_{i+1} | x_≤i) = P[x_i] exactly."""

    def __init__(self, table, stop_ids=(), hidden_size: int = 8, n_feature_layers: int = 2, seed: int = 0):
        self.table_fractions = [[Fraction(p) for p in row] for row in table]
        V = len(self.table_fractions)
        if any(len(r) != V or sum(r) != 1 for r in self.table_fractions):
            raise ValueError("the table must be V×V with rows summing to 1")
        self.table = torch.tensor([[float(p) for p in r] for r in self.table_fractions])  # (V, V)
        self.name, self.device, self.dtype = f"table-{V}", torch.device("cpu"), torch.float32
        self.vocab_size, self.hidden_size, self.n_layers = V, hidden_size, n_feature_layers + 1
        self.feature_layers = list(range(1, n_feature_layers + 1))
        self.max_context = 4096
        self.stop_ids = frozenset(stop_ids)
        self.tokenizer = CharTokenizer(V)
        self.vocab_hash = f"table{V}"
        g = torch.Generator().manual_seed(seed)
        self._feat = torch.randn(V, n_feature_layers * hidden_size, generator=g)     # (V, m·d)
        self.embed_weight = torch.randn(V, hidden_size, generator=g)                # (V, d)
        self.lm_head_weight = torch.randn(V, hidden_size, generator=g)              # (V, d)
        self._hid = torch.randn(V, hidden_size, generator=g)                         # (V, d)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids) -> str:
        return self.tokenizer.decode(ids)

    def token_text(self, i: int) -> str:
        return self.tokenizer.symbols[i]

    def chat_ids(self, prompt: str, system: str | None = None) -> list[int]:
        if not prompt:
            raise ValueError("the prompt is empty")
        return self.encode(prompt)

    def new_cache(self):
        return _LenCache()

    def crop(self, cache, length: int) -> None:
        cache.crop(length)

    def forward(self, ids: torch.Tensor, cache, features: bool = False, hidden: bool = False,
                last_only: bool = False) -> TargetOutput:
        ids = ids.reshape(-1)                                                      # (n,)
        cache.n += len(ids)
        logits = self.table[ids].clamp_min(1e-30).log()                           # (n, V)
        if last_only:
            logits = logits[-1:]
        return TargetOutput(logits[None], self._feat[ids][None] if features else None,
                            self._hid[ids][None] if hidden else None)

    def prefill(self, ids: list[int], features: bool = False, hidden: bool = False, last_only: bool = False):
        cache = self.new_cache()
        return cache, self.forward(torch.tensor([ids]), cache, features=features, hidden=hidden,
                                   last_only=last_only)


def tiny_llama_target(vocab_size: int = 48, hidden_size: int = 32, n_layers: int = 4, seed: int = 0,
                      eos: int | None = None, dtype: torch.dtype = torch.float32) -> TargetModel:
    """A random-init Llama from an in-memory config, behind the real TargetModel wrapper."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                      num_hidden_layers=n_layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=512, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():                     # sharper logits than the default init: a peaky toy LM
        model.get_input_embeddings().weight.mul_(20)
    return TargetModel(model.to(dtype), CharTokenizer(vocab_size, eos), f"tiny-llama-{vocab_size}", "cpu", dtype,
                       feature_layers=list(range(1, n_layers)))
