"""Losslessness: exact enumeration on a toy target, chi-square through the real loop, greedy equality
with transformers' generate on the embedded SmolLM2 target.

Legend: V vocabulary, γ block size, ℓ verified length, m accepted drafts, N samples.
"""
from __future__ import annotations

from collections import Counter
from fractions import Fraction as F

import pytest
import torch
from conftest import random_fraction_table
from scipy.stats import chisquare

from dspark_viz.decode import generate_rounds, plain_generate, speculative_generate
from dspark_viz.drafters import LookupDrafter, RandomDrafter
from dspark_viz.exact import exact_output_distribution, target_output_distribution, total_variation
from dspark_viz.model.toy import TableTarget
from dspark_viz.sampling import probs_from_logits, sample, verify_block, verify_greedy, verify_outcomes
from dspark_viz.scheduler import FixedLength, HardwareAware, Policy, StaticThreshold

ALPHA = 1e-3


def _tensor(rows) -> torch.Tensor:
    return torch.tensor([[float(p) for p in r] for r in rows])


def chi2_pvalue(counts: Counter, probs: dict) -> float:
    """Chi-square goodness of fit; cells with expected count < 5 are pooled into one bin. An observed
    outcome the law gives probability 0 fails outright (p = 0)."""
    n = sum(counts.values())
    if any(probs.get(k, 0) == 0 for k in counts):
        return 0.0
    obs, exp, small_o, small_e = [], [], 0, 0.0
    for k, p in probs.items():
        e = n * float(p)
        if e < 5:
            small_o, small_e = small_o + counts.get(k, 0), small_e + e
        else:
            obs.append(counts.get(k, 0))
            exp.append(e)
    if small_e > 0:
        obs.append(small_o)
        exp.append(small_e)
    exp = [e * n / sum(exp) for e in exp]          # float rounding only; the law sums to 1 exactly
    return float(chisquare(obs, exp).pvalue)


# -- verify_outcomes: the exact law of verify_block ----------------------------------------------------
def test_verify_outcomes_by_hand():
    p_d = [[F(1, 2), F(1, 2), F(0)], [F(1, 3), F(1, 3), F(1, 3)]]
    p_t = [[F(1, 4), F(1, 4), F(1, 2)], [F(1), F(0), F(0)], [F(0), F(0), F(1)]]
    outs = verify_outcomes([0, 1], p_d, p_t)
    # slot 1: accept 0 w.p. (1/4)/(1/2) = 1/2, else residual ∝ max(0, p_t − p_d) = (0, 0, 1/2) → token 2
    # slot 2: p_t(1) = 0 → always rejected; residual ∝ (2/3, 0, 0) → token 0
    assert sorted(outs, key=lambda o: (o[1], o[2])) == [(F(1, 2), 0, 2, "residual"), (F(1, 2), 1, 0, "residual")]
    # full acceptance: the bonus comes from p_target at slot ℓ+1
    outs = verify_outcomes([0], [[F(1), F(0), F(0)]], [[F(1), F(0), F(0)], [F(0), F(1, 4), F(3, 4)]])
    assert outs == [(F(1, 4), 1, 1, "target"), (F(3, 4), 1, 2, "target")]
    # an accepted stop token ends the round without a bonus; ℓ = 0 is a plain target sample
    outs = verify_outcomes([2], [[F(0), F(0), F(1)]], [[F(0), F(1, 2), F(1, 2)], [F(1), F(0), F(0)]], stop_ids={2})
    assert outs == [(F(1, 2), 0, 1, "residual"), (F(1, 2), 1, None, "none")]
    assert verify_outcomes([], None, [[F(1, 3), F(2, 3)]]) == [(F(1, 3), 0, 0, "target"), (F(2, 3), 0, 1, "target")]
    with pytest.raises(ValueError, match="p_draft = 0"):
        verify_outcomes([2], [[F(1), F(0), F(0)]], p_t[:2])


