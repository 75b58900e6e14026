"""Verification-length policies: how many drafted tokens of each request the target verifies.

Legend: R requests in the batch, γ block size, r request (0-based), j / k position (1-based),
c_{r,j} conditional confidence, a_{r,j} = Π_{i≤j} c_{r,i} prefix survival, ℓ_r verified length,
B = Σ_r (1 + ℓ_r) tokens in the verify forward, τ = Σ_r (1 + Σ_{j≤ℓ_r} a_{r,j}) expected committed
tokens, SPS(B) engine steps/s, Θ = τ·SPS(B) expected token throughput, K verify capacity (AsyncGlobal).

One interface: ``policy.choose(conf, sps) -> Schedule`` where conf[r] is the list c_{r,1..γ} (raw or
calibrated) or None when the drafter has no confidence head; the policy computes a = cumprod(c).

Lossless requirement (non-anticipation). Speculative sampling reproduces the target distribution as long
as the event "slot j of request r is verified" (ℓ_r ≥ j) is decided from information available before
x_{r,j} is sampled: c_{r,1..j} (c_{r,j} reads x_{r,j−1}, not x_{r,j}), other requests, and the past.
It must not depend on c_{r,j+1..γ}, which read x_{r,j} (paper appendix A).
  * FixedLength, StaticThreshold: ℓ_r ≥ j iff a test on c_{r,1..j} passes — non-anticipating.
  * HardwareAware (Algorithm 1): candidates are sorted by a descending, ties to smaller j then smaller r.
    Since a_{r,j+1} ≤ a_{r,j}, every later slot of request r sorts *after* (r, j), so the path up to (r, j)
    — and the decision to admit it, "Θ improved at every step so far" — only involves c_{r,1..j} and other
    requests. The early stop is what makes this true; the retrospective variant (``early_stop=False``,
    argmax of Θ over the whole path) looks at later slots and is NOT lossless (kept for teaching).
  * AsyncGlobal (§5.2): K is computed from confidences two calls old (already-committed rounds), then
    the K best current candidates are verified with no early stop. (r, j) is verified iff its rank is
    < K, and its rank depends only on candidates sorted before it, which by the argument above never
    include r's later slots: non-anticipating for any K that does not depend on the current block.
  * HardwareAware with a stale floor (``floor_lag``, beyond the paper): the first K candidates of the sorted
    order are admitted whatever Θ does (K as in AsyncGlobal, from committed rounds), then Algorithm 1's
    early stop resumes. The decision for (r, j) still reads only candidates sorted up to it and the past.
  * Across requests: sorting by a (ties → smaller j, then r) is a k-way merge of the non-increasing
    sequences a_{r,·}, so x_{r,j} can only influence candidates merged after (r, j). Both policies are
    therefore one sequential stopping process over the merged order, and the joint law of all requests'
    outputs is the product of target laws (tests/test_scheduler.py enumerates this exactly).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from .cost import SPSProfile, gpu_like
from .registry import LiveNames


def checked(conf, what: str = "confidences") -> np.ndarray:
    """conf as a float array, or a ValueError when any value is NaN or outside [0, 1] (they are probabilities)."""
    c = np.asarray(conf, dtype=float)
    bad = ~((c >= 0.0) & (c <= 1.0))                     # NaN fails both comparisons
    if bad.any():
        raise ValueError(f"{what} must be probabilities in [0, 1]; got {c[bad].flat[0]!r}")
    return c


def survival(conf: Sequence[float]) -> np.ndarray:
    """a_j = Π_{i≤j} c_i.  (γ,)"""
    return np.cumprod(checked(conf))


@dataclass
class Schedule:
    lengths: list[int]                  # (R,) ℓ_r
    path: list[dict] = field(default_factory=list)  # candidates in sorted order: r, j, a, B, tau, theta, admitted
    stop_at: int | None = None          # index in path where admission stopped (None: nothing cut)
    theta_best: float = float("nan")    # Θ of the chosen lengths (nan without a profile / confidences)
    B: int = 0                          # Σ (1 + ℓ_r)
    tau: float = float("nan")           # expected committed tokens of the chosen lengths
    info: dict[str, Any] = field(default_factory=dict)  # policy extras (start Θ, capacity K, …)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _surv_list(conf, name: str) -> list[np.ndarray]:
    """conf (R,) × (γ_r,) → [a_r (γ_r,)]; one vectorised cumprod when every block has the same γ."""
    for r, c in enumerate(conf):
        if c is None:
            raise ValueError(f"policy {name!r} needs confidences, request {r} has none")
    if len(conf) and len({len(c) for c in conf}) == 1:
        return list(np.cumprod(checked(conf), axis=1))                 # (R, γ) rows
    return [survival(c) for c in conf]


def _tau(a_list: list[np.ndarray], lengths: list[int]) -> float:
    """τ = Σ_r (1 + Σ_{j≤ℓ_r} a_{r,j})."""
    if a_list and len({len(a) for a in a_list}) == 1:
        A = np.asarray(a_list)                                           # (R, γ)
        mask = np.arange(A.shape[1])[None, :] < np.asarray(lengths)[:, None]
        return float(len(a_list) + (A * mask).sum())
    return float(sum(1.0 + a[:e].sum() for a, e in zip(a_list, lengths)))


def _finish(lengths: list[int], conf, sps: SPSProfile | None, a_list=None, **kw) -> Schedule:
    B = sum(1 + e for e in lengths)
    tau = float("nan")
    if a_list is None and all(c is not None for c in conf):
        a_list = _surv_list(conf, "")
    if a_list is not None:
        tau = _tau(a_list, lengths)
    theta = tau * float(sps(B)) if sps is not None else float("nan")
    return Schedule(list(lengths), B=B, tau=tau, theta_best=theta, **kw)


# -- the greedy admission path (shared by HardwareAware and AsyncGlobal) ------------------------------
def sorted_candidates(a_list: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All (r, j) with a_{r,j} > 0, sorted by a descending, ties → smaller j, then smaller r.  3 × (M,)"""
    lens = np.array([len(a) for a in a_list], dtype=int)                # (R,)
    r = np.repeat(np.arange(len(a_list)), lens)                          # (Σγ,)
    j = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens) + 1
    a = np.concatenate(list(a_list)).astype(float) if len(a_list) else np.zeros(0)
    keep = a > 0
    r, j, a = r[keep], j[keep], a[keep]
    order = np.lexsort((r, j, -a))                                       # last key is the primary one
    return r[order], j[order], a[order]


