"""Engine cost model (SPS profiles) and a trace-driven serving simulation.

Legend: B tokens in one target forward (verify batch), SPS(B) engine steps per second at B, R concurrent
requests, γ block size, ℓ_r verified drafts of request r, m drafts the target accepted in a recorded
round (under full-block verification), c_k / a_k conditional confidence / prefix survival, Θ throughput.

SPS profile: a table (batch → steps/s). Between table points the *step time* 1/SPS is interpolated
linearly; below the first point it is constant; beyond the last point it is extrapolated linearly from
the last two points. Synthetic profiles: ``gpu_like`` (smooth: flat until ~100 tokens, then linear, like
a decode step of a small model on an H100) and ``jagged`` (the same curve seen through CUDA-graph batch
buckets: B is padded up to the next bucket, so step time is a staircase). ``measure_profile`` times a
real target.

``OracleReference`` ("oracle" in a sweep) is the yardstick, not a policy: it reads each round's outcome and
verifies only drafts that will be accepted: what it cannot reach no scheduler can on these drafts, and the
gap between it and HardwareAware bounds what better confidences could buy (a head that knew each draft's
exact chance of surviving still sees chance, not outcomes, so it gets only part of the way).

Simulation: R slots each replay one recorded Trace after another. One step = every slot's next recorded
round; the policy picks ℓ_r from the round's confidences (calibrated when the trace has them); request r
then commits min(m_r, ℓ_r) + 1 tokens (accepted prefix + bonus) and the step costs 1/SPS(Σ(1+ℓ_r)) +
draft_time seconds. The same seed replays the same rounds for every policy (paired comparison).
"""
from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .scheduler import Policy
    from .trace import Trace

PROFILE_DIR = Path(__file__).resolve().parent.parent / "assets" / "profiles"
PROFILE_NAMES = ("gpu-like", "jagged", "cpu")
CUDA_GRAPH_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)


# -- SPS profile -----------------------------------------------------------------------------
@dataclass
class SPSProfile:
    name: str
    batch: list[int]                    # (P,) strictly increasing token counts
    sps: list[float]                    # (P,) steps per second at each batch
    device: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        b, s = list(self.batch), list(self.sps)
        if not b or len(b) != len(s):
            raise ValueError(f"SPS profile {self.name!r}: batch and sps must be non-empty and of equal length")
        if any(not float(x).is_integer() or x < 1 for x in b) or any(y <= x for x, y in zip(b, b[1:])):
            raise ValueError(f"SPS profile {self.name!r}: batch must be strictly increasing positive integers")
        if any(not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0) for v in s):
            raise ValueError(f"SPS profile {self.name!r}: sps values must be finite and positive")
        self.batch, self.sps = [int(x) for x in b], [float(v) for v in s]

    def step_time(self, B):
        """Seconds per forward at B tokens (scalar or array)."""
        b = np.asarray(self.batch, dtype=float)
        t = 1.0 / np.asarray(self.sps, dtype=float)                      # (P,) step times
        x = np.asarray(B, dtype=float)
        out = np.interp(x, b, t)                                         # constant below batch[0]
        if len(b) >= 2:
            slope = (t[-1] - t[-2]) / (b[-1] - b[-2])
            out = np.where(x > b[-1], t[-1] + slope * (x - b[-1]), out)
        out = np.maximum(out, 1e-12)
        return float(out) if out.ndim == 0 else out

    def __call__(self, B):
        """Steps per second at B tokens (scalar or array)."""
        st = self.step_time(B)
        return 1.0 / st

    # -- JSON --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"kind": "sps_profile", **asdict(self)}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def save(self, path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json(indent=1))

    @classmethod
    def from_dict(cls, d: Any) -> "SPSProfile":
        if not isinstance(d, dict) or d.get("kind", "sps_profile") != "sps_profile":
            raise ValueError("not an SPS profile (expected a JSON object with \"kind\": \"sps_profile\")")
        try:
            return cls(name=str(d["name"]), batch=list(d["batch"]), sps=list(d["sps"]),
                       device=str(d.get("device", "")), meta=dict(d.get("meta") or {}))
        except (KeyError, TypeError) as e:
            raise ValueError(f"not an SPS profile: missing or malformed field {e}") from e

    @classmethod
    def from_json(cls, s: str) -> "SPSProfile":
        try:
            d = json.loads(s)
        except json.JSONDecodeError as e:
            raise ValueError(f"not an SPS profile (invalid JSON: {e})") from e
        return cls.from_dict(d)

    @classmethod
    def load(cls, path) -> "SPSProfile":
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read())


