"""The benchmark's decoding methods: one function ``(target, prompt_ids, settings) -> MethodResult`` each.

Legend: γ block size, ℓ verification length, τ mean committed tokens per round, T temperature.

``METHODS`` maps a name to its function; ``register_method`` adds one (neural drafters, policies).
``DEFAULT_METHODS`` is what ``dspark-viz bench`` runs without ``--methods``.

- ``hf_generate``: transformers' ``generate`` (the ×hf_gen baseline; ×plain is taken against ``plain``);
- ``hf_prompt_lookup``: ``generate`` with ``prompt_lookup_num_tokens`` (10 by default, the value of the
  transformers docs) and its default 2-gram matching;
- ``plain``: our decode loop without a drafter; ``plain_thread``: the same run by a worker thread (its ×plain: a
  worker thread's speed against the main thread's); ``lookup``: our n-gram drafter (γ = 7, 1–3-gram matching);
- ``dflash``, ``eagle``, ``dspark_fixed``: shipped neural drafters at ℓ = γ;
  ``dspark_sched`` / ``dspark_lookup``: DSpark (alone / with lookup) under the hardware-aware scheduler;
  ``dspark_fallback``: ``dspark_sched`` behind the speculation gate (gate.py: plain steps while drafting loses);
  ``dspark_l1`` … ``dspark_l6`` (on request only): DSpark at each shorter fixed ℓ.
"""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Callable, NamedTuple

import torch

from .. import registry
from ..decode import speculative_generate
from ..drafters import load_drafter, speed_only
from ..metrics import drafted_share, tau, time_split
from ..cost import profile_for
from ..scheduler import FixedLength, HardwareAware
from ..threads import give_back, gives_back

BASELINE = "hf_generate"
PLAIN = "plain"                         # our plain decoding: the ×plain and =plain reference
LABELS = {                              # what each method is, for the tables' legend (register_method adds)
    "hf_generate": "HF `generate`", "hf_prompt_lookup": "HF prompt lookup", "plain": "our plain decoding",
    "lookup": f"our {registry.label('lookup')}", "dspark_fixed": "DSpark, ℓ = γ",
    "dspark_sched": "DSpark, hardware-aware", "dspark_fallback": "DSpark, hardware-aware + fallback",
    "dspark_lookup": "DSpark + lookup, hardware-aware",
}


@dataclass
class BenchSettings:
    max_new_tokens: int = 128
    temperature: float = 0.0
    seed: int = 0
    gamma: int = 7                      # our lookup drafter's block
    hf_lookup_tokens: int = 10          # HF prompt_lookup_num_tokens


class MethodResult(NamedTuple):
    output_ids: list[int]               # new tokens (up to and including a stop token)
    seconds: float                      # wall time of the whole request (prefill included)
    tau: float | None                   # committed tokens per round (None when not measured)
    time_split: dict[str, float] | None  # draft / verify / schedule / other fractions (our loop)
    drafted: float | None = None        # share of rounds that drafted (our loop with a drafter)
    decode_s: float | None = None       # seconds after the prefill (our loop), for ms per decoded token


Method = Callable[[object, list[int], BenchSettings], MethodResult]
METHODS: dict[str, Method] = {}
DEFAULT_METHODS: list[str] = []         # what `bench` runs without --methods


def register_method(name: str, fn: Method | None = None, default: bool = True, label: str | None = None):
    """Register a benchmark method (usable as a decorator); default=False: only on request (--methods)."""
    def deco(f: Method) -> Method:
        METHODS[name] = f
        if label is not None:
            LABELS[name] = label
        if default and name not in DEFAULT_METHODS:
            DEFAULT_METHODS.append(name)
        return f
    return deco(fn) if fn is not None else deco


def _until_stop(ids: list[int], stop_ids) -> list[int]:
    for i, t in enumerate(ids):
        if t in stop_ids:
            return ids[: i + 1]
    return ids


