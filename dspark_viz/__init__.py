"""dspark_viz: DSpark speculative decoding (confidence-scheduled, semi-autoregressive drafting) on a
real model, with the pieces laid out to be read, and charts, notebooks and an app on top.

The public API, in the order a decode uses it::

    import dspark_viz as dv

    target = dv.load_target()                          # embedded SmolLM2-135M-Instruct (or a local HF folder)
    drafter = dv.load_drafter("dspark", target)        # shipped DSpark drafter (Markov head + confidences)
    trace = dv.speculative_generate(target, drafter, "What is 12 * 7?",
                                    policy=dv.HardwareAware(), max_new_tokens=64)
    print(trace.text(), dv.metrics.tau(trace))         # the output, and mean committed tokens per round

    recorded = dv.recorded_traces("dspark", 1.0)       # the shipped evaluation recording (90 requests)

Layers (docs/architecture.md): the core at the top of the package (trace, sampling, protocol, decode, cost,
scheduler, gate, background, calibration, metrics, exact), model/ and fast/, drafters/, datasets/, serving/, train/,
evaluation/, and the faces viz/, ui/, cli/.

Each public name is imported from its module on first use, so ``import dspark_viz.decode`` (or any one
module) loads only what that module needs, not every drafter and kernel behind the API.
"""
from __future__ import annotations

import importlib

from . import settings

settings.openmp_defaults()       # before anything below loads torch (and its OpenMP runtime)

from . import metrics  # noqa: E402

_HOME = {                        # public name → the module it lives in
    "STSCalibration": "calibration",
    "generate_rounds": "decode", "plain_generate": "decode", "speculative_generate": "decode",
    "load_drafter": "drafters",
    "TargetModel": "model.target", "load_target": "model.target",
    "AsyncGlobal": "scheduler", "FixedLength": "scheduler", "HardwareAware": "scheduler", "Policy": "scheduler",
    "StaticThreshold": "scheduler", "make_policy": "scheduler",
    "SPSProfile": "cost", "named_profile": "cost", "SpeculationGate": "gate",
    "DraftToken": "trace", "Round": "trace", "Trace": "trace",
    "load_traces": "datasets.traces", "recorded_traces": "datasets.traces", "save_bundle": "datasets.traces",
}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'dspark_viz' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value                                              # the next lookup is a plain one
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOME))


__all__ = ["AsyncGlobal", "DraftToken", "FixedLength", "HardwareAware", "Policy", "Round", "SPSProfile",
           "STSCalibration", "SpeculationGate", "StaticThreshold", "TargetModel", "Trace", "generate_rounds", "load_drafter",
           "load_target", "load_traces", "make_policy", "metrics", "named_profile", "plain_generate",
           "recorded_traces", "save_bundle", "speculative_generate"]
