"""The speculation gate (gate.py): its decisions under a made-up clock, its place in the decode loop, and the
exact output law for every fixed pattern of draft / skip decisions."""
from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest
import torch

from dspark_viz.cost import SPSProfile
from dspark_viz.decode import generate_rounds, make_gate, plain_generate, speculative_generate
from dspark_viz.drafters import HybridDrafter, LookupDrafter, RandomDrafter
from dspark_viz.exact import exact_output_distribution, target_output_distribution
from dspark_viz.gate import SpeculationGate
from dspark_viz.metrics import drafted_share, tau
from dspark_viz.model.toy import TableTarget
from dspark_viz.scheduler import FixedLength, HardwareAware
from dspark_viz.trace import Trace

FLAT = SPSProfile("flat", [1, 8], [50.0, 50.0])          # 20 ms a step at any width


def _drafted(gate, n=3, seconds=0.030, verify=0.020, ell=3):
    gate.observe(True, seconds, n, verify, ell)


def _plain(gate, seconds=0.020):
    gate.observe(False, seconds, 1)


# -- decisions, with the round times given by hand ------------------------------------------------------
def test_warmup_then_one_plain_step_to_time():
    g = SpeculationGate(FLAT, warmup=2)
    assert g.decide().draft and g.decide().reason == "warmup"
    _drafted(g)
    assert g.decide().reason == "warmup"
    _drafted(g)
    d = g.decide()
    assert not d.draft and d.reason == "time a plain step" and d.plain_source == "prior"
    assert d.rate_draft == pytest.approx(3 / 0.030) and d.rate_plain == pytest.approx(1 / 0.020)
    _plain(g, 0.025)
    d = g.decide()
    assert d.draft and d.reason == "drafting pays" and d.plain_source == "measured"
    assert d.rate_plain == pytest.approx(1 / 0.025)


def test_the_rate_counts_expected_tokens_corrected_by_the_committed_ones():
    """n̂ (a round's expected committed tokens) stands in for n; the rate is scaled by Σn / Σn̂ over every drafted
    round, shrunk towards 1 by BIAS_PRIOR tokens."""
    from dspark_viz.gate import BIAS_PRIOR
    g = SpeculationGate(FLAT, warmup=4)
    for n, n_hat in [(1, 2.0), (3, 2.0), (1, 2.0), (1, 2.0)]:     # expected 2 a round, committed 1.5 on average
        g.observe(True, 0.040, n, 0.020, 3, expected=n_hat)
    b = (6 + BIAS_PRIOR) / (8 + BIAS_PRIOR)
    assert g.rate_draft() == pytest.approx(b * 8 / 0.160)
    assert g.rate_draft_se() == pytest.approx(0.0, abs=1e-9)         # equal n̂ and times: no spread left
    g2 = SpeculationGate(FLAT, warmup=4)
    for n in [1, 3, 1, 1]:                                           # without n̂: the committed tokens, unscaled
        g2.observe(True, 0.040, n, 0.020, 3)
    assert g2.rate_draft() == pytest.approx(6 / 0.160) and g2.rate_draft_se() > 0
    with pytest.raises(ValueError, match="expected"):
        g.observe(True, 0.040, 1, 0.020, 3, expected=-1.0)


def test_expected_committed_of_a_round_sums_the_verified_survivals():
    from types import SimpleNamespace as NS
    from dspark_viz.gate import expected_committed
    drafts = [NS(survival=a) for a in (0.8, 0.4, 0.1)]
    assert expected_committed(NS(skipped=False, ell=2, drafts=drafts)) == pytest.approx(1 + 0.8 + 0.4)
    assert expected_committed(NS(skipped=False, ell=0, drafts=drafts)) == 1.0      # drafted, nothing verified
    assert expected_committed(NS(skipped=True, ell=0, drafts=[])) is None
    no_conf = NS(skipped=False, ell=2, drafts=[NS(survival=None)] * 3)
    assert expected_committed(no_conf) is None                                      # no confidences


