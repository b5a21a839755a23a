"""Counting through insert's own eviction (proofs/epr_counting_evict.py): slot_conservation
and lock_accounting under insert with insert_evicts on, for any number of pages.

Both are proved (the audit no longer proves them bounded: UNDECIDED_ON is empty);
explicit inserts whose make_room ran are admitted with the spec's counters; a
make_room whose victims' device pages do not return to dev_free, and one that takes a
locked parent (lru-evicts-locked-parent: the pop skips no locked node), each get a
concrete counterexample over a finite forest; the balance instances make_room adds are
not contradictory (a model with a victim exists), so the proof is not vacuous."""

import pytest
import z3

from tiercheck.proofs import epr_counting as count
from tiercheck.proofs import epr_counting_evict as ce
from tiercheck.proofs.epr_obligations import BOUNDED_UNDER, hypotheses, prove_action, setup
from tiercheck.proofs.epr_properties import UPROPS
from tiercheck.proofs.epr_sched_evict import UNDECIDED_ON
from tiercheck.proofs.forest import finite_model

ON = {"insert_evicts": True}
TARGETS = ("slot_conservation", "lock_accounting")


def _dropped(cti):
    """The nodes that held a device copy before the step and none after it, on rank 0."""
    pre, post = cti["pre"]["ranks"][0]["nodes"], cti["post"]["ranks"][0]["nodes"]
    return [n for n, x in pre.items() if x["dev"] == "resident" and (n not in post or post[n]["dev"] == "absent")]


def test_proved_for_any_pages_with_insert_evicts_on():
    got = {r.target: r for r in prove_action("insert", list(TARGETS), fix=ON)}
    for t in TARGETS:
        assert (got[t].status, got[t].pages) == ("proved", "any"), got[t]
    assert not UNDECIDED_ON["insert"] and set(BOUNDED_UNDER) <= {"insert"}


def test_a_victim_exists_under_the_counting_facts():
    """The obligation's hypotheses with make_room's balance instances admit a step that
    evicts: a finite model with a victim whose device pages leave the held set."""
    su = setup("insert", fix=ON)
    su.solver.add(*count.counting_facts(su.u), *[UPROPS[n].fn(su.u, su.pre) for n in count.TARGETS])
    su.solver.add(*hypotheses(su, "slot_conservation", "insert"))
    m = su.params["room_mid"]
    dev_pre, dev_mid = count.held_size(su.u, su.pre, "dev_free"), count.held_size(su.u, m, "dev_free")
    model = finite_model([*su.solver.assertions(), dev_mid < dev_pre], extra=count.exact(su.u))
    assert model is not None
    assert model.eval(m.dev_free).as_long() > model.eval(su.pre.dev_free).as_long()


def _room_part(su):
    """The obligation's hypotheses and the facts up to make_room's view m, and
    slot_conservation(m) negated (the eviction alone)."""
    su.solver.add(*count.counting_facts(su.u), *[UPROPS[n].fn(su.u, su.pre) for n in count.TARGETS])
    su.solver.add(*hypotheses(su, "slot_conservation", "insert"))
    later = {f.get_id() for f in su.u.facts[su.params["room_facts"]:]}
    held = [h for h in su.solver.assertions() if h.get_id() not in later]
    known = len(su.u.facts)
    goal = count.slot_conservation(su.u, su.params["room_mid"])
    return [*held, *su.u.facts[known:], z3.Not(goal)]


@pytest.mark.parametrize("leak", [False, True])
def test_the_eviction_alone_keeps_the_counters_and_a_leak_is_found(monkeypatch, leak):
    """make_room alone: slot_conservation of the view it leaves follows from the
    pre-state's; with its victims' device pages never returned to dev_free a finite
    counterexample (every size exact) exists."""
    if leak:
        room = ce.room
        monkeypatch.setattr(ce, "room", lambda u, v, out, **sets: room(u, v, out, **sets).update(dev_free=v.dev_free))
    su = setup("insert", fix=ON)
    formulas = _room_part(su)
    s = z3.Solver()
    s.set("rlimit", 20_000_000)
    s.add(*formulas)
    if not leak:
        assert s.check() == z3.unsat
        return
    model = finite_model(formulas, extra=count.exact(su.u))
    assert model is not None
    m = su.params["room_mid"]
    assert model.eval(m.dev_free).as_long() == model.eval(su.pre.dev_free).as_long()
    assert model.eval(count.held_size(su.u, m, "dev_free") < count.held_size(su.u, su.pre, "dev_free"))


# -m slow: about 90 s each on a loaded machine (the finite counterexample search of the
# whole step); the default run keeps the eviction part's leak above.
@pytest.mark.slow
def test_victim_slots_not_returned_fail_with_a_cti(monkeypatch):
    """make_room broken so that its victims' device pages never return to dev_free."""
    room = ce.room

    def leaky(u, v, out, **sets):
        return room(u, v, out, **sets).update(dev_free=v.dev_free)

    monkeypatch.setattr(ce, "room", leaky)
    [r] = prove_action("insert", ["slot_conservation"], fix=ON)
    assert (r.status, r.pages) == ("failed", "any") and r.cti is not None, r
    assert r.cti["config"]["insert_evicts"] and _dropped(r.cti), r.cti
    pre, post = r.cti["pre"]["ranks"][0], r.cti["post"]["ranks"][0]
    assert post["dev_free"] == pre["dev_free"] or "insert" in r.cti["step"]


@pytest.mark.slow
def test_make_room_taking_a_locked_parent_fails_lock_accounting():
    """lru-evicts-locked-parent: the scheduler's eviction pops a locked parent; a running
    request's lock then names a node that is gone or the count of a live node is off."""
    [r] = prove_action("insert", ["lock_accounting"], variants=frozenset({"lru-evicts-locked-parent"}), fix=ON)
    assert (r.status, r.pages) == ("failed", "any") and r.cti is not None, r
    assert r.cti["config"]["insert_evicts"] and r.cti["forest"]["pages"] >= 2, r.cti
    pre = r.cti["pre"]["ranks"][0]["nodes"]
    assert any(x["lock"] >= 1 for x in pre.values()), r.cti


@pytest.mark.parametrize("name", ["wt-evicts-1r", "wb-evicts-2r"])
def test_evicting_inserts_are_admitted_with_the_spec_counters(name):
    """Explicit inserts whose make_room ran (some rank lacked room) are behaviours of the
    encoding with the spec's counters (epr_agreement.same_view compares them); with a
    counter one off they are not."""
    from tiercheck.proofs.epr_agreement import admits
    from tiercheck.proofs.epr_sched_evict import spec_short

    from .proof_helpers import model, walk

    m = model(name)
    found = []
    for seed in range(8):
        states = walk(m, seed, 40)
        for s in states:
            for a, t in m.successors(s):
                if a.name == "insert" and spec_short(m, s, a) and s.ranks[0].dev_free != t.ranks[0].dev_free:
                    found.append((s, a, t))
            if len(found) >= 3:
                break
        if len(found) >= 3:
            break
    assert found, name
    for s, a, t in found[:3]:
        for r in range(m.cfg.ranks):
            assert admits(m, s, a, t, r), (a, r)
            rt = t.ranks[r]
            for bad in (dict(dev_free=rt.dev_free + 1), dict(host_free=rt.host_free + 1)):
                broken = t._replace(ranks=t.ranks[:r] + (rt._replace(**bad),) + t.ranks[r + 1:])
                assert not admits(m, s, a, broken, r), (a, r, bad)
