"""SPS profiles, profiling against a fake target, and the serving simulation."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from dspark_viz import cost
from dspark_viz.cost import SPSProfile, gpu_like, jagged, named_profile
from dspark_viz.scheduler import AsyncGlobal, FixedLength, HardwareAware, StaticThreshold
from dspark_viz.serving import simulate as sim
from dspark_viz.serving.measure import default_batches, measure_profile
from dspark_viz.serving.simulate import headline, simulate, sweep, threshold_sweep
from dspark_viz.trace import DraftToken, Round, Trace


# -- profiles --------------------------------------------------------------------------------------------
def test_profile_interpolates_step_time():
    p = SPSProfile("t", [1, 3, 5], [1.0, 0.5, 0.25])                     # step times 1, 2, 4
    assert p.step_time(2) == pytest.approx(1.5) and p(2) == pytest.approx(1 / 1.5)
    assert p.step_time(4) == pytest.approx(3.0)
    assert p.step_time(0.5) == pytest.approx(1.0)                         # constant below the table
    assert p.step_time(7) == pytest.approx(6.0)                           # slope of the last two points
    np.testing.assert_allclose(p(np.array([1, 3, 5])), [1.0, 0.5, 0.25])
    assert SPSProfile("one", [4], [2.0]).step_time(100) == pytest.approx(0.5)


@pytest.mark.parametrize("batch,sps", [([], []), ([1, 2], [1.0]), ([2, 1], [1.0, 1.0]),
                                       ([1, 2], [1.0, -1.0]), ([0, 2], [1.0, 1.0]), ([1, 2], [1.0, math.inf])])
def test_profile_validation(batch, sps):
    with pytest.raises(ValueError):
        SPSProfile("bad", batch, sps)


def test_profile_save_load_and_bad_files(tmp_path):
    p = SPSProfile("t", [1, 2, 8], [100.0, 99.0, 80.0], device="cpu", meta={"ctx_len": 256})
    f = tmp_path / "sub" / "p.json"
    p.save(f)
    q = SPSProfile.load(f)
    assert q == p and json.loads(f.read_text())["kind"] == "sps_profile"
    for bad in ("{oops", "[]", '{"kind": "sts", "name": "x", "batch": [1], "sps": [1]}',
                '{"name": "x", "batch": [1]}', '{"name": "x", "batch": [1, 2], "sps": [1]}',
                '{"name": "x", "batch": 3, "sps": 4}'):
        f.write_text(bad)
        with pytest.raises(ValueError, match="SPS profile"):
            SPSProfile.load(f)


def test_synthetic_profiles():
    g = gpu_like()
    assert g.step_time(64) / g.step_time(1) < 1.3                         # flat while weights-bound
    assert g.step_time(512) / g.step_time(256) == pytest.approx(2.0, rel=0.1)   # ~linear beyond the knee
    b = np.arange(1, 2049)
    assert np.all(np.diff(g.step_time(b)) > 0)
    assert np.all(np.diff(b * g(b)) > 0)                                  # tokens/s keeps rising, saturating
    j = jagged()
    assert j.step_time(33) == j.step_time(48) < j.step_time(49) == j.step_time(64)
    assert j.step_time(64) < j.step_time(65) == pytest.approx(g.step_time(96))
    assert np.all(j.step_time(b) >= g.step_time(b) - 1e-15)               # padding never helps
    assert j.step_time(1500) > j.step_time(1000)                          # extrapolation keeps rising
    assert named_profile("gpu-like").name == "gpu-like" and named_profile("jagged").name == "jagged"
    with pytest.raises(ValueError, match="gpu-like"):
        named_profile("tpu")


def test_named_cpu_profile(tmp_path, monkeypatch):
    monkeypatch.setattr(cost, "PROFILE_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="dspark-viz profile"):
        named_profile("cpu")
    SPSProfile("measured", [1, 2], [50.0, 40.0], device="cpu").save(tmp_path / "cpu.json")
    assert named_profile("cpu").sps == [50.0, 40.0]
    assert named_profile(str(tmp_path / "cpu.json")).name == "measured"


def test_profile_for_picks_the_curve_of_the_targets_setup(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import torch

    monkeypatch.setattr(cost, "PROFILE_DIR", tmp_path)
    kernel, plain = SimpleNamespace(matmul="skinny-kernel"), SimpleNamespace(matmul="stock")
    fp32 = SimpleNamespace(device=torch.device("cpu"), dtype=torch.float32, paths=kernel)
    stock = SimpleNamespace(device=torch.device("cpu"), dtype=torch.float32, paths=plain)
    bf16 = SimpleNamespace(device=torch.device("cpu"), dtype=torch.bfloat16, paths=kernel)
    gpu = SimpleNamespace(device=torch.device("cuda", 0), dtype=torch.bfloat16, paths=plain)
    assert cost.profile_for(fp32).name == "gpu-like"                    # nothing measured yet
    SPSProfile("kernel", [1, 2], [50.0, 49.0], device="cpu").save(tmp_path / "cpu.json")
    assert cost.profile_for(bf16).name == "kernel"                      # falls back to cpu.json
    SPSProfile("bf16", [1, 2], [40.0, 30.0], device="cpu").save(tmp_path / "cpu-bf16.json")
    SPSProfile("stock", [1, 2], [50.0, 30.0], device="cpu").save(tmp_path / "cpu-stock.json")
    assert [cost.profile_for(t).name for t in (fp32, stock, bf16, gpu)] == ["kernel", "stock", "bf16", "gpu-like"]
    assert cost.cpu_profile_file("bf16").name == "cpu-bf16.json"
    assert cost.cpu_profile_file("torch.bfloat16", "stock").name == "cpu-bf16-stock.json"


def test_default_batches():
    assert default_batches(64) == [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64]
    assert default_batches(5) == [1, 2, 3, 4, 5] and default_batches(100)[-1] == 100


class FakeTarget:
    """Implements only what measure_profile may use; checks the cache discipline."""
    name = "fake"
    device = "cpu"

    def __init__(self, crop_returns=False):
        self.calls, self.crop_returns = [], crop_returns

    def encode(self, text):
        return [ord(ch) % 50 for ch in text]

    def new_cache(self):
        return {"len": 0}

    def forward(self, ids, cache):
        assert ids.dtype == torch.long and ids.dim() == 2 and ids.shape[0] == 1
        self.calls.append((cache["len"], ids.shape[1]))
        cache["len"] += ids.shape[1]
        return (torch.zeros(1, ids.shape[1], 50),)

    def crop(self, cache, length):
        if self.crop_returns:
            return {"len": length}
        cache["len"] = length


@pytest.mark.parametrize("crop_returns", [False, True])
def test_measure_profile_on_fake_target(crop_returns):
    t = FakeTarget(crop_returns)
    p = measure_profile(t, bmax=16, repeats=3, ctx_len=20)
    assert p.batch == default_batches(16) and len(p.sps) == len(p.batch)
    assert all(s > 0 for s in p.sps) and p.meta["ctx_len"] == 20 and p.device == "cpu"
    assert t.calls[0] == (0, 20)                                           # prefill
    assert all(start == 20 for start, _ in t.calls[1:])                   # every block over ctx_len
    assert [n for _, n in t.calls[1:]] == [b for _ in range(4) for b in p.batch]   # warmup + repeats, round-robin
    assert np.all(np.diff(p.step_time(np.array(p.batch))[1:]) >= 0)           # monotone from B = 2 by default
    assert len(p.meta["raw_sps"]) == len(p.batch)
    p2 = measure_profile(FakeTarget(), batches=[3, 1], repeats=1, ctx_len=4, monotone=False)
    assert p2.batch == [1, 3] and p2.sps == p2.meta["raw_sps"]
    t3 = FakeTarget()
    t3.max_context = 30
    with pytest.raises(ValueError, match="context"):
        measure_profile(t3, bmax=16, ctx_len=20)


# -- simulation -------------------------------------------------------------------------------------------
def make_trace(rounds, domain="math", gamma=4, cal=False):
    """rounds: list of (confidences, m); recorded with full-block verification ℓ = γ."""
    rs = []
    for i, (conf, m) in enumerate(rounds):
        ds = [DraftToken(k=k + 1, token=k, text="t", p_draft=0.5, p_target=0.5,
                         confidence=None if conf is None else conf[k],
                         confidence_cal=(conf[k] * 0.9 if cal else None) if conf is not None else None,
                         survival=None,
                         status="accepted" if k < m else "rejected" if k == m else "not_reached")
              for k in range(gamma)]
        rs.append(Round(index=i, anchor=0, anchor_pos=i, drafts=ds, ell=gamma, accepted=m, bonus=1,
                        bonus_text="b", bonus_source="target"))
    return Trace(meta={"domain": domain}, prompt_ids=[1], first_token=0, rounds=rs)


def traces_fixture(n=30, seed=0):
    """Confidences that actually predict acceptance: m ~ sequential Bernoulli(c_k)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(6):
        rounds = []
        for _ in range(n):
            c = rng.uniform(0.3, 1.0, 4) if t % 2 == 0 else rng.uniform(0.05, 0.8, 4)
            ok = rng.random(4) < c
            rounds.append((c.tolist(), int(4 if ok.all() else np.argmin(ok))))
        out.append(make_trace(rounds, domain="code" if t % 2 == 0 else "chat"))
    return out