def test_a_noisy_window_skips_only_beyond_z_standard_errors():
    # drafted rounds alternate 1 and 3 committed tokens in 40 ms: 50 tok/s on average, a plain step 45.5 tok/s
    rounds = [1, 3] * 4
    def gate(z):
        g = SpeculationGate(FLAT, window=8, warmup=8, z=z)
        for n in rounds:
            _drafted(g, n=n, seconds=0.040)
        _plain(g, 0.022)                                 # the timing round: judged right after it
        return g
    loose = gate(0.0)
    assert loose.rate_draft() == pytest.approx(50.0) and loose.rate_draft_se() == pytest.approx(25 / 7 ** 0.5)
    assert gate(1.0).decide().draft                      # 50 tok/s against 45.5: drafting pays at any z
    slow, kept = gate(0.0), gate(1.0)
    for g in (slow, kept):                               # plain steps now 17 ms (median): 58.8 tok/s
        _plain(g, 0.017)
        _plain(g, 0.017)
        g._judge()
    assert slow.plain_step() == (pytest.approx(0.017), "measured")
    assert not slow.decide().draft                       # z = 0 skips on the point estimate (50 < 58.8) …
    assert kept.decide().draft                           # … z = 1 keeps drafting: 50 + 9.4 (one se) > 58.8
    for bad in (-1, float("nan"), float("inf"), "one"):
        with pytest.raises(ValueError):
            SpeculationGate(z=bad)


def test_prior_is_the_profile_scaled_by_the_measured_verify():
    prof = SPSProfile("p", [1, 4], [25.0, 20.0])         # one token 40 ms, four 50 ms
    g = SpeculationGate(prof)
    _drafted(g, verify=0.100, ell=3)                     # measured twice the profile's 50 ms
    t, src = g.plain_step()
    assert src == "prior" and t == pytest.approx(0.080)
    assert SpeculationGate(None).plain_step() == (None, "none")


def test_drafting_that_pays_never_skips_but_to_time_plain_steps():
    g = SpeculationGate(FLAT, warmup=2, refresh=16)
    decisions = []
    for _ in range(60):
        d = g.decide()
        decisions.append(d.reason)
        _drafted(g) if d.draft else _plain(g)          # 100 tokens/s drafting vs 50 plain
    skips = [i for i, r in enumerate(decisions) if r != "drafting pays" and r != "warmup"]
    assert all(decisions[i] == "time a plain step" for i in skips)
    assert skips[0] == 2 and all(b - a == 17 for a, b in zip(skips, skips[1:]))   # one plain step per refresh


def test_drafting_that_loses_backs_off_and_probes():
    g = SpeculationGate(FLAT, warmup=2, probe_after=2, max_skip=8, probe_rounds=1)
    drafts = []
    for _ in range(40):
        d = g.decide()
        drafts.append(d.draft)
        if d.draft:
            _drafted(g, n=1, seconds=0.030)              # 33 tokens/s drafting vs 50 plain: it loses
        else:
            _plain(g)
    pattern = "".join("D" if x else "." for x in drafts)
    # warm-up, one timed plain step, then skips of 2, 4, 8, 8, … between probes of one round
    assert pattern.startswith("DD." + ".." + "D" + "...." + "D" + "........" + "D" + "........" + "D")
    probes = [i for i, x in enumerate(drafts) if x][2:]
    assert all(b - a == 9 for a, b in zip(probes[2:], probes[3:]))


def test_a_winning_probe_resets_the_backoff():
    g = SpeculationGate(FLAT, window=2, warmup=2, probe_after=2, max_skip=16, probe_rounds=2)
    for _ in range(2):
        _drafted(g, n=1, seconds=0.030)
    _plain(g)                                            # timed: drafting loses → skip 2
    assert [g.decide().draft for _ in range(1)] == [False]
    _plain(g)
    _plain(g)
    d = g.decide()
    assert d.draft and d.reason == "probe"
    _drafted(g, n=4, seconds=0.030)                      # the text got easy: 2 rounds' window now pays
    _drafted(g, n=4, seconds=0.030)
    assert g.decide().reason == "drafting pays" and g._backoff == 2


