"""What the app loads once and shares read-only: target, drafters, SPS profiles, request data for the
model-free tabs, and the calibration fitted on that data.

Legend: γ block size, c_k confidence of draft k, m accepted drafts, ℓ verification length, N held-out rounds.

``AppResources`` is built once per app and shared by every session; its only mutable parts are the calibration
(fitted once, on first use) and a locked memo of pure, instant views. Everything that belongs to one user lives
in gr.State and is passed to the tab functions.
"""
from __future__ import annotations

import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ... import registry
from ...calibration import calibration_report, fit_sts, rollouts_from_traces
from ...cost import SPSProfile, gpu_like, jagged, named_profile
from ...datasets.synthetic import synthetic_traces
from ...datasets.traces import bundle_name, load_traces
from ...drafters import load_drafter
from ...evaluation.dtype_choice import dtype_for
from ...fast import ragged
from ...model import target as model_target
from ...cost import profile_for
from ...scheduler import live_name, make_policy
from ...serving.engine import LiveEngine
from ...settings import assets
from ...trace import Trace
from ...viz import reliability_frame
from .text import md_escape

DRAFTER_LABELS = registry.field_map("label")                     # read from the one table (dspark_viz.registry)
DRAFTER_ORDER = registry.LiveNames(lambda: registry.names(lambda e: e.offered))   # the dropdown, in display order
PROFILE_LABELS = {"gpu-like": "gpu-like (smooth, synthetic)", "jagged": "jagged (CUDA-graph buckets, synthetic)",
                  "cpu": "cpu (measured by dspark-viz profile for this target's dtype and kernel)"}
DEFAULT_EXAMPLES = (                                   # from assets/prompts/eval.jsonl, two per domain
    ("math", "Chloe puts $25 in a jar each week. How much will she have after 26 weeks?"),
    ("math", "Explain step by step how to find the median of a list of numbers."),
    ("code", "Refactor this function to be shorter and easier to read:\n\n```python\ndef check(temps):\n"
             "    ok = True\n    for i in range(len(temps)):\n        if temps[i] > 18:\n            ok = False\n"
             "    if ok == True:\n        return True\n    else:\n        return False\n```"),
    ("code", "Write a Python function that returns the n-th Fibonacci number."),
    ("chat", "How do vaccines help the body fight disease?"),
    ("chat", "Write a warm thank-you note to my aunt for the birthday scarf."),
)
RECORDING = assets("traces", bundle_name("dspark", 1.0))   # the model-free tabs' default data


@dataclass(frozen=True)
class Limits:
    """Bounds on what a user may ask for and on the work one event may do."""
    max_new_tokens: int = 512          # slider maximum
    max_load: int = 256                # R slider maximum (the model-free tabs' simulated load)
    max_live: int = 8                  # the live engine's requests at once (Live decode's R maximum); more queue
    max_temperature: float = 2.0
    max_prompt_tokens: int = 1536      # context used = min(model's, this + max_new_tokens): long prompts are cut
    chart_budget: float = 0.25         # live round chart: drawing takes at most this fraction of decode time …
    chart_ms_per_round: float = 35.0   # … and at most this many ms per round on average (first round always drawn)
    stream_rounds: int = 120           # token strip while streaming: the last rounds only (all at the end)
    sweep_rounds: int = 40             # serving.simulate.sweep steps per (policy, R)


@dataclass
class Recorded:
    """Request data for the model-free tabs: recorded traces with confidences, or synthetic ones."""
    traces: list[Trace]
    synthetic: bool
    note: str                                           # one line for the UI: where the numbers come from
    conf_rows: list[list[float]]                        # c_1..c_γ per round (calibrated when recorded so)
    gamma: int


@dataclass
class CalibrationData:
    """The calibration tab's data: held-out rounds, STS fitted on the other rounds, its report and frame."""
    conf: np.ndarray                                    # (N, γ) held-out rounds shown in the diagram
    accepted: np.ndarray                                # (N,) m
    ell: np.ndarray                                     # (N,) ℓ
    calib: Any                                          # STSCalibration fitted on the other rounds
    report: dict
    frame: Any                                          # viz.reliability_frame (both stages)
    note: str