def greedy_path(a_list: list[np.ndarray], sps: SPSProfile):
    """Θ along the admission path.  → (r, j, a, B, tau, theta) each (M,), and Θ_0 = R·SPS(R)."""
    R = len(a_list)
    r, j, a = sorted_candidates(a_list)
    B = R + np.arange(1, len(a) + 1)                                     # (M,)
    tau = R + np.cumsum(a)                                               # (M,)
    theta = tau * np.asarray(sps(B), dtype=float) if len(a) else np.zeros(0)
    return r, j, a, B, tau, theta, R * float(sps(R))


def admitted_count(theta: np.ndarray, theta0: float, early_stop: bool = True, floor: int = 0) -> int:
    """Algorithm 1: admit while Θ strictly improves, stop at the first non-improvement; the first
    ``floor`` candidates are admitted unconditionally (a capacity known before this block, 0 = none).
    Without the early stop: the first argmax of Θ over the whole path (retrospective, not lossless)."""
    if early_stop:
        prev = np.r_[theta0, theta[:-1]]                                 # Θ before each admission
        bad = np.flatnonzero((theta <= prev) & (np.arange(len(theta)) >= floor))
        return int(bad[0]) if bad.size else len(theta)
    return int(np.argmax(np.r_[theta0, theta]))


def _lengths(R: int, r: np.ndarray, n: int) -> list[int]:
    """ℓ_r = number of admitted candidates of r (the admitted set is prefix-closed)."""
    return np.bincount(r[:n], minlength=R).astype(int).tolist()


