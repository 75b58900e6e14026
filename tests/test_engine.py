"""The live engine (serving/engine.py): many requests in one verification forward, joining and leaving between
rounds; each request's greedy text is its plain decoding's, alone or beside others, cancelled neighbours and
failures leave the rest going, bad input is refused."""
from __future__ import annotations

import threading

import pytest
import torch

from dspark_viz.decode import plain_generate
from dspark_viz.drafters.config import DrafterConfig
from dspark_viz.drafters.neural import build_model, init_from_target
from dspark_viz.drafters.neural_drafter import NeuralDrafter
from dspark_viz.model.toy import tiny_llama_target
from dspark_viz.serving.engine import LiveEngine
from dspark_viz.train.vocab import build_draft_vocab


@pytest.fixture(scope="module")
def toy():
    t = tiny_llama_target(vocab_size=48, hidden_size=64, n_layers=4)
    g = torch.Generator().manual_seed(0)
    seqs = [{"ids": torch.randint(0, 48, (30,), generator=g), "prompt_len": 4, "n": 30} for _ in range(4)]
    cfg = DrafterConfig.for_target(t, "dspark", draft_vocab=32, rank=8, gamma=5)
    torch.manual_seed(0)
    m = build_model(cfg, t, build_draft_vocab(seqs, 32, set(t.stop_ids), t.vocab_size))
    init_from_target(m, t)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    prompts = [torch.randint(0, 48, (n,), generator=g).tolist() for n in (5, 9, 3, 12, 7)]
    return t, NeuralDrafter(m, "dspark", t), prompts


def plain(t, p, n):
    return plain_generate(t, prompt_ids=p, max_new_tokens=n, temperature=0).output_ids


def test_requests_together_decode_as_each_alone(toy):
    t, dr, prompts = toy
    eng = LiveEngine(t, dr, max_live=4)
    jobs = [eng.submit(prompt_ids=p, max_new_tokens=20 + 3 * i) for i, p in enumerate(prompts)]   # 5 > 4 slots
    eng.run_until_idle()
    for i, (j, p) in enumerate(zip(jobs, prompts)):
        assert j.result().output_ids == plain(t, p, 20 + 3 * i)
    assert max(r.R for r in eng.history) == 4 and eng.queued == 0 and sorted(eng.free) == [0, 1, 2, 3]
    assert any(r.B > r.R for r in eng.history)                       # drafts were verified, several per forward
    assert eng.throughput() > 0


def test_a_request_joins_between_rounds_and_a_cancelled_one_leaves(toy):
    t, dr, prompts = toy
    eng = LiveEngine(t, dr, max_live=3)
    a = eng.submit(prompt_ids=prompts[0], max_new_tokens=30)
    gone = eng.submit(prompt_ids=prompts[1], max_new_tokens=30)
    for _ in range(2):
        eng.step()
    b = eng.submit(prompt_ids=prompts[2], max_new_tokens=16)
    eng.step()
    eng.cancel(gone)
    eng.run_until_idle()
    assert a.result().output_ids == plain(t, prompts[0], 30)
    assert b.result().output_ids == plain(t, prompts[2], 16)
    assert gone.done.is_set() and gone.error == "cancelled"
    with pytest.raises(RuntimeError, match="cancelled"):
        gone.result()
    assert not eng.live and sorted(eng.free) == [0, 1, 2]


def test_plain_decoding_in_the_engine(toy):
    t, _, prompts = toy
    eng = LiveEngine(t, None, max_live=2)
    jobs = [eng.submit(prompt_ids=p, max_new_tokens=12) for p in prompts[:3]]
    eng.run_until_idle()
    assert [j.result().output_ids for j in jobs] == [plain(t, p, 12) for p in prompts[:3]]
    assert all(r.B == r.R for r in eng.history)


def test_the_engine_thread_serves_requests_from_other_threads(toy):
    t, dr, prompts = toy
    eng = LiveEngine(t, dr, max_live=4).start()
    got = {}

    def user(i):
        j = eng.submit(prompt_ids=prompts[i], max_new_tokens=18)
        got[i] = [r.n_committed for r in j.rounds(timeout=60)], j.result(timeout=60).output_ids

    users = [threading.Thread(target=user, args=(i,)) for i in range(3)]
    for u in users:
        u.start()
    for u in users:
        u.join(60)
    eng.stop()
    for i in range(3):
        streamed, ids = got[i]
        assert ids == plain(t, prompts[i], 18) and 1 + sum(streamed) == len(ids)


