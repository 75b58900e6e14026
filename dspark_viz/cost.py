"""The engine cost model: SPS profiles, how many engine steps per second a target runs at B tokens per forward.

Legend: B tokens in one target forward (verify batch), SPS(B) engine steps per second at B.

A profile is a table (batch → steps/s). Between table points the *step time* 1/SPS is interpolated
linearly; below the first point it is constant; beyond the last point it is extrapolated linearly from
the last two points. Synthetic profiles: ``gpu_like`` (smooth: flat until ~100 tokens, then linear, like
a decode step of a small model on a data-centre GPU) and ``jagged`` (the same curve seen through
CUDA-graph batch buckets: B is padded up to the next bucket, so step time is a staircase). Measured
profiles ship in ``assets/profiles`` (``dspark-viz profile`` writes them; serving.measure times a target);
which one a loaded target schedules with is ``profile_for`` (below: it reads the target's device, dtype and
matmul path by name, so it imports nothing of the model).

A core module: the policies (scheduler.py) read it, and it reads nothing of the package but the settings and
the JSON record helpers.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .records import JSONRecord
from .settings import assets

PROFILE_DIR = assets("profiles")


PROFILE_NAMES = ("gpu-like", "jagged", "cpu")


CUDA_GRAPH_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512)


# -- SPS profile -----------------------------------------------------------------------------
@dataclass
class SPSProfile(JSONRecord):
    RECORD = "an SPS profile"

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

    @classmethod
    def from_dict(cls, d: Any) -> "SPSProfile":
        if not isinstance(d, dict) or d.get("kind", "sps_profile") != "sps_profile":
            raise ValueError("not an SPS profile (expected a JSON object with \"kind\": \"sps_profile\")")
        try:
            return cls(name=str(d["name"]), batch=list(d["batch"]), sps=list(d["sps"]),
                       device=str(d.get("device", "")), meta=dict(d.get("meta") or {}))
        except (KeyError, TypeError) as e:
            raise ValueError(f"not an SPS profile: missing or malformed field {e}") from e


def _gpu_step_time(B, t0: float = 0.010, knee: float = 96.0, slope: float = 0.03) -> np.ndarray:
    """Smooth decode step time: ≈ t0 (weights-bound) until ~knee tokens, then ≈ t0·B/knee (compute-bound)."""
    x = np.asarray(B, dtype=float) / knee
    return t0 * (np.sqrt(1.0 + x ** 2) + slope * x)


def gpu_like(bmax: int = 512, knee: float = 96.0) -> SPSProfile:
    """Smooth saturating profile (H100-like small-model decode): 100 steps/s flat, bending at ~``knee`` tokens
    (96 by default; the name says when another knee was asked for)."""
    if not 1 <= knee <= 4096:
        raise ValueError(f"the knee must lie in 1…4096 tokens, got {knee}")
    b = sorted({*range(1, 17), *range(24, 129, 8), *range(160, bmax + 1, 32), bmax})
    b = [x for x in b if x <= bmax]
    name = "gpu-like" if knee == 96.0 else f"gpu-like (knee {knee:g})"
    return SPSProfile(name, b, (1.0 / _gpu_step_time(b, knee=knee)).tolist(), device="synthetic",
                      meta={"formula": f"t0·(sqrt(1+(B/{knee:g})²) + 0.03·B/{knee:g}), t0 = 10 ms", "knee": knee})


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


# -- which profile a loaded target schedules with ------------------------------------------------
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
    dtype and matmul path (``target.paths.matmul``; falling back to cpu.json), else the synthetic GPU-like
    curve. A target without a paths record (a toy) counts as the default setup."""
    device = str(getattr(target, "device", "cpu"))
    if device.startswith("cpu"):
        matmul = getattr(getattr(target, "paths", None), "matmul", "skinny-kernel")
        path = cpu_profile_file(str(getattr(target, "dtype", "float32")), matmul)
        for p in (path, PROFILE_DIR / "cpu.json"):
            if p.exists():
                return SPSProfile.load(p)
    return gpu_like()
