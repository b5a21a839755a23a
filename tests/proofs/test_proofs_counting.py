"""Counting over the page sort (proofs/epr_counting.py): slot_conservation for forests of
any size. Its page-sorted form has the spec's value on reachable and broken states, every
explicit step of a counted action is a behaviour of its encoding with the spec's counters
(and a successor with a wrong counter is not), the obligations are proved, and the
variant that leaks host pages fails with a concrete counterexample."""

import pytest

from tiercheck.proofs.epr_agreement import admits, invariant_values
from tiercheck.proofs.epr_counting import COUNTED
from tiercheck.proofs.epr_obligations import covered, prove_action
from tiercheck.spec.properties import BY_NAME as SPEC

from .proof_helpers import model, walk


def _host_held(rank) -> int:
    """Host pages held by a rendered rank's nodes (a node's pages: its start's page
    through its end's, page names '/'-separated)."""
    depth = lambda name: len(name.split("/"))
    return sum(depth(e) - depth(x["start"]) + 1 for e, x in rank["nodes"].items() if x["host"] != "absent")


def _with_rank(s, r, **fields):
    return s._replace(ranks=s.ranks[:r] + (s.ranks[r]._replace(**fields),) + s.ranks[r + 1:])


@pytest.mark.parametrize("name", ["wt-1r", "wt-prefetch-1r", pytest.param("wb-reclaim-2r", marks=pytest.mark.slow)])
def test_slot_conservation_has_the_spec_value_on_reachable_and_broken_states(name):
    m = model(name)
    states = [s for seed in (1, 2) for s in walk(m, seed, 30)[::5]]
    for s in states:
        for r in range(m.cfg.ranks):
            assert invariant_values(m, s, r, ("slot_conservation",)) == {"slot_conservation": True}, s
            rs = s.ranks[r]
            for broken in (_with_rank(s, r, dev_free=rs.dev_free + 1), _with_rank(s, r, host_free=rs.host_free - 1)):
                assert SPEC["slot_conservation"].fn(m, broken)
                assert invariant_values(m, broken, r, ("slot_conservation",)) == {"slot_conservation": False}


def _steps(name, per_action=2, cap=800):
    """Explicit steps of counted actions, breadth-first: up to ``per_action`` of each,
    those that move a counter first."""
    m = model(name)
    s0 = m.init_states()[0]
    seen, todo, moving, still = {s0}, [s0], {}, {}
    while todo and len(seen) < cap:
        s = todo.pop(0)
        for a, t in m.successors(s):
            if a.name in COUNTED:
                moves = any((x.dev_free, x.host_free) != (y.dev_free, y.host_free) for x, y in zip(s.ranks, t.ranks))
                bucket = (moving if moves else still).setdefault(a.name, [])
                if len(bucket) < per_action:
                    bucket.append((s, a, t))
            if t not in seen:
                seen.add(t)
                todo.append(t)
    out = []
    for n in set(moving) | set(still):
        out += (moving.get(n, []) + still.get(n, []))[:per_action]
    return m, out


@pytest.mark.parametrize("name", ["wt-1r", "wt-prefetch-1r", "request-locks-1r", "variants/orphan-host-subtree",
                                  pytest.param("wt-prefetch-revoke-1r", marks=pytest.mark.slow),
                                  pytest.param("variants/revoke-frees-in-flight", marks=pytest.mark.slow),
                                  pytest.param("wb-reclaim-2r", marks=pytest.mark.slow)])
def test_counted_steps_are_admitted_with_the_spec_counters(name):
    """Each rank's part of a counted step is a behaviour of the encoding, counters
    included (epr_agreement.same_view compares them); with a counter one off it is not."""
    m, steps = _steps(name)
    assert steps
    for s, a, t in steps:
        for r in range(m.cfg.ranks):
            assert admits(m, s, a, t, r), (a, r)
            rt = t.ranks[r]
            assert not admits(m, s, a, _with_rank(t, r, dev_free=rt.dev_free + 1), r), (a, r)
            assert not admits(m, s, a, _with_rank(t, r, host_free=rt.host_free + 1), r), (a, r)


def test_orphan_host_subtree_step_is_admitted_and_noticed():
    """The variant's evict leaks host pages: the explicit step that breaks the spec's
    slot_conservation is a behaviour of the encoding, and the page-sorted
    slot_conservation is false after it."""
    m = model("variants/orphan-host-subtree")
    s0 = m.init_states()[0]
    seen, todo = {s0}, [s0]
    while todo:
        s = todo.pop(0)
        for a, t in m.successors(s):
            if SPEC["slot_conservation"].fn(m, t):
                assert a.name == "evict" and admits(m, s, a, t, 0)
                assert invariant_values(m, t, 0, ("slot_conservation",)) == {"slot_conservation": False}
                return
            if t not in seen:
                seen.add(t)
                todo.append(t)
    pytest.fail("no violation reached")


