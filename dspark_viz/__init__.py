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

Layers (DESIGN.md §2): the core (trace, sampling, decode, metrics, exact), model/, fast/, drafters/,
the policies (scheduler, calibration), serving/, train/, and the faces viz/, ui/, cli/.
"""
from __future__ import annotations

from . import metrics
from .calibration import STSCalibration
from .decode import generate_rounds, plain_generate, speculative_generate
from .drafters import load_drafter
from .machine import load_target
from .model.target import TargetModel
from .scheduler import AsyncGlobal, FixedLength, HardwareAware, Policy, StaticThreshold, make_policy
from .cost import SPSProfile, named_profile
from .trace import DraftToken, Round, Trace
from .trace_store import load_traces, recorded_traces, save_bundle

__all__ = ["AsyncGlobal", "DraftToken", "FixedLength", "HardwareAware", "Policy", "Round", "SPSProfile",
           "STSCalibration", "StaticThreshold", "TargetModel", "Trace", "generate_rounds", "load_drafter",
           "load_target", "load_traces", "make_policy", "metrics", "named_profile", "plain_generate",
           "recorded_traces", "save_bundle", "speculative_generate"]