def _path_dicts(r, j, a, B, tau, theta, n: int) -> list[dict]:
    return [dict(r=int(r[i]), j=int(j[i]), a=float(a[i]), B=int(B[i]), tau=float(tau[i]),
                 theta=float(theta[i]), admitted=bool(i < n)) for i in range(len(a))]


# -- policies ------------------------------------------------------------------------------------------
class Policy:
    name: str = "policy"
    needs_confidence: bool = False
    lossless: bool = True

    def choose(self, conf: Sequence[Sequence[float] | None], sps: SPSProfile | None = None, *,
               explain: bool = True) -> Schedule:
        """conf[r] = c_{r,1..γ} or None → Schedule. explain=False skips the teaching path (faster)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget per-run state (only stateful policies have any)."""

    def verifies_nothing(self, R: int, sps: SPSProfile | None = None) -> bool:
        """True only when ``choose`` would set every ℓ_r = 0 for R requests whatever their confidences, so
        that the round need not draft at all (a decision from the profile alone: lossless). False: unknown."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class FixedLength(Policy):
    """ℓ_r = min(ell, γ_r); ell = 1 is the MTP-1 baseline. A None confidence list leaves ℓ = ell
    (the caller caps it at the number of drafted tokens)."""

    def __init__(self, ell: int):
        if int(ell) != ell or ell < 0:
            raise ValueError(f"FixedLength needs an integer ell ≥ 0, got {ell!r}")
        self.ell = int(ell)
        self.name = f"fixed-{self.ell}"

    def choose(self, conf, sps=None, *, explain=True) -> Schedule:
        for c in conf:
            if c is not None:
                checked(c)
        ell = [self.ell if c is None else min(self.ell, len(c)) for c in conf]
        return _finish(ell, conf, sps)


class StaticThreshold(Policy):
    """ℓ_r = number of leading positions with c_{r,k} ≥ θ (on="confidence") or a_{r,k} ≥ θ
    (on="survival"): stop at the first failure."""
    needs_confidence = True

    def __init__(self, theta: float, on: str = "survival"):
        if on not in ("confidence", "survival"):
            raise ValueError(f"StaticThreshold on must be 'confidence' or 'survival', got {on!r}")
        self.theta, self.on = float(theta), on
        self.name = f"threshold-{on}-{self.theta:g}"

    def choose(self, conf, sps=None, *, explain=True) -> Schedule:
        ell = []
        for r, c in enumerate(conf):
            if c is None:
                raise ValueError(f"policy {self.name!r} needs confidences, request {r} has none")
            v = survival(c) if self.on == "survival" else checked(c)
            fail = np.flatnonzero(~(v >= self.theta))
            ell.append(int(fail[0]) if fail.size else len(v))
        return _finish(ell, conf, sps)


class _StaleCapacity:
    """K from the confidences ``lag`` calls old: the tokens the retrospective search admits on that batch
    (safe: those rounds are committed). ``None`` until ``lag`` calls have been seen."""

    def __init__(self, lag: int):
        if lag < 1:
            raise ValueError("the capacity lag must be ≥ 1 (lag 0 would read the current block)")
        self.lag = int(lag)
        self._history: list[list[list[float]]] = []

    def reset(self) -> None:
        self._history = []

    def capacity(self, stale_conf, sps: SPSProfile) -> int:
        a_list = [survival(c) for c in stale_conf if c is not None]
        _, _, _, _, _, theta, theta0 = greedy_path(a_list, sps)
        return admitted_count(theta, theta0, early_stop=False)

    def stale_K(self, conf, sps: SPSProfile) -> int | None:
        """K from `lag` calls ago (None while warming up); then remembers ``conf``."""
        K = self.capacity(self._history[-self.lag], sps) if len(self._history) >= self.lag else None
        self._history = (self._history + [[list(map(float, c)) for c in conf]])[-self.lag:]
        return K


class HardwareAware(_StaleCapacity, Policy):
    """Algorithm 1 (paper §3.2.2): greedy admission by a_{r,j}, stop at the first Θ non-improvement.

    early_stop=False is the retrospective global search of appendix A (argmax Θ over the whole path):
    it can pick a better Θ on a jagged profile but is NOT lossless. With sps None the synthetic
    gpu_like() profile is used (noted in Schedule.info["profile"]).

    floor_lag (beyond the paper; None = Algorithm 1 exactly): on a profile with steps (CUDA-graph buckets)
    the first non-improvement can be a bucket edge with a better Θ behind it. With a floor, the first K
    sorted candidates are admitted unconditionally, K = AsyncGlobal's capacity from the batch `floor_lag`
    calls old, and the early stop applies after them. Stateful then: call reset() between runs.
    """
    needs_confidence = True

    def __init__(self, early_stop: bool = True, floor_lag: int | None = None):
        _StaleCapacity.__init__(self, floor_lag or 1)
        self.early_stop = bool(early_stop)
        self.floor_lag = None if floor_lag is None else int(floor_lag)
        if self.floor_lag is not None and not self.early_stop:
            raise ValueError("floor_lag needs the early stop (the retrospective search has no use for it)")
        self.lossless = self.early_stop
        self.name = ("hardware-aware" if self.early_stop else "retrospective") + ("+floor" if floor_lag else "")

    def choose(self, conf, sps=None, *, explain=True) -> Schedule:
        sps = sps if sps is not None else gpu_like()
        a_list = _surv_list(conf, self.name)
        K = self.stale_K(conf, sps) if self.floor_lag else None
        r, j, a, B, tau, theta, theta0 = greedy_path(a_list, sps)
        n = admitted_count(theta, theta0, self.early_stop, floor=K or 0)
        ell = _lengths(len(a_list), r, n)
        stop = n if n < len(a) else None
        info = dict(theta0=theta0, B0=len(a_list), profile=sps.name, admitted=n, candidates=int(len(a)))
        if self.floor_lag:
            info["floor_K"] = K
        return _finish(ell, conf, sps, a_list, path=_path_dicts(r, j, a, B, tau, theta, n) if explain else [],
                       stop_at=stop, info=info)

    def verifies_nothing(self, R: int, sps: SPSProfile | None = None) -> bool:
        """Algorithm 1 admits its first candidate iff Θ_1 = (R + a_1)·SPS(R + 1) > Θ_0 = R·SPS(R), and a_1 ≤ 1:
        where even a sure token does not pay, (R + 1)·SPS(R + 1) ≤ R·SPS(R), every ℓ is 0 (the floor variant
        admits regardless, the retrospective search looks further: neither is decided here)."""
        if self.floor_lag or not self.early_stop or R < 1:
            return False
        sps = sps if sps is not None else gpu_like()
        return (R + 1) * float(sps(R + 1)) <= R * float(sps(R))


class AsyncGlobal(_StaleCapacity, Policy):
    """Paper §5.2: capacity K from confidences `lag` (= 2) calls old, then the global top-K of the current
    survivals, no early stop.

    K = number of tokens the retrospective search (argmax Θ over the whole path, no early stop) admits
    on the stale batch — safe because that batch's tokens are already committed. Until `lag` calls have
    been seen K = R (the budget of ℓ = 1 per request, spent globally). K is a token capacity and is used
    as is if the batch composition changed. Stateful: call reset() between runs.
    """
    needs_confidence = True

    def __init__(self, lag: int = 2):
        _StaleCapacity.__init__(self, lag)
        self.name = "async-global"

    def choose(self, conf, sps=None, *, explain=True) -> Schedule:
        sps = sps if sps is not None else gpu_like()
        a_list = _surv_list(conf, self.name)
        K = self.stale_K(conf, sps)
        K, src = (K, f"{self.lag} calls old") if K is not None else (len(a_list), "warm-up: K = R")
        r, j, a, B, tau, theta, theta0 = greedy_path(a_list, sps)
        n = min(K, len(a))
        ell = _lengths(len(a_list), r, n)
        return _finish(ell, conf, sps, a_list, path=_path_dicts(r, j, a, B, tau, theta, n) if explain else [],
                       stop_at=n if n < len(a) else None,
                       info=dict(K=K, K_source=src, theta0=theta0, profile=sps.name))


# -- the one table of policies: every list of policy names (make_policy, the CLI, the serving sweep, the live engine,
# chart colours) is read from it; register_policy adds one -------------------------------------------------------
@dataclass(frozen=True)
class PolicyEntry:
    name: str
    make: Callable[..., Policy]          # keyword arguments pass through
    label: str                           # one line for help texts and legends
    sweep: tuple[str, ...] = ()          # the names it adds to the serving simulation's sweep (serving/simulate.py)
    colour: str | None = None            # an Okabe–Ito name (viz/style.py) or "#rrggbb"; None: a free colour
    live: bool = False                   # the live engine's policy (background.live_policy): the last one marked


POLICIES: dict[str, PolicyEntry] = {}


def register_policy(name: str, make: Callable[..., Policy], label: str, *, sweep: bool | Sequence[str] = False,
                    colour: str | None = None, live: bool = False) -> PolicyEntry:
    """Add a policy by name; sweep=True puts it in the serving sweep (or give the names it adds there)."""
    names = (name,) if sweep is True else tuple(sweep or ())
    POLICIES[name] = PolicyEntry(name, make, label, names, colour, live)
    return POLICIES[name]


def unregister_policy(name: str) -> None:
    POLICIES.pop(name, None)


def sweep_names() -> tuple[str, ...]:
    """The policies the serving simulation compares, in table order."""
    return tuple(n for e in POLICIES.values() for n in e.sweep)


def live_name() -> str:
    """The policy the live engine runs for a drafter with a confidence head."""
    return [n for n, e in POLICIES.items() if e.live][-1]


register_policy("fixed", FixedLength, "fixed ℓ (ell=…; fixed-<ℓ>; fixed-1 is the MTP-1 baseline)",
                sweep=tuple(f"fixed-{k}" for k in range(1, 8)))
register_policy("threshold", StaticThreshold, "static threshold on c_k or a_k (theta=…, on=…)")
register_policy("hardware-aware", HardwareAware, "hardware-aware, Algorithm 1", sweep=True, colour="vermillion",
                live=True)
register_policy("hardware-aware+floor", lambda **k: HardwareAware(**{"floor_lag": 2, **k}),
                "hardware-aware with a stale floor (floor_lag=2; beyond the paper)", sweep=True, colour="sky")
register_policy("async-global", AsyncGlobal, "async global top-K, §5.2 (lag=…)", sweep=True, colour="purple")
register_policy("retrospective", lambda **k: HardwareAware(early_stop=False, **k),
                "retrospective search, appendix A (not lossless)", colour="yellow")
POLICY_NAMES = LiveNames(lambda: ("fixed", "fixed-<ℓ>") + tuple(n for n in POLICIES if n != "fixed"))


def make_policy(name: str, **kw) -> Policy:
    """Policy by name: fixed (ell=…), fixed-<ℓ>, threshold (theta=…, on=…), hardware-aware,
    hardware-aware+floor (floor_lag=2 unless given), async-global (lag=…), retrospective (Algorithm 1 without the
    early stop; not lossless)."""
    key = str(name).strip().lower().replace("_", "-")
    if key.startswith("fixed-") and key[6:].isdigit():
        return FixedLength(int(key[6:]), **kw)
    if key not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; valid names: {', '.join(POLICY_NAMES)}")
    try:
        return POLICIES[key].make(**kw)
    except TypeError as e:
        raise ValueError(f"bad arguments for policy {name!r}: {e}") from e


def expected_throughput(conf, lengths: Sequence[int], sps: SPSProfile) -> float:
    """Θ = τ·SPS(B) of an arbitrary allocation (brute-force checks, charts)."""
    return _finish(list(lengths), conf, sps).theta_best


__all__ = ["Schedule", "Policy", "FixedLength", "StaticThreshold", "HardwareAware", "AsyncGlobal",
           "make_policy", "survival", "greedy_path", "admitted_count", "sorted_candidates",
           "expected_throughput", "POLICIES", "POLICY_NAMES", "PolicyEntry", "live_name", "register_policy",
           "sweep_names", "unregister_policy"]
