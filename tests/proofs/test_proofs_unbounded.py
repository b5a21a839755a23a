"""Proofs for forests of any size (proofs.forest, proofs.epr_*): the forest axioms, the
unbounded invariants' agreement with the spec and the bounded encoding on reachable
states, the unbounded actions admitting every explicit step, the obligations, and a
variant caught with a finite counterexample."""

import random

import pytest
import z3

from tiercheck.proofs.agreement import concrete_ctx, lift
from tiercheck.proofs.epr_agreement import admits, hypothesis_values, invariant_values, transition_values
from tiercheck.proofs.epr_obligations import COVERED_ACTIONS, prove_action
from tiercheck.proofs.epr_properties import UPROPS
from tiercheck.proofs.epr_queues import UQPROPS
from tiercheck.proofs.forest import Forest
from tiercheck.proofs.formula import value
from tiercheck.proofs.properties import PROPERTIES
from tiercheck.proofs.protocol import PROTOCOL
from tiercheck.proofs.strengthen import STRENGTHENING
from tiercheck.spec.properties import BY_NAME as SPEC
from tiercheck.spec.state import ABSENT, HOST_RESIDENT, RESIDENT

from .proof_helpers import model, walk

# wt-1r runs by default; the others (duplicate reclaim, storage, prefetch) under -m slow
MODELS = ["wt-1r"] + [pytest.param(n, marks=pytest.mark.slow) for n in ("wb-reclaim-2r", "wts-mirror-1r", "wt-prefetch-1r")]


def _random_forest(rng, k):
    parent = [-1]
    for p in range(1, k):
        parent.append(rng.choice([-1] + list(range(p))))
    return parent


def test_every_finite_forest_satisfies_the_axioms_and_reads_back():
    rng = random.Random(7)
    for k in (1, 2, 5, 8):
        f = Forest()
        parent = _random_forest(rng, k)
        pages, facts = f.closed(parent)
        sol = z3.Solver()
        sol.add(*facts, *f.axioms())
        assert sol.check() == z3.sat
        order, back = f.parent_array(sol.model())
        assert len(back) == k and back.count(-1) == parent.count(-1)
        assert all(q < p for p, q in enumerate(back))  # preorder: parents first


def test_the_axioms_reject_a_page_with_two_incomparable_parents():
    f = Forest()
    a, b, c = (z3.Const(n, z3.DeclareSort("Page")) for n in "abc")
    sol = z3.Solver()
    sol.add(*f.axioms(), f.le(a, c), f.le(b, c), z3.Not(f.le(a, b)), z3.Not(f.le(b, a)))
    assert sol.check() == z3.unsat


_CTX = {}  # one concrete context per model


def _bounded_transition(m, name, s, a, t):
    """The bounded encoding's value of a transition property on an explicit step (every
    rank), for the consensus obligations the spec has no predicate for."""
    ctx = _CTX.get(id(m)) or _CTX.setdefault(id(m), concrete_ctx(m))
    return value(ctx.space, PROTOCOL[name].fn(ctx, lift(ctx, m, s), a.name, lift(ctx, m, t)))


def _agrees(m, s, a, t, r, vals):
    for n, v in vals.items():
        want = not SPEC[n].fn(m, s, a, t) if n in SPEC else _bounded_transition(m, n, s, a, t)
        assert v == want, (n, a, r)


def _states(name, seeds=(1, 2), steps=25):
    m = model(name)
    out = []
    for seed in seeds:
        out += walk(m, seed, steps)[::4]
    return m, out


@pytest.mark.parametrize("name", MODELS)
def test_unbounded_invariants_agree_with_spec_and_bounded_encoding(name):
    m, states = _states(name)
    ctx = concrete_ctx(m)
    for s in states:
        terms = lift(ctx, m, s)
        for r in range(m.cfg.ranks):
            got = invariant_values(m, s, r)
            for n, v in got.items():
                bounded = PROPERTIES.get(n) or STRENGTHENING[n]
                parts = [p for p in bounded.fn(ctx, terms)]
                assert v is True, (n, s)
                assert value(ctx.space, parts) is True
                if n in SPEC:
                    assert not SPEC[n].fn(m, s)
            assert hypothesis_values(m, s, r) == {"queue_pages": True}, s