def test_counting_obligations_are_proved_for_any_number_of_pages():
    from tiercheck.proofs.epr_locks import ACTIONS

    for target, actions in (("slot_conservation", COUNTED), ("lock_accounting", ACTIONS)):
        for action in actions:
            assert covered(target, action)
            (r,) = prove_action(action, [target])
            assert (r.status, r.pages) == ("proved", "any"), (target, action)


def test_orphan_host_subtree_fails_slot_conservation_with_a_concrete_cti():
    """The counterexample is a finite forest with every set size exact: the evicted leaf
    has a host-only node below it, pruned with it, whose host pages are not given back."""
    (r,) = prove_action("evict", ["slot_conservation"], frozenset({"orphan-host-subtree"}))
    assert r.status == "failed" and r.cti["forest"]["pages"] >= 2
    pre, post = (r.cti[w]["ranks"][0] for w in ("pre", "post"))
    assert [n for n, x in pre["nodes"].items() if n not in post["nodes"] and x["host"] == "resident"]
    # the host pages held fell by more than host_free rose (pq and relq are carried)
    assert _host_held(pre) - _host_held(post) > post["host_free"] - pre["host_free"]
    assert [x.status for x in prove_action("evict", ["slot_conservation"])] == ["proved"]


@pytest.mark.parametrize("name,actions", [("request-locks-1r", ("lock_request", "unlock_request")),
                                          ("wt-1r", ("loading_check",))])
def test_lock_steps_follow_the_lock_counts(name, actions):
    """lock_request / unlock_request change lock_ref on the locked node's path to the root
    by one, loading_check once per acked load at or below a node; the encoding follows it
    (counter_sanity is proved there for any number of pages): each explicit step that
    changes a count is admitted, the same step with a count one off is not."""
    m, steps = _steps(name, per_action=6)
    checked = set()
    for s, a, t in steps:
        if a.name not in actions or t.halted:
            continue
        rs, rt = s.ranks[0], t.ranks[0]
        changed = [e for e, n in enumerate(rt.nodes)  # (a split's upper half: its old node's count)
                   if n is not None and rs.owner[e] >= 0 and n.lock != rs.nodes[rs.owner[e]].lock]
        if not changed:
            continue
        assert admits(m, s, a, t, 0), a
        e = changed[0]
        nodes = tuple(n._replace(lock=n.lock + 1) if i == e else n for i, n in enumerate(rt.nodes))
        assert not admits(m, s, a, _with_rank(t, 0, nodes=nodes), 0), a
        checked.add(a.name)
    assert checked == set(actions)
    for action in checked:
        assert [r.status for r in prove_action(action, ["counter_sanity"])] == ["proved"]


@pytest.mark.parametrize("name", ["request-locks-1r", "wt-1r"])
def test_lock_accounting_has_the_bounded_value_on_reachable_and_broken_states(name):
    """The page-sorted lock_accounting (epr_locks: counts of anchors and running requests
    at or below a node, as sizes) holds on reachable states and is false, as the bounded
    one is, with a live node's lock one off or a running request's node gone."""
    from tiercheck.proofs.agreement import concrete_ctx, lift
    from tiercheck.proofs.formula import value
    from tiercheck.proofs.strengthen import STRENGTHENING

    m = model(name)
    ctx = concrete_ctx(m)
    bounded = lambda s: value(ctx.space, STRENGTHENING["lock_accounting"].fn(ctx, lift(ctx, m, s)))
    states = [s for seed in (1, 2, 3) for s in walk(m, seed, 30)[::3]]
    broken_seen = 0
    for s in states:
        rs = s.ranks[0]
        assert invariant_values(m, s, 0, ("lock_accounting",)) == {"lock_accounting": True}, s
        live = [e for e, n in enumerate(rs.nodes) if n is not None]
        if not live:
            continue
        e = live[-1]
        off = _with_rank(s, 0, nodes=tuple(n._replace(lock=n.lock + 1) if i == e else n for i, n in enumerate(rs.nodes)))
        assert bounded(off) is False
        assert invariant_values(m, off, 0, ("lock_accounting",)) == {"lock_accounting": False}
        dead = [p for p, n in enumerate(rs.nodes) if n is None]
        for req, _node in rs.running[:1]:
            if dead:  # the request's lock names a page that is no live node
                gone = _with_rank(s, 0, running=tuple((q, dead[0] if q == req else x) for q, x in rs.running))
                assert bounded(gone) is False
                assert invariant_values(m, gone, 0, ("lock_accounting",)) == {"lock_accounting": False}
        broken_seen += 1
    assert broken_seen