@dataclass
class AppResources:
    """Everything every session shares read-only (see the module docstring)."""
    target: Any
    drafters: dict[str, Any]                            # name → Drafter, in display order
    missing: dict[str, str]                             # name → why it is not offered
    profiles: dict[str, SPSProfile]
    recorded: Recorded
    examples: list[tuple[str, str]]
    limits: Limits = field(default_factory=Limits)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dspark_app_")))
    _calibration: CalibrationData | None = None
    _memo: "OrderedDict[tuple, Any]" = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _calib_lock: threading.Lock = field(default_factory=threading.Lock)
    _engines: dict = field(default_factory=dict)

    def engine(self, drafter: str, profile: str):
        """The live engine every session shares for this drafter and profile (started on first use; serving/
        engine.py), or None where the target is not on the ragged forward (then Live decode simulates the load)."""
        if not ragged.supports(self.target):
            return None
        with self._lock:
            eng = self._engines.get((drafter, profile))
            if eng is None:
                d = self.drafters[drafter]
                policy = make_policy(live_name()) if getattr(d, "has_confidence", False) else None
                eng = LiveEngine(self.target, d, policy=policy, sps=self.profiles[profile],
                                 max_live=self.limits.max_live).start()
                self._engines[(drafter, profile)] = eng
        return eng

    def close(self) -> None:
        """Stop the live engines' threads (their requests end as cancelled)."""
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for eng in engines:
            eng.stop()

    @property
    def context_limit(self) -> int:
        return int(min(self.target.max_context, self.limits.max_prompt_tokens + self.limits.max_new_tokens))

    def label(self, name: str) -> str:
        return registry.label(name)

    def drafter_choices(self) -> list[tuple[str, str]]:
        return [(self.label(n) + ("" if getattr(d, "has_confidence", False) else " (no confidence head)"), n)
                for n, d in self.drafters.items()]

    def profile_choices(self) -> list[tuple[str, str]]:
        return [(PROFILE_LABELS.get(n, n), n) for n in self.profiles]

    @property
    def live_profile(self) -> str:
        """The profile Live decode plans with by default: the measured CPU curve when the target runs on a CPU
        (the speed it reports is this CPU's), else the first profile."""
        on_cpu = str(getattr(self.target, "device", "cpu")).startswith("cpu")
        return "cpu" if on_cpu and "cpu" in self.profiles else next(iter(self.profiles))

    @property
    def fallback_default(self) -> bool:
        """The speculation gate is on by default where drafting costs a large share of a step: on a CPU."""
        return str(getattr(self.target, "device", "cpu")).startswith("cpu")

    @property
    def calibration(self) -> CalibrationData:
        if self._calibration is None:
            with self._calib_lock:                      # fitted once, on first use
                if self._calibration is None:
                    self._calibration = build_calibration(self.recorded)
        return self._calibration

    def memo(self, key: tuple, make, size: int = 512):
        """Pure-view cache (same key → same output for every user)."""
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = make()
        with self._lock:
            self._memo[key] = value
            while len(self._memo) > size:
                self._memo.popitem(last=False)
        return value


