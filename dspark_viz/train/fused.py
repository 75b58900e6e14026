"""The training loss compiled: ``torch.compile`` of ``losses.loss_terms``, forward and backward.

Legend: N blocks, γ block size, V_d draft vocabulary.

Eager, the loss makes some twenty passes over (N, γ, V_d) tensors — the gather of p_target's rows, the
log-softmax, exp, the L1 distance, their backward — each a trip through memory for ≈ 15M floats a step. Compiled
(inductor's generated C++ on CPU, Triton on CUDA), those passes fuse into a few loops: the same arithmetic up to
float summation order (tests/test_fused_loss.py compares loss and gradients with the eager function). Compiling
takes about a minute the first time on a machine (inductor caches its kernels), so the trainer compiles only for
runs long enough to win it back (``TrainConfig.compile``); where compiling fails (no C++ compiler, an old torch)
the eager function runs and the run says so.
"""
from __future__ import annotations

import torch

from .losses import loss_terms

MIN_STEPS = 300                # "auto": compile only for runs with at least this many steps to go

_compiled = None
_failed: str | None = None     # why compiling failed in this process (then every run takes the eager loss)
_probed = False                # the compiled loss ran once in this process: later runs skip the probe


def wanted(mode: str, steps_to_go: int) -> bool:
    """Whether a run compiles its loss: mode "on" / "off", or "auto" (runs of ≥ MIN_STEPS steps)."""
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"compile must be auto, on or off, got {mode!r}")
    return mode == "on" or (mode == "auto" and steps_to_go >= MIN_STEPS)


def compiled_terms():
    """``loss_terms`` compiled (shapes dynamic: the number of blocks and distinct rows vary between steps), made
    once per process."""
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(loss_terms, dynamic=True)
    return _compiled


def terms_or_eager(mode: str, steps_to_go: int, probe, log=print):
    """The loss-terms function a run uses: compiled when ``wanted`` and a first call ``probe(fn)`` succeeds
    (``probe`` runs one loss + backward with it; once per process), else the eager ``loss_terms``."""
    global _failed, _probed
    if not wanted(mode, steps_to_go) or _failed is not None:
        return loss_terms
    fn = compiled_terms()
    if _probed:
        return fn
    try:
        probe(fn)
        _probed = True
    except Exception as e:                   # noqa: BLE001 — any compiler failure: fall back, say why
        _failed = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
        log(f"compiling the loss failed ({_failed}); training with the eager loss")
        return loss_terms
    return fn


__all__ = ["MIN_STEPS", "wanted", "compiled_terms", "terms_or_eager"]