def test_a_failing_round_ends_its_requests_not_the_engine(toy, monkeypatch):
    t, dr, prompts = toy
    eng = LiveEngine(t, dr, max_live=2)
    j = eng.submit(prompt_ids=prompts[0], max_new_tokens=10)
    eng.step()
    monkeypatch.setattr(dr, "propose", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("drafter broke")))
    eng.step()
    assert j.done.is_set() and "drafter broke" in j.error
    monkeypatch.undo()
    k = eng.submit(prompt_ids=prompts[1], max_new_tokens=10)
    eng.run_until_idle()
    assert k.result().output_ids == plain(t, prompts[1], 10)


def test_bad_requests_are_refused(toy):
    t, dr, _ = toy
    eng = LiveEngine(t, dr)
    for kw, msg in ((dict(prompt_ids=[]), "empty"), (dict(prompt_ids=[1] * t.max_context), "context"),
                    (dict(prompt_ids=[1, 2], max_new_tokens=0), "max_new_tokens"), ({}, "give a prompt")):
        with pytest.raises(ValueError, match=msg):
            eng.submit(**kw)
    with pytest.raises(ValueError, match="max_live"):
        LiveEngine(t, dr, max_live=0)
    with pytest.raises(ValueError, match="temperature"):
        LiveEngine(t, dr, temperature=-1)
    assert not eng.busy()


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_four_requests_on_the_embedded_target_equal_their_plain_decoding(dtype):
    """The shipped DSpark-Markov on the embedded target, four requests submitted together at T = 0, at fp32 and
    bf16: the exact engine's rows have the bits of each request's own forward."""
    from conftest import embedded_target

    from dspark_viz.drafters import load_drafter
    t = embedded_target(dtype, tune_paths=False)
    dr = load_drafter("dspark", t)
    prompts = ["What is 17 + 25?", "Write a haiku about rain.", "Name three primary colours.",
               "Explain what a prime number is in one sentence."]
    eng = LiveEngine(t, dr)
    assert eng.exact or dtype == "fp32", "bf16 greedy equality needs the exact engine (kernel + fused layers)"
    jobs = [eng.submit(p, max_new_tokens=40) for p in prompts]
    eng.run_until_idle()
    for j, p in zip(jobs, prompts):
        assert j.result().output_ids == plain_generate(t, p, max_new_tokens=40, temperature=0).output_ids, p
    assert max(r.R for r in eng.history) == 4


def test_the_engine_bench_measures_both_methods_at_each_load(toy):
    from dspark_viz.serving.engine_bench import engine_bench, summarize
    t, dr, _ = toy
    rows = engine_bench(t, dr, ["abcab", "cabba", "bacca"], Rs=(1, 3), max_new_tokens=10, repeats=2, log=lambda s: None)
    assert {(r["R"], r["method"]) for r in rows} == {(R, m) for R in (1, 3) for m in ("plain", dr.name)}
    assert all(r["max_R"] == r["R"] and r["tokens"] > 0 and r["throughput"] > 0 for r in rows)
    table = summarize(rows, dr.name, {1: 10.0, 3: 20.0})
    assert [x["R"] for x in table] == [1, 3] and table[0]["x_R1"] == 1.0 and table[1]["sim_throughput"] == 20.0
    with pytest.raises(ValueError, match="R must"):
        engine_bench(t, dr, ["ab"], Rs=(0,))


def test_serve_bench_refuses_bad_loads(capsys):
    from dspark_viz.cli import main
    for bad in ("0,2", "x", "65"):
        assert main(["serve-bench", "--Rs", bad]) == 2
        assert "--Rs" in capsys.readouterr().err


def test_a_round_where_no_draft_would_be_verified_drafts_nothing(toy):
    """On a profile where one more token never pays, Algorithm 1 verifies nothing whatever the confidences, so
    no request drafts (Policy.verifies_nothing); the text is still plain decoding's."""
    import numpy as np

    from dspark_viz.cost import SPSProfile
    from dspark_viz.scheduler import HardwareAware

    t, dr, prompts = toy
    steep = SPSProfile("steep", [1, 2, 4, 8, 16], [100.0, 40.0, 15.0, 6.0, 2.0])
    hw = HardwareAware()
    rng = np.random.default_rng(0)
    for R in (1, 2, 3, 5):
        assert hw.verifies_nothing(R, steep)
        conf = rng.uniform(0, 1, (R, 5)).tolist()
        assert hw.choose(conf, steep).lengths == [0] * R           # what the shortcut assumes
        assert hw.choose([[1.0] * 5] * R, steep).lengths == [0] * R
    flat = SPSProfile("flat", [1, 64], [100.0, 99.0])
    assert not hw.verifies_nothing(4, flat) and hw.choose([[1.0] * 5] * 4, flat).lengths != [0] * 4
    assert not HardwareAware(floor_lag=1).verifies_nothing(4, steep)
    assert not HardwareAware(early_stop=False).verifies_nothing(4, steep)

    eng = LiveEngine(t, dr, max_live=3, sps=steep)
    jobs = [eng.submit(prompt_ids=p, max_new_tokens=10) for p in prompts[:3]]
    eng.run_until_idle()
    for j, p in zip(jobs, prompts):
        tr = j.result()
        assert tr.output_ids == plain(t, p, 10)
        assert all(r.skipped and not r.drafts for r in tr.rounds)
        assert j.loads[0] == 3


