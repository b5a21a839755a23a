"""insert with its own eviction in two parts (proofs/epr_insert_room.py): prefix_closed,
tree_closed and rank_agreement under insert with insert_evicts on, for any number of
pages, as the eviction (the pre-state's invariants => the kept invariants of the view
after it) and the plain insert on that view (those invariants => the target).

Each part is proved; the insert part has models where the request really is inserted
after an eviction (its hypotheses are not contradictory); an eviction broken to take a
host-only node without its subtree gets a finite counterexample for any pages, and its
eviction part is what fails; with make_room's outcome per rank, the pair's eviction
part fails; the proof holds under every seed and after other setups renamed the
symbols (its effort, decided at once, swung from 1.5 to 42 s with the names).
slot_conservation and lock_accounting go the same way, with the target itself among
what (1) proves at m and (2) assumes; part (2) needs it (a finite counterexample
without it), and a part proved under some hypotheses is not reused under fewer."""

import pytest
import z3

from tiercheck.proofs import epr_insert_room as ir
from tiercheck.proofs import epr_rank_agreement as ra
from tiercheck.proofs import epr_room_pair as rp
from tiercheck.proofs import epr_sched_evict as se
from tiercheck.proofs.epr_obligations import hypotheses, prove_action, setup
from tiercheck.proofs.epr_properties import UPROPS
from tiercheck.proofs.forest import finite_model
from tiercheck.spec.state import ABSENT

ON = {"insert_evicts": True}


def _setup(target="tree_closed"):
    su = setup("insert", fix=ON)
    su.solver.add(*hypotheses(su, target, "insert"))
    return su


def _insert_part(su):
    held = list(su.solver.assertions())
    m = su.params["room_mid"]
    return [*ir._base(su.u), *ir.insert_facts(su, held), *[UPROPS[k].fn(su.u, m) for k in ir.KEPT]]


def test_proved_for_any_pages_in_two_parts():
    got = {r.target: r for r in prove_action("insert", [*ir.TARGETS, ra.TARGET], fix=ON)}
    assert {t: (r.status, r.pages) for t, r in got.items()} == {t: ("proved", "any") for t in (*ir.TARGETS, ra.TARGET)}
    su = _setup()
    held = list(su.solver.assertions())
    assert all(ir.kept(su, held, k) for k in ir.KEPT)
    # the insert part assumes the facts made after the eviction only, none of make_room's
    mine = ir.insert_facts(su, held)
    room = {f.get_id() for f in su.u.facts[:su.params["room_facts"]]}
    assert mine and not room & {f.get_id() for f in mine} and su.params["room_facts"] > 0
    for t in ir.TARGETS:
        assert ir.proved(su, t), t


def test_the_insert_part_has_models_where_the_request_is_inserted():
    """Not vacuous: the insert part's hypotheses hold of a finite forest where the
    eviction ran, the request was not cached after it and is after the insert."""
    su = _setup()
    m, q = su.params["room_mid"], su.params["req"]
    extra = [su.params["fits"], su.params["evict_short"], z3.Not(m.cached(q)), su.post.cached(q)]
    assert finite_model([*_insert_part(su), *extra], sizes=range(1, 4)) is not None


def test_the_insert_part_needs_the_eviction_part():
    """Without tree_closed of the view after the eviction the insert part proves nothing."""
    su = _setup()
    from tiercheck.proofs.epr_queues import refutes

    part = [h for h in _insert_part(su)]
    weaker = part[:-len(ir.KEPT)] + [UPROPS[k].fn(su.u, su.params["room_mid"]) for k in ir.KEPT
                                      if k not in ("tree_closed", "prefix_closed")]
    assert refutes(part, ir.PART_RLIMIT, UPROPS["tree_closed"].fn(su.u, su.post))
    assert finite_model([*weaker, z3.Not(UPROPS["tree_closed"].fn(su.u, su.post))], sizes=range(1, 4)) is not None