def test_verify_outcomes_agrees_with_verify_block():
    g = torch.Generator().manual_seed(0)
    p_d = [[F(1, 4), F(1, 2), F(1, 4), F(0)], [F(1, 2), F(1, 6), F(1, 6), F(1, 6)], [F(1, 3), F(1, 3), F(0), F(1, 3)]]
    p_t = [[F(1, 2), F(1, 4), F(1, 8), F(1, 8)], [F(0), F(1, 3), F(1, 3), F(1, 3)],
           [F(3, 5), F(1, 5), F(1, 10), F(1, 10)], [F(1, 4), F(1, 4), F(1, 4), F(1, 4)]]
    drafts, stop = [1, 0, 3], {3}
    law = {(m, b, s): p for p, m, b, s in verify_outcomes(drafts, p_d, p_t, stop)}
    assert sum(law.values()) == 1
    N = 20_000
    td, tt = _tensor(p_d), _tensor(p_t)
    counts = Counter()
    for _ in range(N):
        v = verify_block(drafts, td, tt, g, stop)
        counts[(v.accepted, v.bonus, v.bonus_source)] += 1
    assert chi2_pvalue(counts, law) > ALPHA


def test_verify_greedy_gives_verify_blocks_verdict_at_t0():
    """From the logits: the verdict verify_block gives on the one-hot target rows, for one-hot and for spread
    draft rows (any that give their drafts mass), with ties in the logits, stop tokens, every ℓ."""
    g = torch.Generator().manual_seed(0)
    V = 6
    for trial in range(400):
        ell = trial % 5
        logits = torch.randint(0, 3, (ell + 1, V), generator=g).float()           # ties: the first maximum wins
        best = logits.argmax(-1)
        drafts = [int(best[k]) if torch.rand((), generator=g) < 0.6 else int(torch.randint(0, V, (), generator=g))
                  for k in range(ell)]
        stop = {int(torch.randint(0, V, (), generator=g))} if trial % 3 == 0 else set()
        spread = torch.rand(ell, V, generator=g) + 0.01
        for p_d in (probs_from_logits(torch.nn.functional.one_hot(torch.tensor(drafts, dtype=torch.long), V).float()
                                      if ell else torch.zeros(0, V), 0), spread / spread.sum(-1, keepdim=True)):
            want = verify_block(drafts, p_d if ell else None, probs_from_logits(logits, 0), g, stop)
            got = verify_greedy(drafts, logits, stop)
            assert got == want, (trial, drafts, stop)


# -- the whole loop, enumerated exactly --------------------------------------------------------------
def _table_drafter(draft_rows, gamma=3, seed=0) -> RandomDrafter:
    return RandomDrafter(len(draft_rows), gamma=gamma, seed=seed, table=_tensor(draft_rows))


class PeekAhead(Policy):
    """NOT lossless: verifies x_1 only when c_2 (which reads x_1) is high — looks at the future."""
    name = "peek"

    def choose(self, conf, sps=None, *, explain=True):
        from dspark_viz.scheduler import Schedule
        return Schedule([len(c) if c[1] > 0.5 else 0 for c in conf])


@pytest.mark.parametrize("stop_ids", [(), (3,)], ids=["no-stop", "stop-d"])
@pytest.mark.parametrize("policy", [FixedLength(1), FixedLength(2), FixedLength(3),
                                    StaticThreshold(0.4, on="survival"), HardwareAware()], ids=lambda p: p.name)
def test_loop_output_law_equals_target_exactly(table4, draft4, policy, stop_ids):
    dr = _table_drafter(draft4)
    assert torch.equal(dr.dist(2, 1.0), _tensor(draft4)[2])          # the drafter really samples from draft4
    prompt_last = 2
    got = exact_output_distribution(table4, lambda s: draft4[s[-1]], lambda s: dr.confidence_after(s[-1]),
                                    policy, gamma=3, n_tokens=3, first_token_dist=table4[prompt_last],
                                    stop_ids=stop_ids)
    want = target_output_distribution(table4, table4[prompt_last], n_tokens=3, stop_ids=stop_ids)
    assert sum(got.values()) == 1
    assert got == want


def test_exact_check_catches_an_anticipating_policy(table4, draft4):
    dr = _table_drafter(draft4)
    got = exact_output_distribution(table4, lambda s: draft4[s[-1]], lambda s: dr.confidence_after(s[-1]),
                                    PeekAhead(), gamma=3, n_tokens=3, first_token_dist=table4[2])
    want = target_output_distribution(table4, table4[2], n_tokens=3)
    assert sum(got.values()) == 1 and total_variation(got, want) > F(1, 1000)


# -- statistical: the real decode loop and the round-level law (vocab 8, T = 1) -------------------------
V8, ANCHOR, STOP8 = 8, 5, 7