def _gpu_step_time(B, t0: float = 0.010, knee: float = 96.0, slope: float = 0.03) -> np.ndarray:
    """Smooth decode step time: ≈ t0 (weights-bound) until ~knee tokens, then ≈ t0·B/knee (compute-bound)."""
    x = np.asarray(B, dtype=float) / knee
    return t0 * (np.sqrt(1.0 + x ** 2) + slope * x)


def gpu_like(bmax: int = 512) -> SPSProfile:
    """Smooth saturating profile (H100-like small-model decode): 100 steps/s flat, bending at ~96 tokens."""
    b = sorted({*range(1, 17), *range(24, 129, 8), *range(160, bmax + 1, 32), bmax})
    b = [x for x in b if x <= bmax]
    return SPSProfile("gpu-like", b, (1.0 / _gpu_step_time(b)).tolist(), device="synthetic",
                      meta={"formula": "t0·(sqrt(1+(B/96)²) + 0.03·B/96), t0 = 10 ms"})


def bucket_of(B: int, buckets: Sequence[int] = CUDA_GRAPH_BUCKETS) -> int:
    """Smallest CUDA-graph bucket ≥ B (B itself beyond the largest bucket)."""
    return next((b for b in buckets if b >= B), B)


def jagged(bmax: int = 512, buckets: Sequence[int] = CUDA_GRAPH_BUCKETS) -> SPSProfile:
    """gpu_like seen through CUDA-graph buckets: step_time(B) = smooth(bucket(B)), a staircase in B.

    Exact at integer B ≤ bmax (each bucket contributes the points prev+1 and b); beyond bmax the table
    ends with a point at 2·bmax so that extrapolation keeps the smooth slope.
    """
    bs = [b for b in buckets if b <= bmax]
    if not bs or bs[-1] != bmax:
        bs.append(bmax)
    xs, ts, prev = [], [], 0
    for b in bs:
        t = float(_gpu_step_time(b))
        for x in sorted({prev + 1, b}):
            xs.append(x)
            ts.append(t)
        prev = b
    xs.append(2 * bmax)
    ts.append(float(_gpu_step_time(2 * bmax)))
    return SPSProfile("jagged", xs, [1.0 / t for t in ts], device="synthetic",
                      meta={"buckets": list(bs), "note": "staircase up to bmax, smooth beyond"})


def named_profile(name: str) -> SPSProfile:
    """"gpu-like", "jagged", "cpu" (assets/profiles/cpu.json, written by `dspark-viz profile`), or a .json path."""
    key = name.strip().lower().replace("_", "-")
    if key in ("gpu-like", "gpu"):
        return gpu_like()
    if key == "jagged":
        return jagged()
    if key == "cpu":
        path = PROFILE_DIR / "cpu.json"
        if not path.exists():
            raise FileNotFoundError(f"no measured CPU profile at {path}; run `dspark-viz profile` to create it")
        return SPSProfile.load(path)
    if key.endswith(".json") and Path(name).exists():
        return SPSProfile.load(name)
    raise ValueError(f"unknown SPS profile {name!r}; valid names: {', '.join(PROFILE_NAMES)} (or a .json path)")


def cpu_profile_file(dtype: str = "float32", matmul: str = "skinny-kernel") -> Path:
    """Where the measured CPU curve for this setup lives: cpu.json (fp32 with the few-row kernel, the default
    setup), cpu-stock.json (fp32, stock matmuls: DSPARK_SKINNY=0 or no compiler), cpu-bf16.json and
    cpu-bf16-stock.json (bf16 with / without the kernel). Each is written by `dspark-viz profile` run under
    that setup; the costs differ enough to change ℓ."""
    dt = str(dtype).replace("torch.", "")
    stem = "cpu-bf16" if dt in ("bfloat16", "bf16") else "cpu"
    return PROFILE_DIR / (f"{stem}.json" if matmul == "skinny-kernel" else f"{stem}-stock.json")


def profile_for(target) -> SPSProfile:
    """The profile single-user decoding schedules with for this target: on CPU the measured curve of its
    dtype and matmul path (falling back to cpu.json), else the synthetic GPU-like curve."""
    device = str(getattr(target, "device", "cpu"))
    if device.startswith("cpu"):
        path = cpu_profile_file(str(getattr(target, "dtype", "float32")), getattr(target, "matmul_path", "skinny-kernel"))
        for p in (path, PROFILE_DIR / "cpu.json"):
            if p.exists():
                return SPSProfile.load(p)
    return gpu_like()


