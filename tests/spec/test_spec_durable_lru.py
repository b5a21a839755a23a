"""Seed 000's bounded durable LRU (durable_capacity) and anti-churn age gate
(refresh_rounds) in the spec, and the release that must be committed before the round's
marks (durable-evicted-while-planned)."""

from __future__ import annotations

from spec_helpers import model, node, page, run

from tiercheck.spec.state import ABSENT, WRITING


def _stage(req):
    """Insert, D->H copy and ack, the whole H->L3 backup, one drain round (1 rank)."""
    return [("insert", {"req": req}), ("write_dma_done", {"rank": 0}), ("writing_check", {}),
            ("storage_backup_done", {"rank": 0, "pages": 1}), ("drain_storage_control_queues", {})]


def _model(**kw):
    return model(requests=((1,), (2,)), device_pages=2, host_pages=1, storage=True,
                 mirror_release=True, **kw)


def test_a_new_mark_evicts_the_least_recent_one_over_capacity():
    m = _model(durable_capacity=1)
    s = run(m, *_stage(0), ("drain_storage_control_queues", {}))  # marks 1, releases its mirror
    assert s.ranks[0].durable == 1 << page(m, 1) and node(m, s, 1).rel
    s = run(m, *_stage(1), state=s)
    rs = s.ranks[0]
    assert rs.durable == 1 << page(m, 2)  # 1's mark is gone: no longer a candidate
    assert rs.dlru == ((page(m, 2), 0),)


def test_unbounded_and_ungated_keeps_no_lru_state():
    m = _model()
    s = run(m, *_stage(0), ("drain_storage_control_queues", {}), *_stage(1))
    assert s.ranks[0].durable == 1 << page(m, 1) | 1 << page(m, 2) and s.ranks[0].dlru == ()


def _released_then_aged(m):
    """1's mirror released; then 2 staged and backed up: drain rounds age 1's mark."""
    return run(m, *_stage(0), ("drain_storage_control_queues", {}), *_stage(1),
               ("drain_storage_control_queues", {}))


def test_the_age_gate_restages_a_durable_node_once_its_marks_are_old():
    gated = _model(refresh_rounds=2)
    s = _released_then_aged(gated)
    assert dict(s.ranks[0].dlru)[page(gated, 1)] == 2  # capped at the gate
    t = run(gated, ("insert", {"req": 0}), state=s)
    assert node(gated, t, 1).host == WRITING  # refreshed: staged again
    never = _model()  # the anti-churn guard without a gate: never staged again
    t = run(never, ("insert", {"req": 0}), state=_released_then_aged(never))
    assert node(never, t, 1).host == ABSENT


def test_the_age_gate_holds_while_the_marks_are_young():
    m = _model(refresh_rounds=4)
    s = _released_then_aged(m)
    assert dict(s.ranks[0].dlru)[page(m, 1)] == 3  # three drain rounds since marked
    t = run(m, ("insert", {"req": 0}), state=s)
    assert node(m, t, 1).host == ABSENT


def test_an_idle_drain_round_ages_the_marks_up_to_the_gate():
    """The seed drains every scheduler iteration: with nothing queued a round still ages
    the marks, so the drain is enabled until every age reaches refresh_rounds."""
    m = _model(refresh_rounds=3)
    s = run(m, *_stage(0), ("drain_storage_control_queues", {}))  # marked, mirror released
    assert s.ranks[0].dlru == ((page(m, 1), 1),) and not s.ranks[0].sq and not s.ranks[0].plan
    s = run(m, ("drain_storage_control_queues", {}), ("drain_storage_control_queues", {}), state=s)
    assert s.ranks[0].dlru == ((page(m, 1), 3),)
    assert "drain_storage_control_queues" not in {a.name for a in m.actions(s)}  # a stutter now