def available_drafters(target, names: Sequence[str] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """Every drafter that loads for this target (of ``names``, by default those the table offers: DRAFTER_ORDER);
    the others with the reason (not shipped yet, mismatch…)."""
    ok, missing = {}, {}
    for n in DRAFTER_ORDER if names is None else names:
        try:
            ok[n] = load_drafter(n, target)
        except FileNotFoundError:
            missing[n] = "not trained / shipped yet"
        except (ValueError, RuntimeError, OSError, KeyError) as e:
            missing[n] = f"does not load: {e}"
    return ok, missing


def available_profiles(target=None) -> dict[str, SPSProfile]:
    """The synthetic curves and, as "cpu", the measured one: for a CPU target the curve of its dtype and kernel
    (cost.profile_for), else assets/profiles/cpu.json when it exists."""
    out = {"gpu-like": gpu_like(), "jagged": jagged()}
    if target is not None and str(getattr(target, "device", "cpu")).startswith("cpu"):
        prof = profile_for(target)
        if prof.device != "synthetic":                  # a measured file was found
            out["cpu"] = prof
            return out
    try:
        out["cpu"] = named_profile("cpu")
    except (FileNotFoundError, ValueError):
        pass                                            # no measured profile yet: the synthetic ones only
    return out


def _has_conf(t: Trace) -> bool:
    return any(r.drafts and all(d.confidence is not None for d in r.drafts) for r in t.rounds)


def load_recorded(traces: Sequence[Trace] | None = None, source: Path | None = RECORDING,
                  max_rows: int = 256) -> Recorded:
    """Traces with confidences (given, or read from ``source``: a trace bundle, a Trace JSON or a folder of
    them; by default the shipped recording of the DSpark drafter at T = 1), else synthetic requests."""
    src = ""
    if traces is None and source is not None and Path(source).exists():
        try:
            traces = load_traces(source)
        except (ValueError, OSError):
            traces = []
        src = f" from {Path(source).name}"
    traces = [t for t in (traces or []) if _has_conf(t)]
    synthetic = not traces
    if synthetic:
        traces = synthetic_traces(n=24, n_rounds=40, gamma=7, seed=0, overconfidence=1.6)
        drafters = "synthetic"
        note = ("**synthetic** requests (`dspark_viz.datasets.synthetic`: made-up confidences with a known acceptance law "
                "and an over-confident head; no model involved) — no recorded traces with confidences yet")
    else:
        drafters = ", ".join(sorted({str(t.meta.get("drafter", "?")) for t in traces}))
        rounds = sum(len(t.rounds) for t in traces)
        doms = sorted({str(t.meta.get("domain", "mixed")) for t in traces})
        note = (f"**recorded** traces: {len(traces)} requests ({', '.join(doms)}; {rounds:,} rounds) of drafter "
                f"{drafters}{src}")
    rows, rounds = [], [r for t in traces for r in t.rounds if r.drafts]
    step = max(1, len(rounds) // max_rows)
    for r in rounds[::step][:max_rows]:
        ds = sorted(r.drafts, key=lambda d: d.k)
        if all(d.confidence is not None for d in ds):
            cal = all(d.confidence_cal is not None for d in ds)
            rows.append([float(d.confidence_cal if cal else d.confidence) for d in ds])
    gamma = max((len(c) for c in rows), default=7)
    return Recorded(list(traces), synthetic, note, rows, gamma)


def build_calibration(rec: Recorded) -> CalibrationData:
    """STS fitted on half of the requests, reliability shown on the other half (out of sample)."""
    fit_t, eval_t = rec.traces[0::2], rec.traces[1::2]
    held_out = bool(fit_t and eval_t)
    if not held_out:
        fit_t = eval_t = rec.traces
    cf, af, ef = rollouts_from_traces(fit_t)
    conf, acc, ell = rollouts_from_traces(eval_t)
    g = max(cf.shape[1], conf.shape[1])
    cf, conf = _pad(cf, g), _pad(conf, g)
    calib = fit_sts(cf, af, ef)
    report = calibration_report(conf, acc, ell, calib=calib)
    frame = reliability_frame(conf, acc, ell, calib=calib)
    how = (f"STS fitted on {len(fit_t)} requests ({len(af)} rounds), shown on {len(eval_t)} other requests "
           f"({len(acc)} rounds): out of sample" if held_out else
           f"STS fitted and shown on the same {len(acc)} rounds (in sample: too few requests to hold some out)")
    return CalibrationData(conf, acc, ell, calib, report, frame, f"Data: {rec.note}. {how}.")


def _pad(c: np.ndarray, g: int) -> np.ndarray:
    if c.shape[1] == g:
        return c
    out = np.full((c.shape[0], g), np.nan)
    out[:, : c.shape[1]] = c
    return out


def load_resources(target=None, drafters: Mapping[str, Any] | None = None, *, profiles=None,
                   traces: Sequence[Trace] | None = None, trace_source: Path | None = RECORDING,
                   examples: Sequence[tuple[str, str]] | None = None, limits: Limits | None = None,
                   target_path: str | None = None) -> AppResources:
    """Load (or take) everything the app shares: target, drafters, SPS profiles, recorded or synthetic data."""
    if target is None:
        target = model_target.load_target(target_path, dtype=dtype_for(target=target_path))
    missing: dict[str, str] = {}
    if drafters is None:
        drafters, missing = available_drafters(target)
    if not drafters:
        raise ValueError("no drafter loads for this target (prompt lookup always should: check the target)")
    shown = tuple(DRAFTER_ORDER)
    order = [n for n in shown if n in drafters] + [n for n in drafters if n not in shown]
    if isinstance(profiles, SPSProfile):
        profiles = {profiles.name: profiles}
    profs = dict(profiles) if profiles is not None else available_profiles(target)
    if not profs:
        raise ValueError("give at least one SPS profile")
    return AppResources(target=target, drafters={n: drafters[n] for n in order}, missing=missing,
                        profiles=profs, recorded=load_recorded(traces, trace_source),
                        examples=list(examples or DEFAULT_EXAMPLES), limits=limits or Limits())


def drafters_md(res: AppResources) -> str:
    """One Markdown line: the drafters offered, and those that are not with the reason."""
    have = ", ".join(f"**{md_escape(res.label(n))}**"
                     + ("" if getattr(d, "has_confidence", False) else " (no confidence)")
                     for n, d in res.drafters.items())
    miss = "; ".join(f"{md_escape(res.label(n))}: {md_escape(why)}" for n, why in res.missing.items())
    line = f"Drafters: {have}." + (f" Not available: {miss}." if miss else "")
    t = res.target
    if t is not None:                       # what the live decode runs on: device, dtype, few-token paths
        line += (f" Target: {md_escape(str(t.name))} on {t.device} in {str(t.dtype).replace('torch.', '')}"
                 f" · few-token forwards: {md_escape(str(getattr(getattr(t, 'paths', None), 'choice', 'stock path')))}.")
    return line


__all__ = ["AppResources", "CalibrationData", "DEFAULT_EXAMPLES", "DRAFTER_LABELS", "DRAFTER_ORDER", "Limits",
           "RECORDING", "Recorded", "available_drafters", "available_profiles", "build_calibration", "drafters_md",
           "load_recorded", "load_resources"]
