"""The CPU few-token path: what makes a 1–64-token forward (a decode step, a verification block, several requests' blocks) cost about
what one token costs, with the same arithmetic at every width.

Verifying ℓ drafts is one target forward over ℓ + 1 tokens. On a small model on a CPU that forward is
bound by reading the weights, yet stock BLAS and transformers' layer code run few-token forwards far
slower than that bound. These pieces close the gap, each on a switch (dspark_viz.settings):

- ``kernels``   a native matmul that reads each weight once for every token (csrc/skinny_linear.cpp; bf16 on
                AVX512-BF16 in a packed outer-product form, csrc/packed_bf16.h);
- ``attention`` packed grouped-query attention over the KV cache without copying it per head group;
- ``lean``      each decoder layer as straight-line code, fused into two native calls per layer;
- ``stack``     the model's whole few-token forward (embedding, rotary, those layers — all in one native call —,
                norm, LM head) as straight-line code, without transformers' model-level wrappers (the target
                wrapper calls it).

The two doors, one call each:

- ``install(model, device, dtype)`` puts them in place on a loaded Hugging Face model (the target wrapper
  makes this call) and returns the ``FastPaths`` record the target keeps;
- ``install_drafter(model, paths)`` gives a drafter the target's kernel for its own products and returns
  the ``RowProduct`` its vocabulary projections take (the drafter loaders make this call); a parallel drafter's
  inference block also runs its layers as the fused layer's two native calls, every row seeing all keys
  (``drafters.backbone.ParallelBackbone.forward_block``, ``DSPARK_FUSED_LAYERS`` switches both).

Nothing here changes what is computed beyond float summation order: the exactness tests run on this path.

Width invariance: with the kernel and the fused layers in place, every reduction's order is fixed per row
(weight-row dot products, attention over the cache, norms, softmax), whatever the number of rows in the forward
and the thread count, so a token's logits and layer outputs are bit-identical whether it is decoded alone or
verified inside a block of up to 64 (tests/test_width_invariance.py), at fp32 and bf16; greedy speculative
decoding then equals greedy decoding token for token. Torch's stock path (``stock_path``, ``DSPARK_SKINNY=0``,
``DSPARK_FUSED_LAYERS=0``, models outside the Llama family) cannot promise that: torch and its BLAS choose their
kernels, and so their summation orders, by the number of rows, so a token may round differently inside a block
than alone — greedy equality is then likely, not guaranteed. Prefill (> 64 tokens) is outside the promise; several
requests in one forward keep it on the live engine's exact ragged forward (fast/ragged.py, ``ragged_layer``).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from . import attention, kernels, lean


@dataclass
class FastPaths:
    """Which path each piece of a target's few-token forwards took, and per size which one it runs."""
    matmul: str        # "skinny-kernel", "lm-head-wxt" (fallback without a compiler) or "stock"
    attention: str     # "packed-gqa" or the model's own attention implementation ("sdpa")
    layers: str        # "lean" or "stock"
    sizes: dict[int, str] = field(default_factory=dict)   # few-token size → fast / fast-avx… / stock (tune.py)
    choice: str = ""   # the per-size choice in words (reports, the app's footer)

    def __post_init__(self):
        if not self.choice:
            self.choice = "fast path at every size" if self.matmul != "stock" else "stock path"

    def at(self, n: int) -> str:
        """The path an n-token forward takes (``fast`` where nothing was chosen; past the sizes timed, the
        largest's, so that 9–64 tokens keep the variant of 1–8)."""
        return self.sizes.get(n) or (self.sizes[max(self.sizes)] if self.sizes else "fast")

    def variant(self):
        """A context in which every kernel call takes the variant the machine chose for this target (kernels.VARIANTS;
        for code that calls the model outside the target's own forwards, such as HF ``generate``)."""
        return kernels.variant(self.at(1))

    @property
    def stock_sizes(self) -> frozenset[int]:
        return frozenset(n for n, p in self.sizes.items() if p == "stock")

    def chosen(self, sizes: dict[int, str], source: str, all_sizes) -> None:
        """Keep a per-size choice (fast/tune.py) and say it in words: "fast for 2–8 tokens (measured …)"."""
        self.sizes = dict(sizes)
        by_path: dict[str, list[int]] = {}
        for n in all_sizes:
            by_path.setdefault(self.at(n), []).append(n)
        self.choice = "; ".join(f"{p} for {_ranges(ns)} tokens" for p, ns in by_path.items()) + f" ({source})"