def _stat_setup():
    """Target: random bigram table, prompt token 0 whose row is one-hot on ANCHOR (x0 is fixed); the
    two tokens after the anchor are the speculative part. Stop token 7. Drafter: RandomDrafter with an
    explicit table mixing the target with random softmax rows (full support)."""
    table = random_fraction_table(V8, seed=11)
    table[0] = [F(int(i == ANCHOR)) for i in range(V8)]
    law = target_output_distribution(table, table[0], n_tokens=3, stop_ids={STOP8})
    law = {k[1:]: p for k, p in law.items()}                    # drop x0 = ANCHOR: (y1, y2) or (7,)
    noise = torch.stack([RandomDrafter(V8, seed=1, scale=3.0).dist(v, 1.0) for v in range(V8)])   # (V, V)
    p_draft = 0.6 * _tensor(table) + 0.4 * noise               # close enough that every slot gets verified
    return table, law, RandomDrafter(V8, gamma=3, seed=1, table=p_draft / p_draft.sum(1, keepdim=True))


def test_round_law_chi_square_100k():
    """100k seeded rounds from the fixed anchor: a draft block sampled from the RandomDrafter
    (batched), verified by verify_block with ℓ = 3. A round that commits a single token (rejection at
    slot 1) is completed by a plain target draw (an ℓ = 0 round, batched)."""
    table, law, dr = _stat_setup()
    N, T = 100_000, 1.0
    pt = _tensor(table)                                                      # (V, V)
    pd = torch.stack([dr.dist(v, T) for v in range(V8)])                    # (V, V)
    g = torch.Generator().manual_seed(1234)
    stop = frozenset({STOP8})
    x = [torch.full((N,), ANCHOR)]
    for _ in range(3):                                                       # x_k ~ p_draft(· | x_{k−1})
        x.append(torch.multinomial(pd[x[-1]], 1, generator=g)[:, 0])
    blocks = torch.stack(x, 1).tolist()                                      # (N, 1 + γ)
    outs, m_seen = [], Counter()
    for blk in blocks:
        v = verify_block(blk[1:], pd[blk[:3]], pt[blk], g, stop)            # (ℓ, V), (ℓ+1, V)
        outs.append(blk[1:1 + v.accepted] + ([v.bonus] if v.bonus is not None else []))
        m_seen[v.accepted] += 1
    need = [i for i, c in enumerate(outs) if len(c) == 1 and c[0] != STOP8]
    nxt = torch.multinomial(pt[[outs[i][0] for i in need]], 1, generator=g)[:, 0].tolist()
    for i, y in zip(need, nxt):
        outs[i].append(y)
    counts = Counter(tuple(c[:1]) if c[0] == STOP8 else tuple(c[:2]) for c in outs)
    assert all(m_seen[m] > N // 20 for m in range(4)), m_seen              # every slot is exercised
    assert chi2_pvalue(counts, law) > ALPHA


def test_decode_loop_chi_square():
    """20k seeded decodes through generate_rounds (FixedLength(3), γ = 3): the two tokens after the
    fixed anchor follow the target's law. max_new_tokens = 8 so ℓ = 3 is never capped in round 1."""
    table, law, dr = _stat_setup()
    tgt = TableTarget(table, stop_ids=(STOP8,))
    pol, N = FixedLength(3), 20_000
    counts = Counter()
    for seed in range(N):
        rs = generate_rounds(tgt, dr, prompt_ids=[0], policy=pol, temperature=1.0, max_new_tokens=8, seed=seed)
        out: list[int] = []
        for r in rs:
            out += r.committed
            if len(out) >= 2 or r.stopped:
                break
        assert rs.trace.first_token == ANCHOR
        counts[tuple(out[:1]) if out[0] == STOP8 else tuple(out[:2])] += 1
    assert chi2_pvalue(counts, law) > ALPHA


def test_sample_follows_its_distribution():
    g = torch.Generator().manual_seed(0)
    p = torch.tensor([0.5, 0.0, 0.2, 0.3, 0.0])
    counts = Counter(sample(p, g) for _ in range(20_000))
    assert counts[1] == counts[4] == 0
    assert chi2_pvalue(counts, {0: F(1, 2), 2: F(1, 5), 3: F(3, 10)}) > ALPHA
    assert sample(torch.tensor([0.0, 0.0, 1.0, 0.0]), g) == 2                       # one-hot → argmax
    assert sample(torch.tensor([0.0, 3.0, 0.0]), g) == 1                            # unnormalised mass


def test_speculative_matches_plain_on_a_table_target_when_greedy(table_target):
    dr = _table_drafter([[F(1, 4)] * 4 for _ in range(4)], gamma=4)
    a = speculative_generate(table_target, dr, prompt_ids=[0, 1], temperature=0, max_new_tokens=20)
    b = plain_generate(table_target, prompt_ids=[0, 1], temperature=0, max_new_tokens=20)
    assert a.output_ids == b.output_ids and a.n_generated == 20


# -- greedy equality with transformers on the embedded SmolLM2 target ----------------------------------
GREEDY_PROMPTS = [
    "A bakery sells 14 loaves a day at $3 each and gives away two loaves every evening. "
    "How much money does it make in a week?",
    "Write a Python function is_palindrome(s) that ignores case and spaces, with two examples.",
    "Give three tips for staying focused while studying.",
]


def _until_stop(ids: list[int], stop_ids) -> list[int]:
    for i, t in enumerate(ids):
        if t in stop_ids:
            return ids[: i + 1]
    return ids


@pytest.fixture(scope="module")
def hf_greedy(real_target):
    """transformers' own greedy decoding of GREEDY_PROMPTS (64 new tokens), same eos set."""
    model, outs = real_target.model, []
    stop = sorted(real_target.stop_ids)
    for prompt in GREEDY_PROMPTS:
        ids = real_target.chat_ids(prompt)
        x = torch.tensor([ids])
        y = model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=64,
                           eos_token_id=stop, pad_token_id=stop[0])
        outs.append((ids, _until_stop(y[0, len(ids):].tolist(), real_target.stop_ids)))
    return outs


