"""Queue entries for any number of pages (proofs.epr_queues): the write, load and backup
queue invariants agree with the spec's lists and the bounded encodings on reachable
states, notice broken queues, every explicit step of a covered action is a behaviour of
the queue encoding (and a wrong successor is not), and the obligations are proved."""

import pytest

from tiercheck.proofs.agreement import concrete_ctx, lift
from tiercheck.proofs.epr_obligations import prove_action
from tiercheck.proofs.epr_queue_agreement import admits, values
from tiercheck.proofs.epr_queues import ACTIONS, UQPROPS
from tiercheck.proofs.formula import value
from tiercheck.proofs.strengthen import STRENGTHENING
from tiercheck.spec.state import ABSENT, HOST_RESIDENT, RESIDENT

from .proof_helpers import model

NAMES = ("write_queue", "load_queue", "backup_queue", "storage_acks", "queue_refs")


def _bfs(name, cap):
    m = model(name)
    s0 = m.init_states()[0]
    seen, todo = {s0}, [s0]
    while todo and len(seen) < cap:
        s = todo.pop(0)
        yield m, s
        for _a, t in m.successors(s):
            if t not in seen:
                seen.add(t)
                todo.append(t)


def _bounded(m, s, name):
    ctx = concrete_ctx(m)
    return value(ctx.space, STRENGTHENING[name].fn(ctx, lift(ctx, m, s)))


@pytest.mark.parametrize("name", ["wt-storage-1r", "wb-storage-1r", pytest.param("wt-1r", marks=pytest.mark.slow)])
def test_queue_invariants_hold_on_reachable_states(name):
    busy = 0
    for i, (m, s) in enumerate(_bfs(name, 300)):
        if i % 5 or not any(rs.wq or rs.lq or rs.sq for rs in s.ranks):
            continue
        busy += 1
        for r in range(m.cfg.ranks):
            assert values(m, s, r) == dict.fromkeys(NAMES, True), s
    assert busy >= 5


def _queued(name, field):
    for m, s in _bfs(name, 4000):
        if getattr(s.ranks[0], field):
            return m, s
    pytest.fail(f"no {field} entry in {name}")


def _node(rs, field):
    return rs.owner[getattr(rs, field)[-1][1]]


def _set_node(s, rs, e, **fields):
    nodes = tuple(n._replace(**fields) if i == e else n for i, n in enumerate(rs.nodes))
    return s._replace(ranks=(rs._replace(nodes=nodes),) + s.ranks[1:])


@pytest.mark.parametrize("name,field,target,broken", [
    ("wt-1r", "wq", "write_queue", dict(host=HOST_RESIDENT)),  # a D->H copy into a node no longer WRITING
    ("wt-1r", "lq", "load_queue", dict(dev=RESIDENT, lbp=False)),  # an H->D copy into a resident node
    ("wt-storage-1r", "sq", "backup_queue", dict(host=ABSENT)),  # a backup of a dropped host copy
])
def test_queue_invariants_notice_a_queued_node_that_changed(name, field, target, broken):
    m, s = _queued(name, field)
    rs = s.ranks[0]
    assert values(m, s, 0)[target] is True
    bad = _set_node(s, rs, _node(rs, field), **broken)
    assert values(m, bad, 0)[target] is False
    assert _bounded(m, bad, target) is False


@pytest.mark.parametrize("field,target,done", [("wq", "write_queue", "wdone"), ("lq", "load_queue", "ldone")])
def test_queue_invariants_notice_overlap_and_a_done_count_past_the_end(field, target, done):
    m, s = _queued("wt-1r", field)
    rs = s.ranks[0]
    twice = s._replace(ranks=(rs._replace(**{field: getattr(rs, field) + getattr(rs, field)[-1:]}),) + s.ranks[1:])
    assert values(m, twice, 0)[target] is False and _bounded(m, twice, target) is False
    past = s._replace(ranks=(rs._replace(**{done: len(getattr(rs, field)) + 1}),) + s.ranks[1:])
    assert values(m, past, 0)[target] is False and _bounded(m, past, target) is False


def test_storage_acks_notices_a_report_that_is_not_what_was_stored():
    m = model("wt-storage-1r")
    for _m, s in _bfs("wt-storage-1r", 4000):
        rs = s.ranks[0]
        if rs.sdone and rs.sdone[0].actual > 0:
            break
    else:
        pytest.fail("no acked backup")
    assert values(m, s, 0)["storage_acks"] is True
    ack = rs.sdone[0]
    bad = s._replace(ranks=(rs._replace(sdone=(ack._replace(actual=ack.actual - 1),) + rs.sdone[1:]),) + s.ranks[1:])
    assert values(m, bad, 0)["storage_acks"] is False and _bounded(m, bad, "storage_acks") is False
    skip = s._replace(ranks=(rs._replace(sdone=(ack._replace(reported=-1, actual=-1),) + rs.sdone[1:]),) + s.ranks[1:])
    assert values(m, skip, 0)["storage_acks"] is False  # a writer's ack is never SKIP


