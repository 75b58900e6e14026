"""A CPU matmul for the few-token forwards of speculative verification (``csrc/skinny_linear.cpp``).

Verifying ℓ drafts is one target forward over ℓ + 1 tokens. On a small model that forward is bound by
reading the weights, so in principle 2–8 tokens cost what one costs; stock BLAS kernels are
tuned for large products and can run 2–8-row products slower than one row, so the draft barely pays. The kernel
here reads each weight once and applies it to every row of x, 1–64 rows (a decode step, a verification block,
several requests' blocks in one forward):

- bf16 on a CPU with AVX512-BF16 (AMD Zen 4, Intel Xeons from Cooper Lake on): the weights repacked once into
  blocks of 16 outputs, vdpbf16ps adding a broadcast pair of x into 16 outputs at a time (csrc/packed_bf16.h),
  all 64 rows in one pass over the weights;
- fp32 on a CPU with AVX-512F: the same outer-product form with blocks of 16 outputs and fp32 FMAs
  (csrc/packed_avx512.h), all 64 rows in one pass;
- fp32 elsewhere, and bf16 on other CPUs: AVX2 + FMA in that form with blocks of 8 outputs (csrc/packed_avx2.h;
  bf16 weights widened to fp32 in registers, exactly), all 64 rows in one pass — for fp32 the same summation order
  as the AVX-512 form, so an fp32 product has the same bits in both variants.

A row layout (one weight row at a time against every row of x, 8 rows a pass) stays for A/B:
``row_layout``, ``benchmarks/bench_matmul.py --what kernel``; ``ext.max_rows`` says how many rows one pass takes.

The same extension carries the fused decoder layer (``csrc/decoder_layer.h``, used by lean.py): norm, rotary,
attention and the SiLU gate as native loops around these products, two calls per layer.

One arithmetic for every width: within a variant (dtype × instruction set) each output's summation order is
fixed by the inner size alone — the same partial accumulators, combined the same way, for 1 row as for 64 —
and each output is one thread's whole sum, so a token's product is bit-identical alone or beside up to 63
others, at any thread count (skinny_kernels.h, packed_bf16.h).

It is compiled on first use with torch's C++ extension loader into ``$DSPARK_CACHE/kernels`` (once;
``dspark-viz kernels`` or ``make model`` does it) and used only where it applies: fp32 or bf16 CPU tensors,
1…64 rows, no autograd. Anywhere else — prefill, CUDA, training — the stock path runs.
If it cannot be built (no compiler, no AVX2) decoding falls back to stock with one warning;
``DSPARK_SKINNY=0`` turns it off (the benchmark A/Bs it that way).

bf16 products of more than 64 rows (prefill) have a second problem on CPUs without AVX512-BF16 or AMX: torch has
no fast bf16 GEMM there and runs them several times slower than fp32 (docs/benchmarks.md has figures).
``wide_bf16`` routes them through an fp32 product of the exactly widened operands rounded back to bf16 — what a
bf16 GEMM computes (bf16 inputs, fp32 sums, a bf16 result), up to summation order.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from ..settings import cache_dir, switch

MIN_ROWS, MAX_ROWS = 1, 64         # forwards with this many tokens take the kernel
SOURCE = Path(__file__).with_name("csrc") / "skinny_linear.cpp"


def enabled() -> bool:
    return switch("DSPARK_SKINNY")


def _why_not() -> str | None:
    """A reason the kernel cannot run on this machine, or None."""
    if not enabled():
        return "disabled by DSPARK_SKINNY=0"
    cap = ""
    try:
        cap = str(torch.backends.cpu.get_cpu_capability())
    except Exception:                                   # older torch: assume the build's default
        cap = "AVX2"
    if not cap.upper().startswith(("AVX2", "AVX512")):
        return f"CPU capability {cap!r} lacks AVX2"
    if not SOURCE.exists():
        return f"kernel source missing: {SOURCE}"
    return None


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """A hash of the native sources (the build key; a new kernel also re-measures fast/tune.py's choice)."""
    code = "".join(f.read_text(encoding="utf-8") for f in sorted(SOURCE.parent.glob("*.[ch]*")))
    return hashlib.sha256(code.encode()).hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def load(verbose: bool = False) -> Any | None:
    """The compiled extension (built once into the cache), or None with a warning saying why not."""
    reason = _why_not()
    if reason is not None:
        return None
    # one build per (source, checkout, environment): torch's loader rebuilds whenever the source path or the
    # include paths change, so checkouts sharing one cache would otherwise rebuild each other's copy
    key = hashlib.sha256(f"{source_hash()}|{SOURCE}|{sys.prefix}".encode()).hexdigest()[:12]
    build = cache_dir() / "kernels" / f"torch-{torch.__version__.split('+')[0]}-{key}"
    build.mkdir(parents=True, exist_ok=True)
    path = os.environ.get("PATH", "")
    try:
        try:                                            # the ninja wheel's binary, when not on PATH
            import ninja

            os.environ["PATH"] = f"{ninja.BIN_DIR}{os.pathsep}{path}"
        except ImportError:
            pass
        from torch.utils.cpp_extension import load as load_ext

        t0 = time.perf_counter()
        mod = load_ext(name="dspark_skinny_linear", sources=[str(SOURCE)], build_directory=str(build),
                       extra_cflags=["-O3", "-mavx2", "-mfma", "-fopenmp"],
                       extra_ldflags=["-fopenmp"], verbose=verbose)
        mod.build_seconds = time.perf_counter() - t0
        return mod
    except Exception as e:                              # no compiler, no ninja, a build error …
        warnings.warn(f"dspark_viz: the few-row matmul kernel could not be built ({type(e).__name__}: "
                      f"{str(e).strip().splitlines()[-1] if str(e).strip() else ''}); using stock matmuls",
                      RuntimeWarning, stacklevel=2)
        return None
    finally:
        os.environ["PATH"] = path


DTYPES = (torch.float32, torch.bfloat16)


@functools.lru_cache(maxsize=1)
def native_bf16_gemm() -> bool:
    """Whether this CPU has bf16 matrix instructions (AVX512-BF16, AMX) that torch's bf16 GEMM uses."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return True                                     # unknown: trust torch
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def wide_bf16(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether linear(x, weight) should take linear_widened (a widened fp32 product): bf16 on
    a CPU without native bf16 GEMM, more than MAX_ROWS rows, no autograd."""
    if x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16 or x.device.type != "cpu":
        return False
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return False
    return x.numel() // max(x.shape[-1], 1) > MAX_ROWS and not native_bf16_gemm()


def linear_widened(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """The bf16 product with fp32 sums, rounded once to bf16; x (..., I), weight (O, I) → (..., O): more rows than
    the kernel takes (prefill) as one fp32 GEMM on the exactly widened operands."""
    y = torch.nn.functional.linear(x.float(), weight.float(), None if bias is None else bias.float())
    return y.to(torch.bfloat16)


def applies(x: torch.Tensor, weight: torch.Tensor, min_rows: int = MIN_ROWS) -> bool:
    """Whether linear(x, weight) may take the kernel: fp32 or bf16 (alike) on CPU, min_rows…64 rows, no
    autograd."""
    if x.dtype != weight.dtype or x.dtype not in DTYPES or x.device.type != "cpu":
        return False
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return False
    rows = x.numel() // max(x.shape[-1], 1)
    return min_rows <= rows <= MAX_ROWS and weight.is_contiguous()


def linear(ext, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias) through the kernel; x (..., I), weight (O, I) → (..., O). The kernel reads the
    weights once for up to ``ext.max_rows`` rows (64 in the packed forms, 8 in the row layout) and once per such block
    beyond; more than MAX_ROWS rows go as calls of MAX_ROWS."""
    flat = x.reshape(-1, x.shape[-1])                                    # (M, I)
    y = ext.skinny_linear(flat, weight) if flat.shape[0] <= MAX_ROWS else torch.cat(
        [ext.skinny_linear(flat[i:i + MAX_ROWS], weight) for i in range(0, flat.shape[0], MAX_ROWS)])
    y = y.reshape(*x.shape[:-1], weight.shape[0])
    return y if bias is None else y + bias


@contextlib.contextmanager
def row_layout(ext):
    """Inside the block the kernel runs its row layout (A/B against the packed forms), fp32 and bf16."""
    tiles = ext.skinny_linear
    ext.skinny_linear = ext.skinny_linear_rows
    try:
        yield ext
    finally:
        ext.skinny_linear = tiles


# The kernel variants a machine chooses among (fast/tune.py), by the name of the path that runs them: the widest
# instruction set (bf16 by vdpbf16ps where the CPU has AVX512-BF16), AVX-512 FMAs alone (bf16 widened, the bits
# of the AVX2 form), the AVX2 form. fp32 has the same bits in all three.
VARIANTS = {"fast": "avx512", "fast-avx512-fma": "avx512-fma", "fast-avx2": "avx2"}


@contextlib.contextmanager
def variant(path: str):
    """Inside the block the kernel runs the variant of ``path`` (a key of VARIANTS; anything else: the widest)."""
    isa = VARIANTS.get(path, "avx512")
    ext = load() if isa != "avx512" else None
    if ext is None or not hasattr(ext, "set_isa"):
        yield ext
        return
    ext.set_isa(isa)
    try:
        yield ext
    finally:
        ext.set_isa("avx512")


@contextlib.contextmanager
def no_prefetch(ext):
    """Inside the block the kernel does not prefetch weight rows ahead for 3+ rows of x (A/B; the same bits)."""
    if ext is None or not hasattr(ext, "set_prefetch"):
        yield ext
        return
    was = ext.prefetch()
    ext.set_prefetch(False)
    try:
        yield ext
    finally:
        ext.set_prefetch(was)


def patch_linears(model: torch.nn.Module, ext, min_rows: int = MIN_ROWS) -> int:
    """Route every nn.Linear of ``model`` through the kernel when it applies (``ext`` None: only the wide bf16
    path); returns how many. From one row up by default: a decode step then computes what the same token
    computes inside a verification block, and in bf16 on a CPU without bf16 matrix instructions torch's
    one-row product is several times slower than the kernel."""
    n = 0
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear) and not routed(mod):
            mod.forward = _patched(mod, ext, min_rows)
            mod.kernel_routed = True
            n += 1
    return n


def routed(mod: torch.nn.Module) -> bool:
    """Whether ``mod`` is a linear that patch_linears routes through the kernel now: the flag it sets and
    stock_linears clears, read wherever a native path is chosen for the bits this product gives."""
    return bool(getattr(mod, "kernel_routed", False))


@contextlib.contextmanager
def stock_linears(model: torch.nn.Module):
    """Temporarily undo patch_linears (for A/B comparisons in one process)."""
    saved = [(m, m.__dict__.pop("forward")) for m in model.modules() if isinstance(m, torch.nn.Linear) and routed(m)]
    for m, _f in saved:
        m.kernel_routed = False
    try:
        yield model
    finally:
        for m, f in saved:
            m.forward, m.kernel_routed = f, True


def _patched(mod: torch.nn.Linear, ext, min_rows: int = MIN_ROWS):
    stock = torch.nn.functional.linear

    def forward(x: torch.Tensor) -> torch.Tensor:                        # x (..., I) → (..., O)
        if ext is not None and applies(x, mod.weight, min_rows):
            return linear(ext, x, mod.weight, mod.bias)
        if wide_bf16(x, mod.weight):
            return linear_widened(x, mod.weight, mod.bias)
        return stock(x, mod.weight, mod.bias)

    return forward


def self_check(verbose: bool = False) -> str:
    """Build the kernel now (if it applies here) and say, in one line, whether it matches x·Wᵀ."""
    why = _why_not()
    if why:
        return f"few-token kernel not used: {why}"
    ext = load(verbose=verbose)
    if ext is None:
        return "few-token kernel not built (see the warning above); decoding uses stock matmuls"
    x, w = torch.randn(4, 576), torch.randn(1536, 576)
    err = float((ext.skinny_linear(x, w) - x @ w.t()).abs().max())
    return (f"few-token kernel ready (build/load {ext.build_seconds:.1f} s; max |Δ| against x·Wᵀ on a test "
            f"product {err:.1e})")