def test_a_probe_is_judged_on_its_own_rounds_not_on_the_rounds_that_lost():
    g = SpeculationGate(FLAT, window=16, warmup=8, probe_after=2, probe_rounds=3)
    for _ in range(8):
        _drafted(g, n=1, seconds=0.030)                  # a hard start: 33 tokens/s against 50 plain
    _plain(g)                                            # timed: drafting loses → skip 2
    assert g.decide().reason == "time a plain step" or not g.decide().draft
    _plain(g)
    _plain(g)
    reasons = []
    for _ in range(3):                                   # the text got easy: 100 tokens/s
        d = g.decide()
        reasons.append(d.reason)
        _drafted(g, n=3, seconds=0.030)
    assert reasons == ["probe"] * 3
    assert g.rate_draft() == pytest.approx(100.0)        # the eight losing rounds are forgotten
    assert g.decide().reason == "drafting pays" and g._backoff == 2
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError):
            SpeculationGate(probe_rounds=bad)


def test_bad_gate_settings_are_refused():
    with pytest.raises(ValueError, match="window"):
        SpeculationGate(window=0)
    with pytest.raises(ValueError, match="max_skip"):
        SpeculationGate(probe_after=8, max_skip=4)
    with pytest.raises(ValueError, match="≥ 0"):
        SpeculationGate().observe(True, -1.0, 1)
    with pytest.raises(ValueError, match="fallback"):
        make_gate("yes", LookupDrafter(), None, FLAT, True)


# -- in the decode loop, with an injected clock --------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedTarget(TableTarget):
    """A table target whose forward costs ``step`` seconds of the fake clock at any width."""

    def __init__(self, table, clock, step=0.020, **kw):
        super().__init__(table, **kw)
        self.clock, self.step = clock, step

    def forward(self, ids, cache, **kw):
        self.clock.now += self.step
        return super().forward(ids, cache, **kw)


class TimedDrafter(RandomDrafter):
    def __init__(self, clock, cost, **kw):
        super().__init__(**kw)
        self.clock, self.cost = clock, cost

    def propose(self, *a):
        self.clock.now += self.cost
        return super().propose(*a)


@pytest.fixture
def uniform4():
    return [[F(1, 4)] * 4 for _ in range(4)]


def _run(table, draft, draft_cost, T=0.0, seed=0, n=60, fallback=None):
    clock = Clock()
    tgt = TimedTarget(table, clock)
    dr = TimedDrafter(clock, draft_cost, vocab_size=4, gamma=3, table=torch.tensor([[float(p) for p in r] for r in draft]))
    gate = fallback if fallback is not None else SpeculationGate(FLAT)
    return speculative_generate(tgt, dr, prompt_ids=[0, 1], temperature=T, max_new_tokens=n, seed=seed,
                                policy=FixedLength(3), fallback=gate, clock=clock), tgt


def test_a_dear_draft_is_skipped_and_the_rounds_say_so(table4, uniform4):
    tr, tgt = _run(table4, uniform4, draft_cost=0.200)   # a draft costs ten target steps
    skipped = [r for r in tr.rounds if r.skipped]
    assert len(skipped) > 0.7 * len(tr.rounds)
    for r in skipped:
        assert r.drafts == [] and r.ell == 0 and r.source == "none" and r.n_committed == 1 and not r.gate["draft"]
        assert r.t_draft == 0.0 and r.t_verify == pytest.approx(0.020)
    assert tr.meta["fallback"] is True and all(r.gate is not None for r in tr.rounds)
    assert drafted_share(tr) == pytest.approx(sum(bool(r.drafts) for r in tr.rounds) / len(tr.rounds))
    plain = plain_generate(tgt, prompt_ids=[0, 1], temperature=0.0, max_new_tokens=60)
    assert tr.output_ids == plain.output_ids                              # greedy: the same text
    back = Trace.from_json(tr.to_json())
    assert [r.skipped for r in back.rounds] == [r.skipped for r in tr.rounds]


def test_a_cheap_draft_keeps_drafting(table4):
    tr, _ = _run(table4, table4, draft_cost=0.001)       # drafts what the target would say: all accepted
    assert drafted_share(tr) > 0.9 and tau(tr) > 1