def test_queue_refs_notices_an_unlocked_writing_node():
    m, s = _queued("wt-1r", "wq")
    rs = s.ranks[0]
    bad = _set_node(s, rs, _node(rs, "wq"), lock=0)
    assert values(m, bad, 0)["queue_refs"] is False
    assert _bounded(m, bad, "lock_accounting") is False


@pytest.mark.parametrize("name", ["wt-storage-1r", "wb-storage-1r",
                                  pytest.param("wt-prefetch-revoke-1r", marks=pytest.mark.slow),
                                  pytest.param("wt-mirror-1r", marks=pytest.mark.slow)])
def test_queue_steps_admitted(name, per_action=3, cap=600):
    """Breadth-first: up to ``per_action`` explicit steps of each covered action that
    change something, where some queue is nonempty, are behaviours of the queue encoding."""
    done = {}
    for m, s in _bfs(name, cap):
        if not any(rs.wq or rs.lq or rs.sq for rs in s.ranks):
            continue
        for a, t in m.successors(s):
            if a.name in ACTIONS and done.get(a.name, 0) < per_action and t != s:
                for r in range(m.cfg.ranks):
                    assert admits(m, s, a, t, r), (name, a, r)
                done[a.name] = done.get(a.name, 0) + 1
    assert len(done) >= 4, done


def test_queue_admits_notices_a_wrong_successor():
    """A D->H copy that finishes without leaving the unfinished part, and a commit that
    keeps its committed entry, are not behaviours of the encoding."""
    checked = set()
    for m, s in _bfs("wt-storage-1r", 600):
        for a, t in m.successors(s):
            rt = t.ranks[0]
            if a.name == "write_dma_done" and "dma" not in checked:
                assert admits(m, s, a, t, 0)
                assert not admits(m, s, a, s, 0)
                checked.add("dma")
            if a.name == "writing_check" and len(rt.wq) < len(s.ranks[0].wq) and "commit" not in checked:
                assert admits(m, s, a, t, 0)
                kept = t._replace(ranks=(rt._replace(wq=s.ranks[0].wq[:1] + rt.wq, wdone=rt.wdone + 1),))
                assert not admits(m, s, a, kept, 0)
                checked.add("commit")
        if len(checked) == 2:
            return
    pytest.fail(f"only {checked} reached")


def test_queue_obligations_proved_for_any_pages():
    from tiercheck.proofs.epr_queue_sched import ACTIONS as SCHED  # tests/proofs/test_proofs_queue_sched.py

    for action in (a for a in ACTIONS if a not in SCHED):
        results = prove_action(action, targets=list(UQPROPS))
        assert results and all(r.status == "proved" and r.pages == "any" for r in results), results


@pytest.mark.parametrize("variant,action,targets", [
    # a busy mirror released: its backup reads a freed host copy (bounded: the same three fail);
    # backup_queue's CTI (its queue entries) is the costly search (-m slow: 60-90 CPU-s), the
    # other two take 3 s
    ("release-busy", "drain_storage_control_queues", ("no_use_after_free", "release_safety")),
    pytest.param("release-busy", "drain_storage_control_queues", ("backup_queue",), marks=pytest.mark.slow),
    # a host-resident subtree under a backup deleted with the evicted leaf (-m slow: 50-60 s)
    pytest.param("orphan-host-subtree", "evict", ("backup_queue",), marks=pytest.mark.slow),
    # the ack reports the whole batch although only a prefix was stored (-m slow: 50 s)
    pytest.param("failed-batch-acked", "storage_backup_done", ("storage_acks",), marks=pytest.mark.slow),
])
def test_variants_fail_the_moved_obligations_for_any_pages_with_a_cti(variant, action, targets):
    results = {r.target: r for r in prove_action(action, targets=list(targets), variants=frozenset({variant}))}
    for t in targets:
        r = results[t]
        assert r.status == "failed" and r.pages == "any" and r.cti is not None, (t, r.status)
        assert r.cti["post"]["ranks"] and r.cti["forest"]["pages"] >= 1
    if "backup_queue" in targets:
        entries = results["backup_queue"].cti["entries"]
        assert entries["pre"]["sq"], entries  # the backup the step breaks


def test_queues_bounded_is_reported_not_applicable_for_any_pages():
    """The bounded encoding's list capacity has no counterpart for any pages: the
    unbounded audit still proves it bounded, never for any pages, and says why."""
    from tiercheck.proofs.audit import run_audit, summary_line, to_json

    audit = run_audit(workers=1, actions=["load_dma_done"], unbounded=True)
    rows = [r for r in audit.obligations if r.target == "queues_bounded"]
    assert rows and all(r.status == "proved" and r.pages != "any" for r in rows)
    line = summary_line(audit)
    assert "1 of them queues_bounded: not applicable for any pages (the bounded encoding's lists" in line
    assert "queues_bounded" in to_json(audit)["bounds"]["not_applicable_for_any_pages"]