def test_simulate_fixed_lengths_exact():
    tr = [make_trace([([0.9] * 4, 2)] * 10)]
    prof = SPSProfile("flat", [1, 1000], [10.0, 10.0])
    s1 = simulate(tr, FixedLength(1), prof, R=3, n_rounds=7)
    assert s1.tau == 2.0 and s1.mean_budget == 1.0 and s1.mean_batch == 6
    assert s1.throughput == pytest.approx(60.0) and s1.per_user == pytest.approx(20.0)
    s4 = simulate(tr, FixedLength(4), prof, R=3, n_rounds=7, draft_time=0.1)
    assert s4.tau == 3.0 and s4.mean_budget == 4.0                        # min(m, ℓ) + 1
    assert s4.total_time == pytest.approx(7 * (0.1 + 0.1))
    assert s4.total_tokens == 3 * 7 * 3


def test_simulate_sane_on_recorded_traces():
    trs = traces_fixture()
    g = gpu_like()
    f1 = simulate(trs, FixedLength(1), g, R=8, n_rounds=40)
    assert 1.0 <= f1.tau <= 2.0 and f1.mean_budget == 1.0
    assert f1.per_user == pytest.approx(f1.throughput / 8)
    ha = [simulate(trs, HardwareAware(), g, R=R, n_rounds=30) for R in (1, 64, 256)]
    assert ha[0].mean_budget > ha[1].mean_budget > ha[2].mean_budget      # budget falls with load
    assert ha[0].mean_budget > 3.5                                        # nearly flat SPS at B ≤ 5
    assert all(1.0 <= s.tau <= 5.0 for s in ha)
    again = simulate(trs, HardwareAware(), g, R=64, n_rounds=30)
    assert again.throughput == ha[1].throughput                          # deterministic per seed
    asy = simulate(trs, AsyncGlobal(), g, R=64, n_rounds=30)
    assert asy.throughput > 0 and 0 < asy.mean_budget <= 4


