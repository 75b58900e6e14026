"""The one table of drafters (dspark_viz.registry, drafters/families.py) and of policies (scheduler.POLICIES):
a registered name reaches every list, dropdown, colour map, loader, the serving sweep and the live engine."""
from __future__ import annotations

import pytest

from dspark_viz import paper, registry
from dspark_viz.background import LoadedPolicy, live_policy
from dspark_viz.drafters import NAMES, RandomDrafter, load_drafter, register_drafter, unregister_drafter
from dspark_viz.model.toy import tiny_llama_target
from dspark_viz.registry import DrafterEntry
from dspark_viz.scheduler import POLICIES, POLICY_NAMES, FixedLength, make_policy, register_policy, unregister_policy
from dspark_viz.serving.simulate import SWEEP_POLICIES
from dspark_viz.ui.app.resources import DRAFTER_LABELS, DRAFTER_ORDER, available_drafters
from dspark_viz.viz.style import DRAFTER_COLORS, OKABE_ITO, POLICY_COLORS


@pytest.fixture(scope="module")
def target():
    return tiny_llama_target(vocab_size=48, hidden_size=64, n_layers=4)


@pytest.fixture
def toy_drafter():
    def load(entry, target, gamma=None, **kw):
        return RandomDrafter(vocab_size=target.vocab_size, gamma=gamma or 3, seed=1)

    register_drafter(DrafterEntry("toy-x", "toy X", "toy-x", "#123456", order=55), load=load)
    yield "toy-x"
    unregister_drafter("toy-x", family=True)


def test_a_registered_drafter_reaches_every_list(toy_drafter, target):
    assert DRAFTER_LABELS[toy_drafter] == "toy X" and registry.label(toy_drafter) == "toy X"
    assert DRAFTER_COLORS[toy_drafter] == "#123456"
    assert list(DRAFTER_ORDER).index(toy_drafter) == list(DRAFTER_ORDER).index("lookup") + 1   # order 55
    assert toy_drafter in NAMES
    ok, missing = available_drafters(target)
    assert toy_drafter in ok and ok[toy_drafter].gamma == 3
    assert load_drafter(toy_drafter, target, gamma=5).gamma == 5


def test_unregistering_cleans_up(target):
    register_drafter(DrafterEntry("toy-y", "toy Y", "random"))
    unregister_drafter("toy-y")
    assert "toy-y" not in DRAFTER_LABELS and "toy-y" not in DRAFTER_ORDER and "toy-y" not in DRAFTER_COLORS
    with pytest.raises(ValueError, match="unknown drafter"):
        load_drafter("toy-y", target)


def test_a_family_needs_a_model_or_a_loader():
    with pytest.raises(ValueError, match="no model class or loader"):
        register_drafter(DrafterEntry("toy-z", "toy Z", "no-such-family"))
    assert "toy-z" not in registry.DRAFTERS


def test_every_shipped_name_has_label_colour_and_order():
    shipped = ("dspark", "dspark-rnn", "dflash", "eagle", "lookup", "dspark+lookup", "random")
    assert set(shipped) <= set(registry.DRAFTERS)
    for n in shipped:
        e = registry.DRAFTERS[n]
        assert e.label and isinstance(e.order, int)
    assert {n: DRAFTER_COLORS[n] for n in ("dspark", "dflash", "eagle", "lookup")} == {
        "dspark": OKABE_ITO["vermillion"], "dflash": OKABE_ITO["blue"], "eagle": OKABE_ITO["green"],
        "lookup": OKABE_ITO["orange"]}
    assert tuple(DRAFTER_ORDER) == ("dspark", "dspark-rnn", "dflash", "eagle", "lookup", "dspark+lookup")
    assert dict(registry.PAPER_ROLE) == {"eagle3": "eagle", "dflash": "dflash", "dspark": "dspark"}


def test_the_random_drafter_loads_by_name(target):
    d = load_drafter("random", target)
    assert isinstance(d, RandomDrafter) and d.vocab_size == target.vocab_size


@pytest.fixture
def toy_policy():
    register_policy("toy-fixed2", lambda **k: FixedLength(2), "fixed ℓ = 2 (test)", sweep=True, colour="black",
                    live=True)
    yield "toy-fixed2"
    unregister_policy("toy-fixed2")


class _Headed:
    has_confidence, gamma = True, 4


def test_a_registered_policy_reaches_the_sweep_and_the_live_engine(toy_policy):
    assert toy_policy in SWEEP_POLICIES and SWEEP_POLICIES[-1] == "oracle"
    assert toy_policy in POLICY_NAMES and POLICY_COLORS[toy_policy] == OKABE_ITO["black"]
    assert make_policy(toy_policy).ell == 2
    pol = live_policy(_Headed(), R=3)
    assert isinstance(pol, LoadedPolicy) and isinstance(pol.inner, FixedLength) and pol.inner.ell == 2


def test_the_shipped_policies():
    assert tuple(SWEEP_POLICIES) == tuple(f"fixed-{k}" for k in range(1, 8)) + (
        "hardware-aware", "hardware-aware+floor", "async-global", "oracle")
    assert live_policy(_Headed(), R=2).inner.name == "hardware-aware"
    assert all(POLICIES[n].label for n in POLICIES)
    assert "toy-fixed2" not in POLICIES