@gives_back
def _hf(target, ids: list[int], s: BenchSettings, **extra) -> MethodResult:
    stop = sorted(target.stop_ids)
    x = torch.tensor([ids], device=target.device)                                  # (1, n)
    kw = dict(do_sample=False)
    if s.temperature > 0:
        kw = dict(do_sample=True, temperature=s.temperature, top_k=0, top_p=1.0)
        torch.manual_seed(s.seed)
    paths = getattr(target, "paths", None)            # HF's forwards take the kernel variant the target's take
    t0 = time.perf_counter()
    with paths.variant() if paths is not None else contextlib.nullcontext():
        y = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=s.max_new_tokens,
                                  eos_token_id=stop or None, pad_token_id=stop[0] if stop else None, **kw, **extra)
    dt = time.perf_counter() - t0
    return MethodResult(_until_stop(y[0, len(ids):].tolist(), target.stop_ids), dt, None, None)


@register_method("hf_generate")
def hf_generate(target, ids, s):
    return _hf(target, ids, s)


@register_method("hf_prompt_lookup")
def hf_prompt_lookup(target, ids, s):
    return _hf(target, ids, s, prompt_lookup_num_tokens=s.hf_lookup_tokens)


def _ours(target, drafter, ids, s, policy=None, sps=None, fallback=False) -> MethodResult:
    t0 = time.perf_counter()
    tr = speculative_generate(target, drafter, prompt_ids=ids, temperature=s.temperature,
                              max_new_tokens=s.max_new_tokens, seed=s.seed, policy=policy, sps=sps,
                              fallback=fallback)
    dt = time.perf_counter() - t0
    return MethodResult(tr.output_ids, dt, tau(tr), time_split(tr),
                        drafted_share(tr) if drafter is not None else None, tr.t_total - tr.t_prefill)


@register_method("plain")
def plain(target, ids, s):
    return _ours(target, None, ids, s)


@register_method("lookup")
def lookup(target, ids, s):
    return _ours(target, load_drafter("lookup", target, gamma=s.gamma), ids, s)


@register_method("plain_thread", label="our plain decoding, from a worker thread")
def plain_thread(target, ids, s):
    """Plain decoding run by a fresh ``threading.Thread``, as the app's handlers run (its ×plain is the worker
    thread's speed against the main thread's; ``dspark_viz.threads``)."""
    out: list = []

    def work():
        try:
            out.append(_ours(target, None, ids, s))
        except BaseException as e:                        # noqa: BLE001 — raised again in the caller
            out.append(e)

    give_back()                  # this thread's OpenMP helpers, before the worker starts its own
    t = threading.Thread(target=work, name="bench-worker")
    t.start()
    t.join()
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


_LOADED: dict[tuple[int, str], object] = {}      # drafters loaded once per (target, name) in a bench run


def _drafter(target, name: str):
    """The named drafter for this target, loaded once, without the chart-only diagnostics (speed_only)."""
    key = (id(target), name)
    if key not in _LOADED:
        _LOADED[key] = speed_only(load_drafter(name, target))
    return _LOADED[key]


def unload_drafters() -> None:
    """Forget the drafters loaded so far (before the next target is loaded)."""
    _LOADED.clear()


def _neural(name: str, scheduled: bool = False, ell: int | None = None, fallback: bool = False) -> Method:
    def run(target, ids, s):
        d = _drafter(target, name)
        if scheduled:
            return _ours(target, d, ids, s, policy=HardwareAware(), sps=profile_for(target), fallback=fallback)
        return _ours(target, d, ids, s, policy=FixedLength(ell or d.gamma))
    return run


for _e in registry.entries(lambda e: e.bench):          # the table's drafters benchmarked at ℓ = γ: dflash, eagle
    register_method(_e.name, _neural(_e.name), label=f"{_e.label}, ℓ = γ")
del _e
register_method("dspark_fixed", _neural("dspark"))
register_method("dspark_sched", _neural("dspark", scheduled=True))
register_method("dspark_fallback", _neural("dspark", scheduled=True, fallback=True))
register_method("dspark_lookup", _neural("dspark+lookup", scheduled=True))
for _ell in range(1, 7):    # DSpark at each shorter fixed ℓ: the "best fixed ℓ" check (--methods dspark_l1,…)
    register_method(f"dspark_l{_ell}", _neural("dspark", ell=_ell), default=False)
del _ell