# -- measurement -------------------------------------------------------------------------------
def default_batches(bmax: int) -> list[int]:
    """1..8 every size, then 12, 16, 24, 32, 48, 64, 96, … (×1.5 / ×4/3 alternately) up to bmax."""
    out, b = list(range(1, min(8, bmax) + 1)), 8
    while b < bmax:
        b = b * 3 // 2 if (b & (b - 1)) == 0 else b * 4 // 3
        out.append(min(b, bmax))
    return sorted(set(out))


def _sync(device) -> None:
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()


def monotone_steps(batches: Sequence[int], seconds: Sequence[float]) -> np.ndarray:
    """Step times made non-decreasing in B by a running max — from B = 2 on when the curve starts at B = 1,
    which keeps its own time: on CPU one-token forwards take torch's stock path while 2–8-token ones take
    the few-row kernel and lean layers, so in bf16 one token really costs more than two (cpu-bf16.json),
    and a running max from B = 1 would flatten 1–7 tokens to one cost and send the scheduler to ℓ ≈ γ."""
    t = np.asarray(seconds, dtype=float)                                  # (P,)
    if len(t) >= 2 and int(batches[0]) == 1:
        return np.concatenate([t[:1], np.maximum.accumulate(t[1:])])
    return np.maximum.accumulate(t)