def test_simulate_needs_confidences_for_confidence_policies():
    tr = [make_trace([(None, 1)] * 5)]
    assert simulate(tr, FixedLength(2), gpu_like(), R=2, n_rounds=3).tau == 2.0
    assert simulate(tr, FixedLength(9), gpu_like(), R=2, n_rounds=3).mean_budget == 4.0   # capped at γ
    with pytest.raises(ValueError, match="confidences"):
        simulate(tr, HardwareAware(), gpu_like(), R=2, n_rounds=3)


def test_simulate_prefers_calibrated_confidence():
    tr = [make_trace([([0.95, 0.95, 0.95, 0.95], 4)] * 3, cal=True)]
    # raw a_1 = .95 passes θ = .9, calibrated .855 does not
    assert simulate(tr, StaticThreshold(0.9), gpu_like(), R=1, n_rounds=2).mean_budget == 0.0


def test_sweep_and_headline():
    trs = traces_fixture()
    pols = [FixedLength(1), FixedLength(2), FixedLength(4), "hardware-aware"]
    df = sweep(trs, pols, gpu_like(), Rs=(1, 4, 16, 32, 64, 256), n_rounds=20)
    assert list(df.columns) == ["policy", "R", "throughput", "per_user", "mean_budget", "tau", "mean_batch"]
    assert len(df) == 4 * 6 and set(df.policy) == {"fixed-1", "fixed-2", "fixed-4", "hardware-aware"}
    f1 = df[df.policy == "fixed-1"].sort_values("R")
    assert np.all(np.diff(f1.throughput) > 0) and np.all(np.diff(f1.per_user) < 0)
    h = headline(df)
    for key in ("throughput_gain_at_sla", "per_user_speedup_at_matched_throughput", "min_ratio_vs_best_fixed"):
        assert math.isfinite(h[key]), key
    assert h["throughput_gain_at_sla"] > 1.0 and h["per_user_speedup_at_matched_throughput"] > 1.0
    assert 0.8 < h["min_ratio_vs_best_fixed"] <= 1.2
    assert h["sla_per_user"] == pytest.approx(float(f1[f1.R == 32].per_user.iloc[0]))
    with pytest.raises(ValueError, match="not in the sweep"):
        headline(df, policy="async-global")