def test_unbounded_invariants_notice_a_broken_state():
    m, states = _states("wt-1r")
    s = next(x for x in states if any(n is not None for n in x.ranks[0].nodes))
    rs = s.ranks[0]
    e = next(i for i, n in enumerate(rs.nodes) if n is not None)
    broken = s._replace(ranks=(rs._replace(nodes=tuple(
        n._replace(dev=0, host=0, lock=-1) if i == e else n for i, n in enumerate(rs.nodes))),) + s.ranks[1:])
    got = invariant_values(m, broken, 0)
    assert got["no_ghost"] is False and got["counter_sanity"] is False
    assert SPEC["no_ghost"].fn(m, broken) and SPEC["counter_sanity"].fn(m, broken)
    hung = invariant_values(m, s._replace(hung="writing_check"), 0, ("no_collective_hang", "flags"))
    assert hung == {"no_collective_hang": False, "flags": True}
    assert SPEC["no_collective_hang"].fn(m, s._replace(hung="writing_check"))
    planned = s._replace(ranks=(rs._replace(closed=True, plan=(e,)),) + s.ranks[1:])
    assert invariant_values(m, planned, 0, ("release_plan",)) == {"release_plan": False}
    queued = s._replace(ranks=(rs._replace(relq=(0,)),) + s.ranks[1:])
    assert invariant_values(m, queued, 0, ("release_queue",)) == {"release_queue": False}
    twice = s._replace(ranks=(rs._replace(dups=(e, e)),) + s.ranks[1:])  # a registry entry twice (and wt: any)
    assert invariant_values(m, twice, 0, ("registry",)) == {"registry": False}
    skewed = s._replace(ranks=s.ranks + (rs._replace(mismatch=rs.mismatch + 1),), store=s.store * 2)  # a diverged 2nd rank
    assert invariant_values(m, skewed, 1, ("shared_queues",)) == {"shared_queues": False}
    ctx = concrete_ctx(m)
    assert value(ctx.space, STRENGTHENING["release_plan"].fn(ctx, lift(ctx, m, planned))) is False
    assert value(ctx.space, STRENGTHENING["release_queue"].fn(ctx, lift(ctx, m, queued))) is False
    assert value(ctx.space, STRENGTHENING["registry"].fn(ctx, lift(ctx, m, twice))) is False


def _with_nodes(s, r, rs, e, **fields):
    nodes = tuple(n._replace(**fields) if i == e else n for i, n in enumerate(rs.nodes))
    return s._replace(ranks=s.ranks[:r] + (rs._replace(nodes=nodes),) + s.ranks[r + 1:])


def _queued(name, field, cap=4000):
    """A reachable state of the model (breadth-first) whose rank 0 has an entry in
    ``field``'s queue, and that entry's end page."""
    m = model(name)
    s0 = m.init_states()[0]
    seen, todo = {s0}, [s0]
    while todo and len(seen) < cap:
        s = todo.pop(0)
        if getattr(s.ranks[0], field):
            return m, s, getattr(s.ranks[0], field)[-1][1]
        for _a, t in m.successors(s):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    pytest.fail(f"no {field} entry in {name}")


@pytest.mark.parametrize("name,field,broken", [
    ("wt-1r", "wq", dict(host=HOST_RESIDENT)),  # a D->H copy into a node no longer WRITING
    ("wt-1r", "lq", dict(dev=RESIDENT, lbp=False)),  # an H->D copy into a resident node
    ("wt-storage-1r", "sq", dict(host=ABSENT)),  # a backup reading a freed host copy
])
def test_no_use_after_free_notices_a_freed_target(name, field, broken):
    """A state whose queued copy's node lost what the copy needs: the unbounded
    no_use_after_free is violated as the spec's is; queue_pages (a consequence of the
    bounded queue invariants) is violated too, since the node is no longer the queue's."""
    m, s, e = _queued(name, field)
    rs = s.ranks[0]
    assert invariant_values(m, s, 0, ("no_use_after_free",)) == {"no_use_after_free": True}
    bad = _with_nodes(s, 0, rs, rs.owner[e], **broken)
    in_flight = {"wq": rs.wdone, "lq": rs.ldone, "sq": len(rs.sdone)}[field] < len(getattr(rs, field))
    assert bool(SPEC["no_use_after_free"].fn(m, bad)) == in_flight
    assert invariant_values(m, bad, 0, ("no_use_after_free",)) == {"no_use_after_free": not in_flight}
    assert hypothesis_values(m, bad, 0) == {"queue_pages": False}


def test_no_use_after_free_notices_a_read_into_freed_slots():
    """revoke-frees-in-flight: the spec's violation (a read in flight into freed host
    slots) is the unbounded invariant's too, on the explicit step that makes it."""
    m = model("variants/revoke-frees-in-flight")
    s0 = m.init_states()[0]
    seen, todo = {s0}, [s0]
    while todo:
        s = todo.pop(0)
        for a, t in m.successors(s):
            if SPEC["no_use_after_free"].fn(m, t):
                assert a.name == "prefetch_revoke" and admits(m, s, a, t, 0)
                assert invariant_values(m, t, 0, ("no_use_after_free",)) == {"no_use_after_free": False}
                return
            if t not in seen:
                seen.add(t)
                todo.append(t)
    pytest.fail("no violation reached")


