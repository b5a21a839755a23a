"""The CP load-back planner in the spec: strict tie-break over replicated state, and the
local-clock variant that breaks it."""

from __future__ import annotations

from spec_helpers import model, node, page, run

from tiercheck.spec.action import act
from tiercheck.spec.properties import planner_determinism
from tiercheck.spec.state import ABSENT, RESIDENT


def _two_resident_one_evicted(m):
    """1 is host-only; 2 and 3 are device-resident and backed: loading 1 needs a victim."""
    steps = [("insert", {"req": 0})]
    for r in range(m.cfg.ranks):
        steps.append(("write_dma_done", {"rank": r}))
    steps += [("writing_check", {}), ("evict", {"node": page(m, 1)}), ("insert", {"req": 1}), ("insert", {"req": 2})]
    for r in range(m.cfg.ranks):
        steps += [("write_dma_done", {"rank": r})] * 2
    steps.append(("writing_check", {}))
    return run(m, *steps)


def test_load_back_plans_its_evictions_with_a_replicated_tie_break():
    m = model(ranks=2, requests=((1,), (2,), (3,)), device_pages=2, host_pages=3, cp_planner=True)
    s = _two_resident_one_evicted(m)
    assert s.ranks[0].dev_free == 0
    # Rank 1 touches 2 locally: its clock differs, the plan must not.
    s = run(m, ("local_access", {"rank": 1, "node": page(m, 2)}), state=s)
    a = act("load_back", node=page(m, 1))
    t = m.next_state(s, a)
    for r in (0, 1):
        assert node(m, t, 2, rank=r).dev == ABSENT  # lowest end page wins the tie
        assert node(m, t, 3, rank=r).dev == RESIDENT
    assert planner_determinism(m, s, a, t) is None


def test_lru_orders_ties_by_the_replicated_lru_not_the_end_page():
    """Seed 004's score is (-gain, -credit, get_priority = the replicated LRU tuple, id):
    re-inserting 2 makes 3 the least recently used, so 3 goes although 2 ends lower."""
    for order, gone, kept in (("path", (2,), (3,)), ("lru", (3,), (2,))):
        m = model(requests=((1,), (2,), (3,)), device_pages=2, host_pages=3, cp_planner=True, victim_order=order)
        s = run(m, ("insert", {"req": 1}), state=_two_resident_one_evicted(m))
        t = m.next_state(s, act("load_back", node=page(m, 1)))
        assert node(m, t, *gone).dev == ABSENT and node(m, t, *kept).dev == RESIDENT, order


def test_local_clock_tie_break_diverges():
    m = model(ranks=2, requests=((1,), (2,), (3,)), device_pages=2, host_pages=3, cp_planner=True,
              variants={"planner-local-tiebreak"})
    s = _two_resident_one_evicted(m)
    s = run(m, ("local_access", {"rank": 0, "node": page(m, 2)}), ("local_access", {"rank": 1, "node": page(m, 3)}), state=s)
    a = act("load_back", node=page(m, 1))
    t = m.next_state(s, a)
    assert node(m, t, 3, rank=0).dev == ABSENT and node(m, t, 2, rank=1).dev == ABSENT
    assert "different victims" in planner_determinism(m, s, a, t)


def test_without_the_planner_load_back_needs_free_room():
    m = model(ranks=2, requests=((1,), (2,), (3,)), device_pages=2, host_pages=3)
    s = _two_resident_one_evicted(m)
    assert act("load_back", node=page(m, 1)) not in m.actions(s)
    assert not any(a.name == "local_access" for a in m.actions(s))


def _backup(m):
    return [("write_dma_done", {"rank": r}) for r in range(m.cfg.ranks)] + [("writing_check", {})]


def issue_example_state(m):
    """Issue 15's example: 4/5 inserted, backed up and evicted; then 1, 1/2 and 3 inserted
    and backed up: the device pool (3 pages) is full, everything has a host copy."""
    return run(m, ("insert", {"req": 3}), *_backup(m), ("evict", {"node": page(m, 4, 5)}),
               ("insert", {"req": 0}), *_backup(m), ("insert", {"req": 1}), *_backup(m),
               ("insert", {"req": 2}), *_backup(m))


def test_issue_example_plans_the_admitted_ancestor():
    """Seed 004 admits 1 once 1/2 is planned (ancestor admission) and its replicated order
    (the spec's end page) puts 1 before 3: load_back(4/5) evicts 1/2 and 1, not 1/2 and 3."""
    m = model(requests=((1,), (1, 2), (3,), (4, 5)), device_pages=3, host_pages=5, cp_planner=True)
    s = issue_example_state(m)
    assert s.ranks[0].dev_free == 0
    t = m.next_state(s, act("load_back", node=page(m, 4, 5)))
    assert [node(m, t, *k).dev for k in ((1,), (1, 2), (3,))] == [ABSENT, ABSENT, RESIDENT]


def lanes_state(m):
    """Two lanes of one page each: 4 (lane 0) backed and evicted; 1 (lane 0) and 1/2
    (lane 1) resident and backed."""
    return run(m, ("insert", {"req": 3}), *_backup(m), ("evict", {"node": page(m, 4)}),
               ("insert", {"req": 0}), *_backup(m), ("insert", {"req": 1}), *_backup(m))


def test_ancestor_unlock_credit_across_lanes():
    """Loading 4 lacks a lane-0 page. 1/2 frees only lane 1 (no gain) but unlocks 1, which
    is on lane 0: 1/2 is planned for that credit, then 1 is admitted and covers the lane."""
    m = model(ranks=2, requests=((1,), (1, 2), (1, 3), (4,)), device_pages=2, host_pages=4,
              cp_planner=True, cp_lanes=2)
    s = lanes_state(m)
    assert s.ranks[0].dev_free == 0
    a = act("load_back", node=page(m, 4))
    t = m.next_state(s, a)
    for r in (0, 1):
        assert node(m, t, 1, rank=r).dev == ABSENT and node(m, t, 1, 2, rank=r).dev == ABSENT
        assert node(m, t, 4, rank=r).dev != ABSENT
    assert planner_determinism(m, s, a, t) is None