def test_skipping_every_round_is_plain_decoding_at_any_temperature(table4, uniform4):
    class Never(SpeculationGate):
        def decide(self):
            d = super().decide()
            d.draft = False
            return d

    for seed in range(5):
        tr, tgt = _run(table4, uniform4, 0.0, T=1.0, seed=seed, n=30, fallback=Never(FLAT))
        plain = plain_generate(tgt, prompt_ids=[0, 1], temperature=1.0, max_new_tokens=30, seed=seed)
        assert tr.output_ids == plain.output_ids and drafted_share(tr) == 0.0


def test_a_catch_up_is_timed_apart_and_left_out_of_the_drafted_rounds_judgement(table4):
    """A drafter that folds in skipped rounds' commits before its next draft (``catch_up``) has that time counted in
    the round's ``t_other`` and ``t_catch_up``; the gate judges the drafted round without it."""
    class Lazy(TimedDrafter):
        def begin(self, ctx):
            return dict(super().begin(ctx), waiting=0)

        def commit(self, state, tokens, features):
            super().commit(state, tokens, features)
            state["waiting"] += len(tokens)

        def catch_up(self, state):
            self.clock.now += 0.001 * state["waiting"]          # 1 ms a waiting position
            state["waiting"] = 0

    class Script(SpeculationGate):                              # skip rounds 1–4, draft the others
        def decide(self):
            d = super().decide()
            d.draft = not 1 <= self.n_seen <= 4
            return d

        def observe(self, drafted, seconds, *a, **k):
            self.seen.append((drafted, seconds))
            self.n_seen += 1

    gate = Script(FLAT)
    gate.n_seen, gate.seen = 0, []
    clock = Clock()
    dr = Lazy(clock, 0.005, vocab_size=4, gamma=3, table=torch.tensor([[float(p) for p in r] for r in table4]))
    tr = speculative_generate(TimedTarget(table4, clock), dr, prompt_ids=[0, 1], temperature=0.0, max_new_tokens=12,
                              policy=FixedLength(3), fallback=gate, clock=clock)
    r0, r5 = tr.rounds[0], tr.rounds[5]
    assert [r.skipped for r in tr.rounds[:6]] == [False, True, True, True, True, False]
    assert r0.t_catch_up == 0.0 and r0.t_other == pytest.approx(0.001 * (r0.accepted + 1))  # its own, after commit
    assert r5.t_catch_up == pytest.approx(0.004) and r5.t_other >= r5.t_catch_up   # the 4 skipped rounds' positions
    assert all(r.t_catch_up == 0.0 and r.t_other == 0.0 for r in tr.rounds[1:5])
    assert gate.seen[0] == (True, pytest.approx(0.005 + 0.020 + r0.t_other))
    assert gate.seen[5] == (True, pytest.approx(0.005 + 0.020 + r5.t_other - 0.004))   # without the catch-up
    back = Trace.from_json(tr.to_json())
    assert back.rounds[5].t_catch_up == pytest.approx(r5.t_catch_up)


@pytest.mark.parametrize("kind", ["lookup", "hybrid"])
def test_lookup_state_follows_skipped_rounds(table4, kind):
    """A skipped round hands the anchor to the lookup index (alone or in the hybrid), so later proposals see the
    whole context and greedy decoding stays plain decoding."""
    tgt = TableTarget(table4)
    dr = LookupDrafter(gamma=4, vocab_size=4)
    if kind == "hybrid":
        dr = HybridDrafter(RandomDrafter(4, gamma=3, seed=0), FLAT, neural_tau=1.5, neural_draft_s=0.0)
    rounds = generate_rounds(tgt, dr, prompt_ids=[0, 1, 2, 0, 1], temperature=0, max_new_tokens=40,
                             fallback=SpeculationGate(FLAT, warmup=1, refresh=2))
    for _ in rounds:
        pass
    tr = rounds.trace
    assert any(r.skipped for r in tr.rounds) and any(r.drafts for r in tr.rounds)
    assert tr.output_ids == plain_generate(tgt, prompt_ids=[0, 1, 2, 0, 1], temperature=0,
                                           max_new_tokens=40).output_ids