@pytest.mark.slow
def test_greedy_lookup_equals_hf_generate(real_target, hf_greedy):
    dr = LookupDrafter(gamma=7, vocab_size=real_target.vocab_size)
    for ids, want in hf_greedy:
        tr = speculative_generate(real_target, dr, prompt_ids=ids, temperature=0, max_new_tokens=64)
        assert _until_stop(tr.output_ids, real_target.stop_ids) == want
        assert any(r.accepted > 0 for r in tr.rounds)                    # lookup really drafted something


@pytest.mark.slow
def test_greedy_plain_equals_hf_generate(real_target, hf_greedy):
    for ids, want in hf_greedy:
        tr = plain_generate(real_target, prompt_ids=ids, temperature=0, max_new_tokens=64)
        assert _until_stop(tr.output_ids, real_target.stop_ids) == want


# -- the exact mirror and the real round: one loop ----------------------------------------------------
def _one_hot(V: int, nxt: list[int]) -> list[list[F]]:
    return [[F(int(j == nxt[i])) for j in range(V)] for i in range(V)]


@pytest.mark.parametrize("policy", [FixedLength(1), FixedLength(3), StaticThreshold(0.4, on="survival"),
                                    HardwareAware()], ids=lambda p: p.name)
def test_exact_mirror_follows_the_real_round_branch_for_branch(policy):
    """A deterministic target and drafter (one-hot rows that agree on some tokens, not on others): the
    enumeration's law is one output, and the real loop (round.speculative_round through generate_rounds) must
    commit exactly it, for every budget from 1 to 9 tokens — the same ℓ choice, budget cap, acceptance, bonus and
    stop in both, not just the same law on average."""
    V, stop = 6, 5
    target_next = [1, 2, 3, 4, 0, 5]                 # 0 → 1 → 2 → 3 → 4 → 0 …; 5 is the stop token
    draft_next = [1, 2, 4, 4, 5, 5]                  # right after 0, 1 and 3; wrong after 2 and 4
    table, draft = _one_hot(V, target_next), _one_hot(V, draft_next)
    dr = _table_drafter(draft, gamma=3)
    tgt = TableTarget(table, stop_ids=(stop,))
    for n in range(1, 10):
        law = exact_output_distribution(table, lambda s: draft[s[-1]], lambda s: dr.confidence_after(s[-1]),
                                        policy, gamma=3, n_tokens=n, first_token_dist=table[0], stop_ids={stop})
        (want, p), = law.items()
        assert p == 1
        got = speculative_generate(tgt, dr, prompt_ids=[0], policy=policy, temperature=1.0, max_new_tokens=n,
                                   fallback=False)
        assert tuple(got.output_ids) == want, (n, got.output_ids, want)
        assert len(got.output_ids) == n