# -m slow: 20-26 s (the finite search for both targets' CTIs); the cheap check that the
# insert part needs the eviction part (above) stays in the default run
@pytest.mark.slow
def test_an_eviction_that_breaks_the_tree_gets_a_cti(monkeypatch):
    """make_room broken: an idle host-only node leaves the tree without its subtree. Both
    targets fail with a concrete counterexample for any pages (the eviction's own, the
    request not fitting after it), found where the eviction part fails."""
    keep = se.remove_nodes

    def leaky(u, v, gone):
        idle = lambda x: z3.And(v.live(x), v.dev(x) == ABSENT, v.href(x) == 0, v.lock(x) == 0)
        return keep(u, v, lambda x: z3.Or(gone(x), idle(x)))

    monkeypatch.setattr(se, "remove_nodes", leaky)
    su = _setup()
    assert not ir.kept(su, list(su.solver.assertions()), "tree_closed")
    for r in prove_action("insert", list(ir.TARGETS), fix=ON):
        assert (r.status, r.pages) == ("failed", "any") and r.cti is not None, r
        assert r.cti["config"]["insert_evicts"] and r.cti["forest"]["pages"] >= 2, r.cti


def test_with_the_outcome_per_rank_the_pair_eviction_part_fails(monkeypatch):
    """make_room's outcome per rank (nothing ties the two ranks' victims): the view after
    the eviction differs between the ranks, so the pair's first part is not proved (the
    direct check then finds the two-rank CTI: test_proofs_room_pair.py, -m slow)."""
    monkeypatch.setattr(ra, "SHARED", tuple(n for n in ra.SHARED if n not in rp.SHARED))
    ps = ra.setup("insert", frozenset(), ON)
    assert not ir.pair_proved(ps, ra.goal(ps))


def test_steady_under_every_seed_and_other_names(monkeypatch):
    """Each part within the limit under each seed alone, and again after other setups
    moved the symbols' names on."""
    from tiercheck.proofs import epr_queues

    for seed in epr_queues.SEEDS:
        monkeypatch.setattr(epr_queues, "SEEDS", (seed,))
        ps = ra.setup("insert", frozenset(), ON)
        assert ir.pair_proved(ps, ra.goal(ps)), seed
        su = _setup()
        assert all(ir.proved(su, t) for t in ir.TARGETS), seed
        ra.setup("evict")  # new names for the next round


def _counting_setup(target):
    """The solver as epr_obligations.check leaves it for a counting target before it decides."""
    from tiercheck.proofs.epr_counting import TARGETS, counting_facts
    from tiercheck.proofs.epr_obligations import excluded

    su = setup("insert", fix=ON)
    su.solver.add(*counting_facts(su.u), *[UPROPS[n].fn(su.u, su.pre) for n in TARGETS])
    su.solver.add(*hypotheses(su, target, "insert"), *excluded(su.u, target, "insert"))
    return su


@pytest.mark.parametrize("target", ir.COUNTED)
def test_the_counting_targets_are_proved_in_two_parts(target):
    """slot_conservation and lock_accounting with insert_evicts on: (1) proves the target
    and the kept invariants at the view after the eviction, (2) the target after the
    insert from them and the insert's facts; the obligation is proved for any pages."""
    su = _counting_setup(target)
    held = list(su.solver.assertions())
    assert all(ir.kept(su, held, k) for k in (*ir.KEPT, target))
    assert ir.shortcut(su, target)
    (r,) = prove_action("insert", [target], fix=ON)
    assert (r.status, r.pages) == ("proved", "any"), r


@pytest.mark.parametrize("target", ir.COUNTED)
def test_the_counting_insert_part_needs_the_target_at_the_view_after_the_eviction(target):
    """(2) without the target at m proves nothing (a finite counterexample, every set
    size exact): the counters after make_room are the eviction part's result, not
    something the insert's facts give."""
    from tiercheck.proofs.epr_counting import exact
    from tiercheck.proofs.epr_queues import refutes

    su = _counting_setup(target)
    held = list(su.solver.assertions())
    part = [*ir._base(su.u), *ir.insert_facts(su, held), *[ir.at_mid(su, k) for k in ir.KEPT]]
    goal = UPROPS[target].fn(su.u, su.post)
    assert refutes([*part, ir.at_mid(su, target)], ir.PART_RLIMIT, goal)
    assert finite_model([*part, z3.Not(goal)], extra=exact(su.u), sizes=range(1, 4)) is not None


def test_a_part_proved_under_some_hypotheses_is_not_reused_under_fewer():
    """The eviction part's proofs are memoised per hypotheses: proved from the whole
    pre-state, tree_closed at m is still not proved from the forest axioms alone."""
    su = _setup()
    held = list(su.solver.assertions())
    assert ir.kept(su, held, "tree_closed")
    assert not ir.kept(su, ir._base(su.u), "tree_closed")
    assert ir.kept(su, held, "tree_closed")