def test_each_request_keeps_its_own_temperature(toy):
    """Requests at T = 0 and T = 1 in one engine: the greedy one is its plain decoding; the sampled one draws
    from its own generator (the same seed alone and beside the greedy one gives the same law; here: it runs)."""
    t, dr, prompts = toy
    eng = LiveEngine(t, dr, max_live=2, temperature=1.0)
    greedy = eng.submit(prompt_ids=prompts[0], max_new_tokens=12, temperature=0.0)
    hot = eng.submit(prompt_ids=prompts[1], max_new_tokens=12, seed=5)
    eng.run_until_idle()
    assert greedy.result().output_ids == plain(t, prompts[0], 12)
    assert greedy.trace.meta["temperature"] == 0.0 and hot.trace.meta["temperature"] == 1.0
    assert hot.result().n_generated == 12 or hot.trace.rounds[-1].stopped
    assert greedy.engine_throughput() > 0 and set(greedy.loads) <= {1, 2}
    with pytest.raises(ValueError):
        eng.submit(prompt_ids=prompts[0], temperature=-0.5)


def test_the_engine_profile_times_the_engines_own_forward(toy):
    """``measure_engine_profile``: B rows as blocks of ≤ 8 from ⌈B/8⌉ sequences in one ragged call, B = 1…bmax,
    positive steps/s that the scheduler and ``serve-bench --profile`` can use; a target the engine does not cover is
    refused."""
    from dspark_viz.serving.engine_bench import run_once
    from dspark_viz.serving.measure import default_batches, engine_blocks, measure_engine_profile

    assert engine_blocks(20, 8) == [8, 8, 4] and engine_blocks(16, 8) == [8, 8] and engine_blocks(3, 8) == [3]
    t, dr, prompts = toy
    prof = measure_engine_profile(t, bmax=20, repeats=1, ctx_len=16, text="abcabba")
    assert prof.batch == default_batches(20) and all(s > 0 for s in prof.sps)
    assert prof.meta["forward"] == "engine" and prof.meta["block"] == 8 and prof.name.startswith("engine-")
    got = run_once(t, dr, ["abcab", "cabba"], 6, 0.0, 0, sps=prof)
    assert got["max_R"] == 2 and got["tokens"] > 0
    with pytest.raises(ValueError, match="does not cover"):
        measure_engine_profile(object())
    with pytest.raises(ValueError, match="block"):
        measure_engine_profile(t, block=0)


def test_a_request_without_diagnostics_drafts_the_same_tokens(toy):
    """``submit(diagnostics=False)``: the request's drafts skip the chart-only per-slot top-k (no ``diag`` in its
    rounds) and are otherwise the same drafts, so its text and every round's verdicts equal a charted twin's."""
    t, dr, prompts = toy

    def alone(**kw):                   # each in an engine of its own: Algorithm 1 allocates ℓ across a round
        eng = LiveEngine(t, dr, temperature=1.0, max_live=1)
        job = eng.submit(prompt_ids=prompts[1], max_new_tokens=16, seed=3, **kw)
        eng.run_until_idle()
        return job.result()

    ta, tb = alone(), alone(diagnostics=False)
    assert ta.output_ids == tb.output_ids
    assert [(r.ell, r.accepted) for r in ta.rounds] == [(r.ell, r.accepted) for r in tb.rounds]
    drafted_a = [d for r in ta.rounds for d in r.drafts]
    drafted_b = [d for r in tb.rounds for d in r.drafts]
    assert drafted_a and all(d.diag for d in drafted_a) and not any(d.diag for d in drafted_b)
    assert [d.token for d in drafted_a] == [d.token for d in drafted_b]
