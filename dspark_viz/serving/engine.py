"""One live engine: a loop that owns the target and decodes every active request together, one verification
forward a round for all of them, requests joining and leaving between rounds (continuous batching).

Legend: R live requests, γ block size, ℓ_r verified length of request r, B = Σ_r (1 + ℓ_r) tokens a forward verifies,
S slots of the shared KV cache.

Each round is round.speculative_round over the live requests: every request drafts, the policy allocates ℓ across
all of them (Algorithm 1's global form on this machine's profile), one ragged forward (fast/ragged.py) verifies
every request's block [x0_r, x_{r,1..ℓ_r}], each request accepts and commits by its own generator, and its Round
goes to its own stream. A request holds one slot of the cache from its prefill to its end: its rows are written at
its own positions, and a row attends to its slot's positions up to its own, so keys a rejection left behind (past
the committed prefix) are never read and the next round writes over them. Requests waiting for a slot are admitted
between rounds. Each request keeps its drafter state, generator and Trace, so each one's output law is the
target's whatever else shares the forward.

Where the target decodes on the fused native layers (fast/lean.py, the default on a CPU with the kernel) the engine
is exact: each prompt is prefilled by the target's own prefill and its keys and values copied into its slot, and the
verification forward runs every layer as one ``ragged_layer`` call, whose rows have the bits the target's own
few-token forward gives them. At T = 0 each request's text is then its plain decoding's token for token, at fp32
and bf16, alone or beside others (tests/test_engine.py). Elsewhere (torch's stock layers) prompts share one ragged
call and the forward runs on torch's GEMM, whose last bits may depend on the rows beside a row.

    eng = LiveEngine(target, drafter)
    job = eng.submit("What is 17 + 25?", max_new_tokens=64)
    eng.run_until_idle()            # or eng.start(): the loop in a background thread
    for r in job.rounds(): …        # the Rounds as they come; job.trace once done
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import torch

from ..cost import profile_for
from ..decode import check_settings
from ..fast import ragged
from ..protocol import Context
from ..round import Request, Speculation, speculative_round, timed
from ..sampling import probs_from_logits, sample
from ..scheduler import FixedLength, HardwareAware
from ..threads import give_back
from ..trace import Round, Trace

MAX_LIVE = 8             # requests decoded at once on a CPU; more wait in the queue
_END = object()


class SlotVerifier:
    """round.Verifier over the engine's ragged cache: request i's block goes into slot ``slots[i]`` at positions
    ``pos[i]`` … (its anchor's position onward); ``keep`` needs nothing cut (rows past a request's committed prefix
    are never attended to and are written over)."""

    def __init__(self, fwd, cache, slots: list[int], pos: list[int], layers: list[int], exact: bool = False):
        self.fwd, self.cache, self.slots, self.pos, self.layers, self.exact = fwd, cache, slots, pos, layers, exact
        self.width = 0

    def forward(self, blocks, features):
        lens = [len(b) for b in blocks]
        self.width = max(lens)
        ids = torch.tensor([t for b in blocks for t in b])                                  # (B,)
        slot = torch.cat([torch.full((n,), s) for s, n in zip(self.slots, lens)])
        pos = torch.cat([torch.arange(p, p + n) for p, n in zip(self.pos, lens)])
        self.cache.reserve(int(pos.max()) + 1)
        rows = torch.arange(len(ids))
        out = self.fwd(self.cache, ids, slot, pos, rows, features=self.layers if features else None,
                       exact=self.exact)
        logits, feats = out if features else (out, None)                                   # (B, V), (B, m·d)
        off = [0, *itertools.accumulate(lens)]
        return [(logits[a:b].float(), feats[a:b] if feats is not None else None) for a, b in zip(off, off[1:])]

    def keep(self, accepted):
        pass


@dataclass
class Job:
    """One submitted request: its settings, its Trace, and the stream of its Rounds."""
    id: int
    prompt_ids: list[int]
    max_new_tokens: int
    seed: int
    trace: Trace
    submitted: float
    req: Request | None = None
    slot: int | None = None
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None
    cancelled: bool = False
    t_first: float | None = None       # when its first token was drawn (perf_counter)
    t_end: float | None = None         # when it ended
    temperature: float | None = None   # its own T (None: the engine's)
    gate: object = None                # its speculation gate (gate.SpeculationGate) or None
    diagnostics: bool = True           # False: its drafts skip the chart diagnostics (Drafter.quiet)
    loads: list[int] = field(default_factory=list)             # R of each of its rounds (requests in the forward)
    engine_rounds: list = field(default_factory=list)          # the EngineRounds it took part in
    _stream: queue.Queue = field(default_factory=queue.Queue)

    def rounds(self, timeout: float | None = None):
        """The request's Rounds as the engine commits them, until it ends (raises RuntimeError if it failed)."""
        while True:
            r = self._stream.get(timeout=timeout)
            if r is _END:
                if self.error:
                    raise RuntimeError(self.error)
                return
            yield r

    def engine_throughput(self) -> float:
        """Committed tokens/s of the whole engine (every request) over the rounds this request took part in."""
        t = sum(r.seconds for r in self.engine_rounds)
        return sum(r.committed for r in self.engine_rounds) / t if t > 0 else float("nan")

    def result(self, timeout: float | None = None) -> Trace:
        if not self.done.wait(timeout):
            raise TimeoutError(f"request {self.id} did not finish in {timeout} s")
        if self.error:
            raise RuntimeError(self.error)
        return self.trace


