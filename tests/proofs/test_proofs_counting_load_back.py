"""load_back as a counted step (proofs/epr_sched_evict.py load, planner_victims; proofs/epr_locks.py
loads_added): slot_conservation and lock_accounting under load_back for any number of pages.

Both are proved, with load_back_evicts off (the load alone, or after the CP planner's
victims) and on (make_room, then the load where the chain fits); explicit load-backs of
shipped models (make_room ran: wt-evicts-1r, wb-evicts-2r; the planner ran:
cp-planner-2r, cp-planner-lru-1r) are admitted with the spec's counters and refused with
one counter off by one; the facts admit a load-back that takes device pages (not
vacuous); the hypothesis anchor_loading holds on reachable states; a load that does not
take the chain's pages from dev_free, and one that queues its copy without locking the
path, fail with a concrete counterexample (the last two -m slow)."""

import pytest

from tiercheck.proofs import epr_counting as count
from tiercheck.proofs import epr_sched_evict as se
from tiercheck.proofs.epr_obligations import hypotheses, prove_action, setup
from tiercheck.proofs.epr_properties import UPROPS
from tiercheck.proofs.forest import finite_model
from tiercheck.spec.state import ABSENT

from .proof_helpers import model, walk

TARGETS = ("slot_conservation", "lock_accounting")


def test_both_proved_for_any_pages_under_load_back():
    got = {}
    for r in prove_action("load_back", list(TARGETS)):
        got.setdefault(r.target, []).append(r)
    for t in TARGETS:
        assert [(r.status, r.pages) for r in got[t]] == [("proved", "any")], got[t]
    assert "load_back" in count.COUNTED and not se.UNDECIDED_ON.get("load_back")


@pytest.mark.parametrize("fix", [{"load_back_evicts": False, "cp_planner": False},
                                 {"load_back_evicts": False, "cp_planner": True},
                                 {"load_back_evicts": True}])
def test_the_facts_admit_a_load_back_taking_device_pages(fix):
    """The obligation's hypotheses with the step's balance instances admit a load that
    takes device pages (held set grows, dev_free falls): the proof is not vacuous."""
    su = setup("load_back", fix=fix)
    su.solver.add(*count.counting_facts(su.u), *[UPROPS[n].fn(su.u, su.pre) for n in count.TARGETS])
    su.solver.add(*hypotheses(su, "slot_conservation", "load_back"))
    grew = count.held_size(su.u, su.post, "dev_free") > count.held_size(su.u, su.pre, "dev_free")
    model_ = finite_model([*su.solver.assertions(), grew], extra=count.exact(su.u))
    assert model_ is not None
    assert model_.eval(su.post.dev_free).as_long() < model_.eval(su.pre.dev_free).as_long()


def _load_backs(name, want, limit=3):
    m = model(name)
    found = []
    for seed in range(12):
        for s in walk(m, seed, 40):
            found += [(s, a, t) for a, t in m.successors(s) if a.name == "load_back" and want(m, s, a, t)]
            if len(found) >= limit:
                return m, found[:limit]
    return m, found


def _short(m, s, a, t):
    return se.spec_short(m, s, a)


def _planned(m, s, a, t):
    """The planner evicted on some rank: a node with a device copy before has none after."""
    return any(x is not None and x.dev != ABSENT and (i >= len(r1.nodes) or r1.nodes[i] is None or r1.nodes[i].dev == ABSENT)
               for r0, r1 in zip(s.ranks, t.ranks) for i, x in enumerate(r0.nodes))


@pytest.mark.parametrize("name,want", [("wt-evicts-1r", _short), ("wb-evicts-2r", _short),
                                       ("cp-planner-2r", _planned), ("cp-planner-lru-1r", _planned)])
def test_explicit_load_backs_admitted_with_the_spec_counters(name, want):
    """Explicit load-backs whose eviction (make_room or the planner) ran are behaviours of
    the encoding with the spec's counters; with a counter one off they are not."""
    from tiercheck.proofs.epr_agreement import admits

    m, found = _load_backs(name, want)
    assert found, name
    for s, a, t in found:
        for r in range(m.cfg.ranks):
            assert admits(m, s, a, t, r), (a, r)
            rt = t.ranks[r]
            for bad in (dict(dev_free=rt.dev_free + 1), dict(dev_free=rt.dev_free - 1), dict(host_free=rt.host_free + 1)):
                broken = t._replace(ranks=t.ranks[:r] + (rt._replace(**bad),) + t.ranks[r + 1:])
                assert not admits(m, s, a, broken, r), (a, r, bad)


@pytest.mark.parametrize("name", ["wt-evicts-1r", "cp-planner-2r"])
def test_anchor_loading_holds_on_reachable_states(name):
    """The hypothesis epr_counting.anchor_loading: an H->D copy's anchor has a device copy."""
    m = model(name)
    seen = 0
    for seed in range(6):
        for s in walk(m, seed, 40):
            for rs in s.ranks:
                for _first, e in rs.lq:
                    seen += 1
                    assert rs.nodes[e] is not None and rs.nodes[e].dev != ABSENT, (s, e)
    assert seen


def _not_moved(which):
    """count.moved leaves dev_free as it was for the ledger entry ``which`` ("loaded": the
    chain's pages not taken; "planned": the planner's victims' pages not returned)."""
    def leak(monkeypatch):
        moved = count.moved

        def leaky(u, v, pool, sign, pages, amount=None, name="moved"):
            out = moved(u, v, pool, sign, pages, amount, name)
            return out.update(dev_free=v.dev_free) if name == which else out

        monkeypatch.setattr(count, "moved", leaky)
    return leak


def _without_locking_the_path(monkeypatch):
    load = se.load

    def unlocked(u, was, v, e, a=None):
        out = load(u, was, v, e, a)
        return out.update(lock=v.lock)

    monkeypatch.setattr(se, "load", unlocked)


@pytest.mark.parametrize("leak,target,fix", [
    (_not_moved("loaded"), "slot_conservation", {"load_back_evicts": False, "cp_planner": False}),
    # -m slow: 0.5-27 s each (the finite counterexample search; its cost moves with the
    # names earlier tests gave z3's symbols)
    pytest.param(_not_moved("planned"), "slot_conservation", {"load_back_evicts": False, "cp_planner": True},
                 marks=pytest.mark.slow),
    pytest.param(_without_locking_the_path, "lock_accounting", {"load_back_evicts": False}, marks=pytest.mark.slow)])
def test_a_leaky_load_fails_with_a_cti(monkeypatch, leak, target, fix):
    leak(monkeypatch)
    [r] = prove_action("load_back", [target], fix=fix)
    assert (r.status, r.pages) == ("failed", "any") and r.cti is not None, r
    assert "load_back" in r.cti["step"]
    pre, post = r.cti["pre"]["ranks"][0], r.cti["post"]["ranks"][0]
    assert any(x["dev"] == "loading" for x in post["nodes"].values()), r.cti
    if fix.get("cp_planner"):  # a victim's device copy went, dev_free fell by the chain only
        assert r.cti["config"]["cp_planner"], r.cti
        assert any(x["dev"] == "resident" and (n not in post["nodes"] or post["nodes"][n]["dev"] == "absent")
                   for n, x in pre["nodes"].items()), r.cti
    elif target == "slot_conservation":
        assert post["dev_free"] == pre["dev_free"], r.cti
