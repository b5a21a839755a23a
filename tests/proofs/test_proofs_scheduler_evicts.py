"""The scheduler's own eviction (insert_evicts, load_back_evicts) in the bounded z3
encoding (proofs/encode/scheduler_evict.py): on reachable states of the models that
exercise it, every explicit insert / load_back is a behaviour of the encoding and the
encoding allows nothing else but a stuttering step; the encoded properties have the
spec's values; each option's safety variant fails its property's obligation with a CTI
and the option proves clean without it."""

import pytest

from tiercheck.proofs.agreement import admits, extra_successor, transition_value
from tiercheck.proofs.epr_sched_evict import spec_short
from tiercheck.proofs.obligations import SPLIT_FLAGS, prove_action
from tiercheck.proofs.snapshot import INVARIANTS, z3_invariant_check
from tiercheck.spec.properties import BY_NAME

from .proof_helpers import model, reachable, walk

MODELS = ["wt-evicts-1r", "wb-evicts-2r", "request-locks-evicts-1r"]
EVICTING = tuple(SPLIT_FLAGS)  # insert, load_back
TRANSITION = ("locked_never_evicted", "release_safety")


def _evicting_states(m, n=4, seeds=12, steps=30):
    """States along random runs where an insert or a load_back evicts by itself."""
    out, seen = [], set()
    for seed in range(seeds):
        for s in walk(m, seed, steps):
            if s not in seen and any(a.name in EVICTING and spec_short(m, s, a) for a in m.actions(s)):
                seen.add(s)
                out.append(s)
    return out[:: max(1, len(out) // n)][:n]


# wb-evicts-2r (about 30 s idle) under -m slow; its replicated eviction is swept by the stutter test below
@pytest.mark.parametrize("name", [n if n != "wb-evicts-2r" else pytest.param(n, marks=pytest.mark.slow) for n in MODELS])
def test_evicting_steps_are_behaviours_with_the_spec_property_values(name):
    m = model(name)
    states = _evicting_states(m)
    assert states, f"{name}: no state where a step evicts by itself"
    for s in states:
        for a in m.actions(s):
            if a.name not in EVICTING:
                continue
            t = m.next_state(s, a)
            assert admits(m, s, a, t), (name, a)
            for p in TRANSITION:
                assert transition_value(m, s, a, t, p) == (BY_NAME[p].fn(m, s, a, t) is None), (name, a, p)
            spec_bad = {n for n in INVARIANTS if BY_NAME[n].fn(m, t) is not None}
            assert set(z3_invariant_check(m, t)) == spec_bad, (name, a)


@pytest.mark.parametrize("name", MODELS[:2])
def test_the_encoding_allows_only_the_spec_steps_or_a_stutter(name):
    """The other direction: guard /\\ post differs from every explicit successor and
    from the pre-state is unsatisfiable (the guard's over-approximation is a stutter)."""
    m = model(name)
    for s in _evicting_states(m, n=2):
        for action in EVICTING:
            succs = [m.next_state(s, a) for a in m.actions(s) if a.name == action]
            assert extra_successor(m, s, action, succs + [s]) is None, (name, action)


def test_a_reversed_victim_order_is_noticed(monkeypatch):
    """Break the spec on purpose: its scheduler eviction takes the largest end page
    first. Page order is exact in the encoding, so the evicting steps whose victim the
    order decides (three one-page roots, two device pages: the library models have
    none) are no longer behaviours of it."""
    from tiercheck.spec import eviction
    from tiercheck.spec.config import Config
    from tiercheck.spec.model import Model

    m = Model(Config(requests=((1,), (2,), (3,)), device_pages=2, host_pages=2, insert_evicts=True))
    steps = [(s, a, m.next_state(s, a)) for s in _evicting_states(m, n=6) for a in m.actions(s)
             if a.name == "insert" and spec_short(m, s, a)]
    assert steps and all(admits(m, s, a, t) for s, a, t in steps)
    monkeypatch.setattr(eviction, "victim_key", lambda mm, rs: lambda e: -e)
    changed = [(s, a) for s, a, t in steps if m.next_state(s, a) != t]
    assert changed, "no evicting step had two candidate victims"
    assert not any(admits(m, s, a, m.next_state(s, a)) for s, a in changed)


def test_load_back_evicts_chain_unlocked_fails_no_use_after_free_with_a_cti():
    """The load's own write-back eviction makes the host allocation take the node being
    loaded (an unlocked host leaf): the H->D copy reads freed host slots. The explicit
    spec replays the CTI's step to the same successor."""
    [r] = prove_action("load_back", ["no_use_after_free"], k=2, variants=frozenset({"load-back-evicts-chain-unlocked"}),
                       fix={"load_back_evicts": True, "wb": True, "dupr": False})
    assert r.status == "failed" and r.cti["config"]["load_back_evicts"] and r.cti["config"]["policy"] == "write_back"
    assert r.cti["explicit"]["successor"] == "same" and "left the tree" in r.cti["explicit"]["property"]


def test_lru_evicts_locked_parent_step_is_a_behaviour_failing_the_obligation():
    """The variant model's violating step (4 pages: a locked parent, its leaf, a
    two-page request), from a reachable state inside the invariants, is a behaviour of
    the encoding with the variant on which the encoded locked_never_evicted is false: a
    concrete counterexample to the insert obligation. Without the variant the same
    insert is admitted and keeps the parent."""
    import dataclasses

    from tiercheck.spec.model import Model

    m = model("variants/lru-evicts-locked-parent")
    prop = BY_NAME["locked_never_evicted"]
    found = [(s, a, m.next_state(s, a)) for s in reachable(m) for a in m.actions(s)
             if a.name == "insert" and prop.fn(m, s, a, m.next_state(s, a))]
    assert found, "the variant model has no violating insert"
    s, a, t = found[0]
    assert z3_invariant_check(m, s) == []
    assert admits(m, s, a, t) and transition_value(m, s, a, t, "locked_never_evicted") is False
    fixed = Model(dataclasses.replace(m.cfg, variants=frozenset()))
    t2 = fixed.next_state(s, a)
    assert admits(fixed, s, a, t2) and transition_value(fixed, s, a, t2, "locked_never_evicted") is True


# the cheap parts of the option's configurations (obligations._split): another policy,
# write_back without duplicate reclaim; write_back with it is the slow test below
CHEAP_PARTS = ({"wb": False}, {"wb": True, "dupr": False})


@pytest.mark.parametrize("part", CHEAP_PARTS, ids=["not-wb", "wb-no-reclaim"])
@pytest.mark.parametrize("action,target", [("load_back", "no_use_after_free"), ("insert", "locked_never_evicted"),
                                           ("insert", "release_safety"), ("load_back", "release_safety")])
def test_the_options_prove_clean_where_their_variants_fail(action, target, part):
    fix = {SPLIT_FLAGS[action]: True, **part}
    assert [r.status for r in prove_action(action, [target], k=2, fix=fix)] == ["proved"]


@pytest.mark.parametrize("part", CHEAP_PARTS, ids=["not-wb", "wb-no-reclaim"])
@pytest.mark.parametrize("action", EVICTING)
def test_every_obligation_proved_with_the_option_on(action, part):
    """The correct protocol with the action's own eviction: every obligation (2 pages)."""
    fix = {SPLIT_FLAGS[action]: True, **part}
    assert [r.target for r in prove_action(action, k=2, fix=fix) if r.status != "proved"] == []


@pytest.mark.slow
@pytest.mark.parametrize("action", EVICTING)
def test_every_obligation_proved_with_the_option_and_reclaim_on(action):
    fix = {SPLIT_FLAGS[action]: True, "wb": True, "dupr": True}
    assert [r.target for r in prove_action(action, k=2, fix=fix) if r.status != "proved"] == []


def test_the_unbounded_audit_proves_the_option_page_sorted():
    """With --unbounded, insert's and load_back's covered obligations are proved
    page-sorted for both values of the flag (proofs/epr_sched_evict.py); only insert's
    undecided ones are bounded with it on; a target proved both ways reports the bound."""
    from tiercheck.proofs.audit import _jobs, _merge
    from tiercheck.proofs.obligations import Result

    from tiercheck.proofs.epr_sched_evict import UNDECIDED_ON

    for action, flag in SPLIT_FLAGS.items():
        jobs = _jobs([action], (), 2, True)
        on = {t for j in jobs if j[5] == ((flag, True),) for t in j[4]}
        assert jobs and on == set(UNDECIDED_ON.get(action, ()))
    merged = _merge(Result("t", "insert", "proved", 1.0, None, "any"), Result("t", "insert", "proved", 1.0, None, "<=2"))
    assert merged.pages == "<=2" and merged.status == "proved"