def _profiling_ids(target, text: str, n: int) -> list[int]:
    """``text`` encoded and repeated to exactly n token ids (the context the timings run over)."""
    ids = list(target.encode(text))
    if not ids:
        raise ValueError("the profiling text encodes to no tokens")
    return (ids * (n // len(ids) + 1))[:n]


def measure_profile(target, bmax: int = 64, repeats: int = 5, ctx_len: int = 256,
                    batches: Sequence[int] | None = None, warmup: int = 1, monotone: bool = True,
                    text: str = "The quick brown fox jumps over the lazy dog. ") -> SPSProfile:
    """Time the target's verify forward: median seconds for B new tokens over a ctx_len-token cache.

    Uses only target.encode(text), target.new_cache(), target.forward(ids (1, n), cache) and
    target.crop(cache, length) (in place, or returning the cropped cache). monotone=True makes the step
    time non-decreasing in B (running max, from B = 2 on: see monotone_steps; timing noise on a busy machine
    otherwise creates fake cliffs the scheduler would chase); the raw medians are kept in meta["raw_sps"].
    """
    import torch

    batches = sorted(set(int(b) for b in (batches or default_batches(bmax))))
    if not batches or batches[0] < 1:
        raise ValueError("batches must be positive integers")
    need = ctx_len + batches[-1]
    max_ctx = getattr(target, "max_context", None)
    if isinstance(max_ctx, int) and need > max_ctx:
        raise ValueError(f"ctx_len + bmax = {need} exceeds the target's context of {max_ctx} tokens")
    ids = _profiling_ids(target, text, need)
    device = getattr(target, "device", "cpu")
    cache = target.new_cache()
    with torch.inference_mode():
        target.forward(torch.tensor([ids[:ctx_len]], dtype=torch.long), cache)   # prefill (1, ctx_len)
        times: dict[int, list[float]] = {b: [] for b in batches}
        for i in range(warmup + repeats):           # round-robin over B: a slow spell of a shared machine
            for b in batches:                       # lands on every B alike instead of bending the curve
                block = torch.tensor([ids[ctx_len: ctx_len + b]], dtype=torch.long)    # (1, B)
                _sync(device)
                t0 = time.perf_counter()
                target.forward(block, cache)
                _sync(device)
                if i >= warmup:
                    times[b].append(time.perf_counter() - t0)
                res = target.crop(cache, ctx_len)
                cache = res if res is not None else cache
        med = [statistics.median(times[b]) for b in batches]
    step = monotone_steps(batches, med) if monotone else np.asarray(med)  # (P,) seconds
    return SPSProfile(f"measured-{getattr(target, 'name', 'target')}", batches, (1.0 / step).tolist(),
                      device=str(device), meta=dict(ctx_len=ctx_len, repeats=repeats, warmup=warmup,
                                                    monotone=monotone, raw_sps=[1.0 / t for t in med],
                                                    torch=torch.__version__, when=time.strftime("%Y-%m-%d")))


def measure_draft_costs(target, names: Sequence[str], repeats: int = 9, ctx_len: int = 256,
                        text: str = "The quick brown fox jumps over the lazy dog. ") -> dict[str, float]:
    """Median seconds of one proposal (γ drafts at T = 1, chart diagnostics off) after a ctx_len-token context,
    per drafter name; a name that does not load for this target is left out. The hybrid drafter prices its
    neural proposal with these (drafters/hybrid.py), so it is part of the hardware profile, like SPS(B)."""
    import torch

    from .drafters import load_drafter, speed_only
    from .drafters.base import Context

    ids = _profiling_ids(target, text, ctx_len)
    device = getattr(target, "device", "cpu")
    _, out = target.prefill(ids, features=True, last_only=True)
    out_s: dict[str, float] = {}
    for name in names:
        try:
            d = speed_only(load_drafter(name, target))
        except (ValueError, FileNotFoundError, OSError):
            continue
        st = d.begin(Context(ids, out.features[0] if out.features is not None else None))
        g = torch.Generator().manual_seed(0)
        times = []
        for i in range(1 + repeats):                      # the first proposal warms up
            _sync(device)
            t0 = time.perf_counter()
            d.propose(st, ids[-1], len(ids), 1.0, g)
            _sync(device)
            if i:
                times.append(time.perf_counter() - t0)
        out_s[name] = statistics.median(times)
    return out_s


# -- simulation ---------------------------------------------------------------------------------
@dataclass
class SimRound:
    conf: list[float] | None            # (γ,) confidences the policy sees (calibrated when recorded)
    m: int                              # accepted drafts under the recorded verification
    gamma: int                          # drafted slots (caps ℓ)
    censored: bool                      # recorded with ℓ < γ and fully accepted: m is a lower bound


@dataclass
class SimResult:
    policy: str
    R: int
    n_rounds: int
    throughput: float                   # committed tokens / s, all requests
    per_user: float                     # tokens / s of one request (throughput / R)
    mean_budget: float                  # mean ℓ per request-step
    tau: float                          # mean committed tokens per request-step
    mean_batch: float                   # mean B per step
    total_tokens: int
    total_time: float
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _replay(trace) -> list[SimRound]:
    out = []
    for r in trace.rounds:
        if not r.drafts:
            continue
        ds = sorted(r.drafts, key=lambda d: d.k)
        if all(d.confidence_cal is not None for d in ds):
            conf = [float(d.confidence_cal) for d in ds]
        elif all(d.confidence is not None for d in ds):
            conf = [float(d.confidence) for d in ds]
        else:
            conf = None
        out.append(SimRound(conf, int(r.accepted), len(ds), r.accepted >= r.ell and r.ell < len(ds)))
    return out


def simulate(traces: Sequence["Trace"], policy: "Policy", profile: SPSProfile, R: int, n_rounds: int = 200,
             draft_time: float = 0.0, seed: int = 0) -> SimResult:
    """Serve R concurrent requests for n_rounds steps by replaying recorded rounds (see module doc).

    Traces should be recorded with full-block verification (ℓ = γ); a round recorded with ℓ < γ that was
    fully accepted is replayed as if slot ℓ+1 would have been rejected (pessimistic; counted in meta).
    Policies that need confidences skip rounds without them (then replays are no longer paired with
    confidence-free policies on the same traces). ℓ is capped at each round's γ.
    """
    if R < 1 or n_rounds < 1:
        raise ValueError("R and n_rounds must be ≥ 1")
    need_conf = getattr(policy, "needs_confidence", False)
    pools = [[x for x in _replay(t) if x.conf is not None or not need_conf] for t in traces]
    pools = [p for p in pools if p]
    if not pools:
        raise ValueError(f"no replayable rounds for policy {policy.name!r}"
                         + (" (it needs confidences and the traces have none)" if need_conf else ""))
    rng = np.random.default_rng(seed)
    slot_trace = rng.integers(len(pools), size=R)                       # (R,) which trace each slot replays
    slot_pos = np.zeros(R, dtype=int)
    policy.reset()
    total_t, total_tok, total_ell, total_B, censored = 0.0, 0, 0, 0, 0
    for _ in range(n_rounds):
        rounds = []
        for r in range(R):
            if slot_pos[r] >= len(pools[slot_trace[r]]):                # request finished: a new one arrives
                slot_trace[r], slot_pos[r] = rng.integers(len(pools)), 0
            rounds.append(pools[slot_trace[r]][slot_pos[r]])
            slot_pos[r] += 1
        if getattr(policy, "anticipating", False):                       # OracleReference reads the outcomes
            ell = policy.lengths(rounds, profile)
        else:
            conf = [x.conf for x in rounds]                              # (R,) × (γ,) or None
            ell = [min(e, x.gamma) for e, x in zip(policy.choose(conf, profile, explain=False).lengths, rounds)]
        B = sum(1 + e for e in ell)
        total_t += profile.step_time(B) + draft_time
        total_tok += sum(min(x.m, e) + 1 for x, e in zip(rounds, ell))
        total_ell += sum(ell)
        total_B += B
        censored += sum(x.censored and e > x.m for x, e in zip(rounds, ell))
    thr = total_tok / total_t
    return SimResult(policy.name, R, n_rounds, thr, thr / R, total_ell / (R * n_rounds),
                     total_tok / (R * n_rounds), total_B / n_rounds, total_tok, total_t,
                     meta={"profile": profile.name, "draft_time": draft_time, "seed": seed,
                           "censored_replays": censored})


class OracleReference:
    """Not a policy: a reference that knows each round's outcome m (it reads the recorded acceptance, so it
    can neither run in a decode loop nor stay lossless). Per step it picks the budget B ∈ [R, R + Σ γ_r] with
    the most committed tokens per second, (R + min(B − R, Σ m_r)) / t(B), and fills it with drafts that will
    be accepted first (one per request in turn), then, only where a larger forward is faster (the measured
    CPU profile's one-token step is its slowest), with drafts that will be rejected. For the same budget no
    policy commits more tokens in a step: the yardstick against which the real policies are read."""
    name = "oracle"
    anticipating = True
    needs_confidence = False

    def reset(self) -> None:
        pass

    def lengths(self, rounds: Sequence[SimRound], profile: SPSProfile) -> list[int]:
        m, cap = [x.m for x in rounds], [x.gamma for x in rounds]        # (R,) each
        R, good = len(m), sum(m)
        B = np.arange(R, R + sum(cap) + 1)                               # candidate budgets
        tokens = R + np.minimum(B - R, good)
        extra = int(B[np.argmax(tokens / profile.step_time(B))]) - R      # first maximum: the smallest B
        ell = [0] * R
        for limit in (m, cap):                                           # accepted drafts first, then the rest
            while extra and any(e < c for e, c in zip(ell, limit)):
                for r in range(R):
                    if extra and ell[r] < limit[r]:
                        ell[r] += 1
                        extra -= 1
        return ell


def _as_policy(p):
    from .scheduler import Policy, make_policy

    if isinstance(p, (Policy, OracleReference)):
        return p
    return OracleReference() if str(p).strip().lower() == "oracle" else make_policy(p)


# every policy the serving simulation compares (CLI `simulate`, benchmarks/results.py --simulate)
SWEEP_POLICIES = tuple(f"fixed-{k}" for k in range(1, 8)) + ("hardware-aware", "hardware-aware+floor", "async-global",
                                                          "oracle")   # the last: OracleReference, not a policy


def sweep(traces, policies, profile: SPSProfile, Rs: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
          n_rounds: int = 200, draft_time: float = 0.0, seed: int = 0):
    """DataFrame (policy, R, throughput, per_user, mean_budget, tau, mean_batch): simulate for each pair."""
    import pandas as pd

    rows = []
    for p in policies:
        pol = _as_policy(p)
        for R in Rs:
            s = simulate(traces, pol, profile, R, n_rounds, draft_time, seed)
            rows.append(dict(policy=s.policy, R=R, throughput=s.throughput, per_user=s.per_user,
                             mean_budget=s.mean_budget, tau=s.tau, mean_batch=s.mean_batch))
    return pd.DataFrame(rows, columns=["policy", "R", "throughput", "per_user", "mean_budget", "tau",
                                       "mean_batch"])


def threshold_sweep(traces, thetas: Sequence[float] = tuple(np.round(np.linspace(0.0, 0.95, 20), 2))):
    """Paper Fig. 5: StaticThreshold on survival a_k ≥ θ, verified tokens split into accepted / rejected.

    One row per (domain, θ), plus domain "all": accepted = Σ min(m, ℓ), rejected = Σ (ℓ − min(m, ℓ))
    (verified but not kept), per-round means, and accept_rate = accepted / verified.
    """
    import pandas as pd

    from .scheduler import StaticThreshold

    by_dom: dict[str, list[SimRound]] = {}
    for t in traces:
        rs = [x for x in _replay(t) if x.conf is not None]
        by_dom.setdefault(str(t.meta.get("domain", "unknown")), []).extend(rs)
    by_dom["all"] = [x for v in list(by_dom.values()) for x in v]
    rows = []
    for dom, rs in by_dom.items():
        if not rs:
            continue
        for th in thetas:
            pol = StaticThreshold(float(th), on="survival")
            ells = [pol.choose([x.conf], explain=False).lengths[0] for x in rs]
            acc = sum(min(x.m, e) for x, e in zip(rs, ells))
            ver = sum(ells)
            rows.append(dict(domain=dom, theta=float(th), accepted=acc, rejected=ver - acc, verified=ver,
                             accepted_per_round=acc / len(rs), rejected_per_round=(ver - acc) / len(rs),
                             accept_rate=acc / ver if ver else float("nan"), n_rounds=len(rs)))
    return pd.DataFrame(rows)


# -- headline numbers -----------------------------------------------------------------------------
def _cross(xs: np.ndarray, ys: np.ndarray, x0: float) -> float:
    """y at the first segment (in R order) of the curve (xs, ys) that crosses x0; nan if none."""
    for i in range(len(xs) - 1):
        lo, hi = sorted((xs[i], xs[i + 1]))
        if lo <= x0 <= hi:
            if xs[i + 1] == xs[i]:
                return float(ys[i])
            w = (x0 - xs[i]) / (xs[i + 1] - xs[i])
            return float(ys[i] + w * (ys[i + 1] - ys[i]))
    return float("nan")


def _curve(df, policy: str):
    d = df[df.policy == policy].sort_values("R")
    if d.empty:
        raise ValueError(f"policy {policy!r} is not in the sweep (have: {sorted(df.policy.unique())})")
    return d.R.to_numpy(float), d.throughput.to_numpy(float), d.per_user.to_numpy(float)


def headline(df, policy: str = "hardware-aware", baseline: str = "fixed-1", sla_R: int = 32) -> dict[str, Any]:
    """Three summary ratios of a ``sweep`` frame.

    SLA: the per-user speed the baseline reaches at R = sla_R (interpolated in log R). Each policy's
    throughput at that per-user speed is read off its R-curve (first crossing, linear between sweep
    points); if the policy is faster than the SLA even at its largest R, its throughput there is used
    (a lower bound, flagged in ``policy_at_sla_is_lower_bound``).
    throughput_gain_at_sla = policy / baseline throughput at the SLA.
    per_user_speedup_at_matched_throughput = policy / baseline per-user speed at the baseline's
    throughput at R = sla_R.  min_ratio_vs_best_fixed = min over R of policy throughput / best
    FixedLength (any "fixed-*" policy in the frame) throughput at that R.
    """
    Rp, Tp, Up = _curve(df, policy)
    Rb, Tb, Ub = _curve(df, baseline)
    lr = np.log2(Rb)
    sla = float(np.interp(math.log2(sla_R), lr, Ub))
    thr_b = float(np.interp(math.log2(sla_R), lr, Tb))
    thr_p, lower = _cross(Up, Tp, sla), False
    if math.isnan(thr_p) and Up.min() > sla:
        thr_p, lower = float(Tp[-1]), True
    up_p = _cross(Tp, Up, thr_b)
    fixed = df[df.policy.str.startswith("fixed")].groupby("R").throughput.max()
    mine = df[df.policy == policy].set_index("R").throughput
    common = mine.index.intersection(fixed.index)
    ratio = (mine[common] / fixed[common]) if len(common) else None
    return dict(
        sla_R=sla_R, sla_per_user=sla, baseline_throughput_at_sla=thr_b, policy_throughput_at_sla=thr_p,
        policy_at_sla_is_lower_bound=lower, throughput_gain_at_sla=thr_p / thr_b,
        per_user_speedup_at_matched_throughput=up_p / sla,
        min_ratio_vs_best_fixed=float(ratio.min()) if ratio is not None else float("nan"),
        argmin_R_vs_best_fixed=int(ratio.idxmin()) if ratio is not None else None,
    )