def test_oracle_reference_verifies_only_what_is_accepted():
    m = [2, 0, 4]
    tr = [make_trace([([0.5] * 4, k)] * 6) for k in m]
    flat = SPSProfile("flat", [1, 1000], [10.0, 10.0])
    orc = sim.OracleReference()
    rounds = [sim._replay(t)[0] for t in tr]
    assert orc.lengths(rounds, flat) == m                                 # flat cost: every accepted draft
    assert orc.lengths(rounds, jagged()) == m                             # B = 9 lies inside one bucket
    cpu_like = SPSProfile("slow-one", [1, 2, 8], [10.0, 20.0, 20.0])      # a 1-token step is the slow one
    lone = [sim._replay(make_trace([([0.5] * 4, 0)]))[0]]
    assert orc.lengths(lone, cpu_like) == [1]                             # pads with a draft it knows fails
    steep = SPSProfile("steep", [1, 2, 3], [10.0, 1.0, 0.1])              # any extra token costs more than it gives
    assert orc.lengths(rounds[:1], steep) == [0]
    s = simulate(tr, orc, flat, R=3, n_rounds=6, seed=1)
    assert s.policy == "oracle" and s.mean_budget == pytest.approx(s.tau - 1)   # no verified draft wasted


@pytest.mark.parametrize("profile", [gpu_like(), jagged(), SPSProfile("slow-one", [1, 2, 8, 64], [10.0, 20.0, 20.0, 5.0])])
def test_oracle_reference_bounds_every_policy(profile):
    trs = traces_fixture()
    pols = [f"fixed-{k}" for k in range(1, 5)] + ["hardware-aware", "async-global", "oracle"]
    df = sweep(trs, pols, profile, Rs=(1, 4, 32, 128), n_rounds=25)
    for R, d in df.groupby("R"):
        best = d[d.policy != "oracle"].throughput.max()
        assert float(d[d.policy == "oracle"].throughput.iloc[0]) >= best * (1 - 1e-9), R
    h = headline(df, policy="oracle")
    assert h["throughput_gain_at_sla"] >= headline(df)["throughput_gain_at_sla"]


def test_threshold_sweep():
    trs = traces_fixture()
    df = threshold_sweep(trs, thetas=[0.0, 0.3, 0.6, 0.9, 1.01])
    assert set(df.domain) == {"code", "chat", "all"}
    for dom, d in df.groupby("domain"):
        d = d.sort_values("theta")
        assert np.all(np.diff(d.verified) <= 0) and np.all(np.diff(d.accepted) <= 0)
        assert d.verified.iloc[-1] == 0 and np.isnan(d.accept_rate.iloc[-1])
    all0 = df[(df.domain == "all") & (df.theta == 0.0)].iloc[0]
    total_m = sum(r.accepted for t in trs for r in t.rounds)
    assert all0.accepted == total_m and all0.verified == 4 * all0.n_rounds
    code = df[(df.domain == "code") & (df.theta == 0.0)].accept_rate.iloc[0]
    chat = df[(df.domain == "chat") & (df.theta == 0.0)].accept_rate.iloc[0]
    assert code > chat


def test_monotone_steps_keeps_the_one_token_path_apart():
    """Running max from B = 2: one token keeps its own (stock-path) time even when two tokens are cheaper;
    a curve that does not start at B = 1 gets the plain running max."""
    from dspark_viz.serving.measure import monotone_steps

    got = monotone_steps([1, 2, 3, 4, 5], [0.058, 0.039, 0.049, 0.043, 0.048])
    assert got.tolist() == [0.058, 0.039, 0.049, 0.049, 0.049]
    assert monotone_steps([2, 3, 4], [0.05, 0.04, 0.06]).tolist() == [0.05, 0.05, 0.06]
    assert monotone_steps([1], [0.07]).tolist() == [0.07]