@dataclass
class EngineRound:
    """One engine round: how many requests shared the forward, what it verified, committed and took."""
    R: int
    B: int                             # Σ (1 + ℓ_r): tokens the forward verified
    committed: int
    seconds: float
    lengths: list[int]                 # (R,) ℓ_r
    accepted: list[int] = field(default_factory=list)         # (R,) m_r
    width: int = 1                     # the longest block, 1 + max ℓ_r
    t_draft: float = 0.0               # seconds catching up and drafting (all requests, one after another)
    t_verify: float = 0.0              # seconds scheduling, in the forward and the verdicts


class LiveEngine:
    """The loop that owns ``target`` and decodes every submitted request with ``drafter`` (None: plain decoding,
    one token a round per request), at most ``max_live`` at once; ``temperature`` is each request's T unless its
    ``submit`` gives its own."""

    def __init__(self, target, drafter=None, *, policy=None, sps=None, temperature: float = 0.0,
                 max_live: int = MAX_LIVE, calibration=None):
        if not ragged.supports(target):
            raise ValueError(f"the live engine runs on the ragged forward, which does not cover {target.name!r} "
                             "(Llama-family layers without biases)")
        if not 1 <= max_live <= 64:
            raise ValueError(f"max_live must be 1…64, got {max_live}")
        check_settings(1, temperature)
        if policy is None and drafter is not None:
            policy = HardwareAware() if drafter.has_confidence else FixedLength(drafter.gamma)
        if calibration is None and drafter is not None:
            calibration = getattr(drafter, "calibration", None)
        self.target, self.drafter, self.max_live = target, drafter, max_live
        self.spec = Speculation(target, drafter, policy, sps if sps is not None else profile_for(target),
                                float(temperature), calibration or None)
        self.fwd = ragged.forward_for(target)
        self.exact = self.fwd.can_exact              # rows in the target's own few-token arithmetic (below)
        self.cache = self.fwd.cache(max_live, 256)
        self.free = list(range(max_live))
        self.waiting: deque[Job] = deque()
        self.live: list[Job] = []
        self.history: list[EngineRound] = []
        self._ids = itertools.count()
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stop = False

    # -- requests ------------------------------------------------------------------------
    def submit(self, prompt: str | None = None, *, prompt_ids: list[int] | None = None, max_new_tokens: int = 128,
               seed: int = 0, meta: dict | None = None, temperature: float | None = None, gate=None,
               diagnostics: bool = True) -> Job:
        """Queue a request; it joins the batch at the next round with a free slot. → its Job. ``temperature``:
        its own T (None: the engine's); ``gate``: its speculation gate (a SpeculationGate), None for none;
        ``diagnostics=False``: its drafts skip the chart-only per-slot diagnostics (the same drafts, less work: a
        background or benchmark request nobody charts)."""
        T = self.spec.temperature if temperature is None else float(temperature)
        check_settings(max_new_tokens, T)
        if prompt_ids is None:
            if prompt is None:
                raise ValueError("give a prompt or prompt_ids")
            prompt_ids = self.target.chat_ids(prompt)
        if not prompt_ids:
            raise ValueError("the prompt is empty")
        gamma = self.drafter.gamma if self.drafter is not None else 0
        if len(prompt_ids) + max_new_tokens + gamma + 1 > self.target.max_context:
            raise ValueError(f"prompt ({len(prompt_ids)} tokens) + max_new_tokens ({max_new_tokens}) exceeds the "
                             f"target's context of {self.target.max_context} tokens")
        dr = self.drafter
        trace = Trace(meta=dict(target=self.target.name, drafter=dr.name if dr else "plain",
                                policy=getattr(self.spec.policy, "name", "none") if dr else "none",
                                temperature=T, seed=seed, prompt=prompt, fallback=gate is not None,
                                device=str(self.target.device), dtype=str(self.target.dtype).replace("torch.", ""),
                                gamma=gamma, max_new_tokens=max_new_tokens, engine=True) | dict(meta or {}),
                      prompt_ids=list(prompt_ids), first_token=-1)
        with self._lock:
            job = Job(next(self._ids), list(prompt_ids), max_new_tokens, seed, trace, time.perf_counter(),
                      temperature=T, gate=gate, diagnostics=diagnostics)
            self.waiting.append(job)
            self._lock.notify_all()
        return job

    def cancel(self, job: Job) -> None:
        """The request leaves at the next round (a closed page); the others go on."""
        with self._lock:
            job.cancelled = True
            self._lock.notify_all()

    @property
    def queued(self) -> int:
        return len(self.waiting)

    # -- the loop ------------------------------------------------------------------------
    def step(self) -> list[tuple[Job, Round]]:
        """Admit waiting requests into free slots, then one round for every live request. → (job, Round) pairs."""
        with self._lock:
            for j in [j for j in self.live if j.cancelled]:
                self._finish(j, "cancelled")
            while self.waiting and self.waiting[0].cancelled:
                self._end(self.waiting.popleft(), "cancelled")
            admit = []
            while self.waiting and self.free:
                j = self.waiting.popleft()
                j.slot = self.free.pop(0)
                admit.append(j)
        if admit:
            self._prefill(admit)
        live = [j for j in self.live if not j.req.done]
        for j in [j for j in self.live if j.req.done]:
            self._finish(j)
        if not live:
            return []
        phase, t0 = timed(), time.perf_counter()
        verifier = SlotVerifier(self.fwd, self.cache, [j.slot for j in live], [j.req.pos for j in live],
                                self.target.feature_layers, self.exact)
        try:
            rounds = speculative_round(self.spec, [j.req for j in live], verifier, phase)
        except Exception as e:                       # a round that fails ends its requests, not the engine
            for j in live:
                self._finish(j, f"{type(e).__name__}: {e}")
            return []
        sec = phase.seconds
        er = EngineRound(len(live), sum(1 + r.ell for r in rounds), sum(r.n_committed for r in rounds),
                         time.perf_counter() - t0, [r.ell for r in rounds], [r.accepted for r in rounds],
                         1 + max(r.ell for r in rounds), sec.get("t_catch_up", 0.0) + sec.get("t_draft", 0.0),
                         sec.get("t_schedule", 0.0) + sec.get("t_verify", 0.0))
        self.history.append(er)
        out = []
        for j, r in zip(live, rounds):
            j.trace.rounds.append(r)
            j.trace.t_total = time.perf_counter() - j.submitted
            j.loads.append(er.R)
            j.engine_rounds.append(er)
            j._stream.put(r)
            out.append((j, r))
        for j in live:
            if j.req.done:
                self._finish(j)
        return out

    def _prefill(self, jobs: list[Job]) -> None:
        """The admitted prompts: the last row's logits give the first token, every row's features start the
        drafter. Exact (``self.exact``): each prompt by the target's own prefill, its keys and values copied into
        its slot — the bits its plain decoding starts from; else all prompts in one ragged call."""
        feats = self.drafter is not None and self.drafter.needs_features
        t0 = time.perf_counter()
        if self.exact:
            for j in jobs:
                try:
                    cache, out = self.target.prefill(j.prompt_ids, features=feats, last_only=True)
                    self.cache.adopt(j.slot, cache.layers)
                except Exception as e:
                    self._release(j, f"{type(e).__name__}: {e}")
                    continue
                self._begin(j, out.logits[0, -1], out.features[0] if feats else None, t0)
            return
        lens = [len(j.prompt_ids) for j in jobs]
        ids = torch.tensor([t for j in jobs for t in j.prompt_ids])
        slot = torch.cat([torch.full((n,), j.slot) for j, n in zip(jobs, lens)])
        pos = torch.cat([torch.arange(n) for n in lens])
        ends = torch.tensor(list(itertools.accumulate(lens))) - 1
        try:
            self.cache.reserve(max(lens) + 1)
            out = self.fwd(self.cache, ids, slot, pos, ends, features=self.target.feature_layers if feats else None,
                           feature_rows=torch.arange(len(ids)) if feats else None)
        except Exception as e:
            for j in jobs:
                self._release(j, f"{type(e).__name__}: {e}")
            return
        logits, f = out if feats else (out, None)
        off = [0, *itertools.accumulate(lens)]
        for i, j in enumerate(jobs):
            self._begin(j, logits[i], f[off[i]:off[i + 1]] if feats else None, t0)

    def _begin(self, j: Job, logits: torch.Tensor, feats, t0: float) -> None:
        """A prefilled request goes live: its first token from ``logits`` (V,), its drafter state from ``feats``."""
        gen = torch.Generator(device=str(self.target.device)).manual_seed(j.seed)
        x = sample(probs_from_logits(logits.float(), j.temperature), gen)
        j.trace.first_token, j.trace.first_text = x, self.target.token_text(x)
        j.trace.t_prefill = time.perf_counter() - t0
        state = self.drafter.begin(Context(j.prompt_ids, feats)) if self.drafter is not None else None
        if state is not None and not j.diagnostics:
            self.drafter.quiet(state)
        j.req = Request(state, x, len(j.prompt_ids), j.max_new_tokens - 1, gen, j.gate,
                        stopped=x in self.target.stop_ids, temperature=j.temperature)
        j.t_first = time.perf_counter()
        self.live.append(j)

    def _release(self, job: Job, error: str) -> None:
        """A request that failed before going live: its slot back, its page told."""
        with self._lock:
            self.free.append(job.slot)
        self._end(job, error)

    def _finish(self, job: Job, error: str | None = None) -> None:
        with self._lock:
            if job in self.live:
                self.live.remove(job)
                self.free.append(job.slot)
        self._end(job, error)

    def _end(self, job: Job, error: str | None = None) -> None:
        job.error, job.t_end = error, time.perf_counter()
        job.trace.meta["loads"] = list(job.loads)
        job.trace.t_total = job.t_end - job.submitted
        job.done.set()
        job._stream.put(_END)

    def busy(self) -> bool:
        return bool(self.live or self.waiting)

    def run_until_idle(self) -> None:
        """Rounds until no request is live or waiting (in the calling thread)."""
        while self.busy():
            self.step()

    def start(self) -> "LiveEngine":
        """The loop in a background thread: rounds while there is work, asleep otherwise."""
        if self._thread is None or not self._thread.is_alive():
            self._stop = False
            self._thread = threading.Thread(target=self._loop, name="dspark-engine", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = 10) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._stop and not self.busy():
                    give_back()                      # idle: this thread's OpenMP helpers go back
                    self._lock.wait()
                if self._stop:
                    return
            self.step()

    # -- what it did -----------------------------------------------------------------------
    def throughput(self, last: int | None = None) -> float:
        """Committed tokens per second over the engine's rounds (all requests; prefills excluded)."""
        h = self.history[-last:] if last else self.history
        t = sum(r.seconds for r in h)
        return sum(r.committed for r in h) / t if t > 0 else float("nan")


__all__ = ["LiveEngine", "Job", "EngineRound", "SlotVerifier", "MAX_LIVE"]