def test_the_default_is_on_for_the_default_policy_on_cpu(table4, monkeypatch):
    monkeypatch.setenv("DSPARK_FALLBACK", "1")
    tgt = TableTarget(table4)
    dr = RandomDrafter(4, gamma=3, seed=0)
    assert generate_rounds(tgt, dr, prompt_ids=[0], max_new_tokens=8).gate is not None
    assert generate_rounds(tgt, dr, prompt_ids=[0], max_new_tokens=8, policy=HardwareAware()).gate is None
    assert generate_rounds(tgt, dr, prompt_ids=[0], max_new_tokens=8, fallback=False).gate is None
    assert generate_rounds(tgt, dr, prompt_ids=[0], max_new_tokens=8, policy=FixedLength(2),
                           fallback=True).gate is not None
    assert generate_rounds(tgt, None, prompt_ids=[0], max_new_tokens=8, fallback=True).gate is None
    monkeypatch.setenv("DSPARK_FALLBACK", "0")
    assert generate_rounds(tgt, dr, prompt_ids=[0], max_new_tokens=8).gate is None        # switched off
    assert generate_rounds(tgt, dr, prompt_ids=[0], max_new_tokens=8, fallback=True).gate is not None
    tgt.device = torch.device("meta")                      # not a CPU: off by default
    assert make_gate(None, dr, tgt, FLAT, True) is None


# -- the exact law, for every fixed pattern of draft / skip decisions ----------------------------------
def _law(table, draft, policy, skip, gamma=2, n_tokens=4, stop_ids=()):
    """Round after committed output ``seq`` drafts iff not skip(seq); a skipped round drafts nothing (γ = 0)."""
    dr = RandomDrafter(4, gamma=gamma, seed=3)
    conf = lambda s: dr.confidence_after(s[-1])                                     # noqa: E731
    dist = lambda s: draft[s[-1]]                                                  # noqa: E731
    round_fn = lambda seq: (dist, conf, 0 if skip(seq) else gamma)                 # noqa: E731
    return exact_output_distribution(table, dist, conf, policy, gamma, n_tokens, table[2], stop_ids=stop_ids,
                                     round_fn=round_fn)


@pytest.mark.parametrize("stop_ids", [(), (3,)], ids=["no-stop", "stop-d"])
@pytest.mark.parametrize("policy", [FixedLength(2), HardwareAware()], ids=lambda p: p.name)
def test_every_pattern_by_position_is_lossless(table4, draft4, policy, stop_ids):
    want = target_output_distribution(table4, table4[2], n_tokens=4, stop_ids=stop_ids)
    for bits in itertools.product((False, True), repeat=3):                       # skip at output length 1, 2, 3?
        got = _law(table4, draft4, policy, lambda seq: bits[len(seq) - 1], stop_ids=stop_ids)
        assert sum(got.values()) == 1 and got == want, bits


def test_every_pattern_by_past_tokens_is_lossless(table4, draft4):
    want = target_output_distribution(table4, table4[2], n_tokens=4)
    for mask in range(16):                                                         # skip after these tokens
        got = _law(table4, draft4, FixedLength(2), lambda seq: bool(mask >> seq[-1] & 1))
        assert got == want, mask


def test_skip_hands_the_anchor_to_the_lookup_index():
    """skip + commit leave the index as propose + commit would: the committed context, in order."""
    from dspark_viz.protocol import Context

    for dr in (LookupDrafter(gamma=3, vocab_size=4),
               HybridDrafter(RandomDrafter(4, gamma=3, seed=0), FLAT, neural_tau=1.5, neural_draft_s=0.0)):
        a, b = dr.begin(Context([0, 1, 2], None)), dr.begin(Context([0, 1, 2], None))
        dr.skip(a, 3, 3)
        dr.commit(a, [3], None)
        dr.propose(b, 3, 3, 0.0, torch.Generator().manual_seed(0))
        dr.commit(b, [3], None)
        ids = lambda st: (st["lookup"] if isinstance(st, dict) else st).ids          # noqa: E731
        assert ids(a) == ids(b) == [0, 1, 2, 3]