class RowProduct:
    """h (…, d), W (N, d) → h Wᵀ (…, N) in h's dtype: through the few-row kernel where it applies (a drafter's
    block of ≤ 8 rows, no autograd), else torch's product."""

    def __init__(self, ext=None):
        self.ext = ext                 # the compiled extension (kernels.load()), or None: torch only

    def __call__(self, h: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        if self.ext is not None and kernels.applies(h, W):
            return kernels.linear(self.ext, h, W)
        return h @ W.T.to(h.dtype)


def install_drafter(model: torch.nn.Module, paths: FastPaths | None) -> RowProduct:
    """Where the target runs the few-row kernel (``paths.matmul == "skinny-kernel"``) the drafter does too: its
    own linear layers from one row up (head steps, a one-token context extension), and the returned product for
    its vocabulary projections. Elsewhere both stay torch's."""
    ext = kernels.load() if paths is not None and paths.matmul == "skinny-kernel" else None
    if ext is not None:
        kernels.patch_linears(model, ext, min_rows=1)
    return RowProduct(ext)


MAX_ROWS, DTYPES = kernels.MAX_ROWS, kernels.DTYPES     # the few-row path's widths and dtypes


def layer_extension(product: RowProduct | None):
    """The compiled extension for a drafter's own layers as fused native calls (``layer_qkv`` +
    ``layer_rest_full``), or None: only where the drafter's products take the kernel (``install_drafter``) and the
    fused layers are switched on (``DSPARK_FUSED_LAYERS``)."""
    ext = getattr(product, "ext", None)
    return ext if ext is not None and hasattr(ext, "layer_rest_full") and lean.fused_enabled() else None


LLAMA_FAMILY = ("llama", "mistral")    # the model types whose layers lean.py and attention.py were written for


def install(model, device: torch.device, dtype: torch.dtype) -> FastPaths:
    """Put the few-token path in place where it applies (CPU, fp32 / bf16, a Llama-family model) and say what
    was installed. Other models (e.g. Qwen3, whose attention normalises q and k per head) keep transformers'
    stock forwards: the kernels, the packed attention and the fused layers are written and checked for
    Llama-family layers only. ``dtype`` is chosen by the caller (model/dtypes.py), never here."""
    if getattr(model.config, "model_type", None) not in LLAMA_FAMILY:
        return FastPaths("stock", getattr(model.config, "_attn_implementation", "sdpa"), "stock")
    matmul = _fast_matmuls(model, device, dtype)
    attn = "packed-gqa" if device.type == "cpu" and attention.install(model) \
        else getattr(model.config, "_attn_implementation", "sdpa")
    layers = "lean" if (matmul == "skinny-kernel" and attn == "packed-gqa"
                        and lean.install(model, kernels.load())) else "stock"
    return FastPaths(matmul, attn, layers)


@contextlib.contextmanager
def stock_path(model, on: bool = True):
    """Inside the block (when ``on``), ``model`` runs torch's and transformers' own few-token forwards."""
    with contextlib.ExitStack() as stack:
        if on:
            stack.enter_context(kernels.stock_linears(model))
            stack.enter_context(attention.stock_attention(model))
            stack.enter_context(lean.stock_layers(model))
        yield model


SKINNY_MAX = 8      # fallback when the kernel is unavailable: 2…8-token forwards take W·xᵀ for the LM head


def _skinny_lm_head(module: torch.nn.Linear) -> None:
    """Fallback without the compiled kernel (kernels.py): the LM head as (W · xᵀ)ᵀ for 2…SKINNY_MAX tokens.

    The same product, another BLAS call: some BLAS builds run x·Wᵀ with 2–8 rows and a vocabulary-sized
    output several times slower than W·xᵀ (benchmarks/bench_matmul.py measures it). One-token forwards keep
    the stock path."""
    def forward(x: torch.Tensor) -> torch.Tensor:                      # x (..., d) → (..., V)
        W, b = module.weight, module.bias
        M = x.numel() // max(x.shape[-1], 1)
        if 2 <= M <= SKINNY_MAX and x.dtype == W.dtype == torch.float32 and x.device.type == "cpu":
            y = torch.mm(W, x.reshape(M, -1).t()).t().reshape(*x.shape[:-1], W.shape[0])
            return y if b is None else y + b
        return torch.nn.functional.linear(x, W, b)

    module.forward = forward


def _fast_matmuls(model, device: torch.device, dtype: torch.dtype) -> str:
    """Install the few-row matmul path for verification forwards; returns which one is in use."""
    if device.type != "cpu" or dtype not in kernels.DTYPES or not kernels.enabled():
        return "stock"
    ext = kernels.load()
    if ext is not None:
        kernels.patch_linears(model, ext)
        return "skinny-kernel"
    head = model.get_output_embeddings()
    if dtype != torch.float32:
        kernels.patch_linears(model, None)              # bf16 without the kernel: the wide path still helps
        return "stock"
    if isinstance(head, torch.nn.Linear):
        _skinny_lm_head(head)
        return "lm-head-wxt"
    return "stock"


def _ranges(ns: list[int]) -> str:
    """[1, 2, 3, 5] → "1–3, 5"."""
    out, i = [], 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        out.append(f"{ns[i]}–{ns[j]}" if j > i else str(ns[i]))
        i = j + 1
    return ", ".join(out)