@pytest.mark.parametrize("name", MODELS)
def test_unbounded_actions_admit_every_explicit_step(name):
    """Up to two explicit steps per covered action along random walks: each rank's part
    is a behaviour of the unbounded encoding, and the unbounded transition properties
    have the spec's values on it."""
    m, states = _states(name, seeds=(3, 4, 5), steps=40)
    seen = {}
    for s in states:
        for a in m.actions(s):
            if a.name not in COVERED_ACTIONS or seen.get(a.name, 0) >= 2:
                continue
            t = m.next_state(s, a)
            for r in range(m.cfg.ranks):
                assert admits(m, s, a, t, r), (a, r)
                _agrees(m, s, a, t, r, transition_values(m, s, a, t, r))
            seen[a.name] = seen.get(a.name, 0) + 1
    assert "insert" in seen and len(seen) >= 3, seen


def test_admits_notices_a_wrong_successor():
    m, states = _states("wt-1r", seeds=(3, 4, 5), steps=40)
    for s in states:
        for a in m.actions(s):
            if a.name == "evict":
                # the pre-state is not evict's successor when evict changes something
                t = m.next_state(s, a)
                if t != s:
                    assert not admits(m, s, a, s, 0)
                    return
    pytest.fail("no effective evict on the walk")


def test_consensus_obligations_off_the_drain_notice_a_release_a_mark_and_a_reopen():
    """Broken successors of a covered step (a write-through mirror released, a page
    marked durable, a fail-closed rank reopened with a plan): the unbounded transition
    properties say violated, as the spec and the bounded encoding do."""
    m, states = _states("wt-1r", seeds=(3, 4, 5), steps=40)
    for s in states:
        rs = s.ranks[0]
        e = next((i for i, n in enumerate(rs.nodes) if n is not None and n.dev == RESIDENT and n.host == HOST_RESIDENT
                  and n.href == 0), None)  # a resident mirror
        a = next((x for x in m.actions(s) if x.name in ("insert", "evict", "load_back")), None)
        if e is None or a is None:
            continue
        t = m.next_state(s, a)
        rt = t.ranks[0]
        if rt.nodes[e] is None or rt.nodes[e].dev != RESIDENT or rt.nodes[e].host != HOST_RESIDENT:
            continue
        dropped = t._replace(ranks=(rt._replace(nodes=tuple(
            n._replace(host=ABSENT) if i == e else n for i, n in enumerate(rt.nodes))),))
        vals = transition_values(m, s, a, dropped, 0)
        assert vals["release_after_consensus"] is False and vals["fail_closed_is_final"] is True
        assert _bounded_transition(m, "release_after_consensus", s, a, dropped) is False
        marked = t._replace(ranks=(rt._replace(durable=rt.durable | 1 << e),))
        if not rs.durable >> e & 1:
            assert transition_values(m, s, a, marked, 0)["durable_only_when_acked"] is False
            assert SPEC["durable_only_when_acked"].fn(m, s, a, marked)
        closed = s._replace(ranks=(rs._replace(closed=True),))
        reopened = t._replace(ranks=(rt._replace(closed=False),))
        assert transition_values(m, closed, a, reopened, 0)["fail_closed_is_final"] is False
        assert _bounded_transition(m, "fail_closed_is_final", closed, a, reopened) is False
        return
    pytest.fail("no covered step keeping a resident mirror on the walk")


# insert's and load_back's queue obligations are most of their cost (insert's: 25 of 41
# CPU-s); tests/proofs/test_proofs_queue_sched.py proves them (insert's -m slow), and so
# does the audit (`tiercheck prove --unbounded`). Every other obligation is proved here.
QUEUES_APART = {"insert": tuple(UQPROPS), "load_back": tuple(UQPROPS)}


@pytest.mark.parametrize("action", COVERED_ACTIONS)
def test_unbounded_obligations_prove_on_every_configuration(action):
    from tiercheck.proofs.epr_frame import READS
    from tiercheck.proofs.epr_planner import TARGET as PLANNER

    apart = QUEUES_APART.get(action, ())
    targets = [t for t in dict.fromkeys((*UPROPS, *READS, PLANNER)) if t not in apart]
    results = prove_action(action, targets=targets)
    assert results and all(r.status == "proved" and r.pages == "any" for r in results), results
    assert not {r.target for r in results} & set(apart)


@pytest.mark.parametrize("every_target", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_reclaim_demote_leaf_fails_release_safety_with_a_finite_cti(every_target):
    # by default the failing obligation alone; -m slow: evict's others still proved (~25 s more)
    targets = None if every_target else ["release_safety"]
    results = {r.target: r for r in prove_action("evict", targets, variants=frozenset({"reclaim-demote-leaf"}))}
    r = results["release_safety"]
    assert r.status == "failed" and r.cti is not None
    assert r.cti["forest"]["pages"] >= 2 and r.cti["pre"]["ranks"][0]["nodes"]
    assert all(x.status == "proved" for n, x in results.items() if n != "release_safety")
    assert len(results) > 1 if every_target else list(results) == ["release_safety"]


def test_prove_command_unbounded_reports_pages_per_obligation(tmp_path, capsys):
    import json

    from tiercheck.cli import main

    rc = main(["prove", "--unbounded", "--action", "load_dma_done", "--workers", "1", "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads((tmp_path / "proofs.json").read_text())
    pages = {(o["obligation"], o["pages"]) for o in data["obligations"]}
    assert ("tree_chain", "any") in pages and ("queues_bounded", "<=2") in pages
    assert ("slot_conservation", "any") in pages  # a frame obligation (proofs.epr_frame)
    assert "for any number of pages" in out and "| pages |" in (tmp_path / "proofs.md").read_text()


def _whole_unbounded_audit():
    from tiercheck.proofs.audit import run_audit
    from tiercheck.proofs.epr_obligations import BOUNDED_UNDER, covered

    audit = run_audit(unbounded=True)
    assert audit.failed == [] and audit.theorems_ok()
    n_any = sum(r.pages == "any" for r in audit.obligations)
    # insert's undecided ones: any pages with its own eviction off, bounded with it on
    from tiercheck.proofs.epr_sched_evict import UNDECIDED_ON

    bounded = lambda r: r.action in BOUNDED_UNDER and r.target in UNDECIDED_ON[r.action]
    assert n_any == sum(covered(r.target, r.action) and not bounded(r) for r in audit.obligations) > 100
    return audit


def test_whole_unbounded_audit_of_correct_spec():
    # with the stored unsat cores (proofs/cores.py), each of which decides its query
    audit = _whole_unbounded_audit()
    assert audit.queries > 1000 and audit.from_core == audit.queries, \
        "proofs/cores.json is stale: python benchmarks/prove_profile.py --write-cores"


@pytest.mark.slow
def test_whole_unbounded_audit_decides_every_query_whole_the_same():
    from tiercheck.proofs import cores

    cores.set_table({})  # `tiercheck prove --unbounded --no-stored-cores`
    try:
        audit = _whole_unbounded_audit()
    finally:
        cores.set_table(None)
    assert audit.queries > 1000 and audit.from_core == 0


# the steps whose page-sorted encoding moves pages between queue relations
QUEUE_STEPS = ("insert", "evict", "load_back", "write_dma_done", "writing_check", "load_dma_done", "loading_check",
               "storage_backup_done", "prefetch_io", "prefetch_read_fails", "prefetch_revoke",
               "check_prefetch_progress", "drain_storage_control_queues")


# wt-storage-1r and wb-storage-1r also run by default in test_proofs_queues.py
@pytest.mark.parametrize("name", [pytest.param("wt-storage-1r", marks=pytest.mark.slow),
                                  pytest.param("wb-storage-1r", marks=pytest.mark.slow), "wt-prefetch-revoke-1r",
                                  pytest.param("wt-prefetch-fail-1r", marks=pytest.mark.slow),
                                  pytest.param("variants/revoke-frees-in-flight", marks=pytest.mark.slow)])
def test_queue_steps_admitted(name, per_action=3, cap=600):
    """Breadth-first from the initial state: up to ``per_action`` explicit steps of each
    step that moves queue pages, where some queue is nonempty, are behaviours of the
    unbounded encoding (the queue relations compared page by page, proofs.epr_agreement
    same_view), with queue_pages holding before."""
    m = model(name)
    s0 = m.init_states()[0]
    seen, todo, done = {s0}, [s0], {}
    while todo and len(seen) < cap:
        s = todo.pop(0)
        busy = any(rs.wq or rs.lq or rs.sq or rs.pq for rs in s.ranks)
        for a, t in m.successors(s):
            if busy and a.name in QUEUE_STEPS and done.get(a.name, 0) < per_action and t != s:
                for r in range(m.cfg.ranks):
                    assert admits(m, s, a, t, r), (name, a, r)
                    assert hypothesis_values(m, s, r) == {"queue_pages": True}
                done[a.name] = done.get(a.name, 0) + 1
            if t not in seen:
                seen.add(t)
                todo.append(t)
    assert len(done) >= 5, done
