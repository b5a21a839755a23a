"""insert_evicts / load_back_evicts: the scheduler's LRU eviction (seed 004's
evict(num_tokens)) inside an insert or a load_back that lacks device room, and the
lru-evicts-locked-parent variant."""

from __future__ import annotations

from spec_helpers import model, node, page, run

from tiercheck.spec.action import act
from tiercheck.spec.state import ABSENT, RESIDENT

REQS = ((1,), (1, 2), (3, 4))


def _staged(m):
    """1 and 1/2 cached, both written to host (write_through)."""
    return run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}),
               ("insert", {"req": 1}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))


def test_without_the_option_an_insert_without_room_is_disabled():
    m = model(requests=REQS, device_pages=2, host_pages=3)
    assert act("insert", req=2) not in m.actions(_staged(m))


def test_insert_evicts_leaves_in_victim_order_until_it_fits():
    m = model(requests=REQS, device_pages=2, host_pages=4, insert_evicts=True)
    s = run(m, ("insert", {"req": 2}), state=_staged(m))
    # 1/2 first (the only leaf), then its parent 1: both demoted (host copies), then 3/4
    assert node(m, s, 1).dev == ABSENT and node(m, s, 1, 2).dev == ABSENT
    assert node(m, s, 3, 4).dev == RESIDENT and s.ranks[0].dev_free == 0


def test_an_insert_that_still_does_not_fit_only_evicts():
    m = model(requests=((1,), (2, 3, 4, 5)), device_pages=3, host_pages=3, insert_evicts=True)
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
    t = run(m, ("insert", {"req": 1}), state=s)  # 4 pages never fit: the step is the eviction alone
    assert node(m, t, 1).dev == ABSENT and t.ranks[0].nodes[page(m, 2, 3, 4, 5)] is None
    assert act("insert", req=1) not in m.actions(t)  # nothing left to evict: disabled


def test_the_insert_holds_its_matched_prefix():
    m = model(requests=((1,), (1, 2, 3)), device_pages=2, host_pages=3, insert_evicts=True)
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
    # 1/2/3 needs 2 pages, 1 is free; the only leaf, 1, is the request's own prefix: locked
    assert act("insert", req=1) not in m.actions(s)


def test_load_back_evicts_first_under_the_option():
    steps = [("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}),
             ("evict", {"node": 0})]
    for on in (False, True):
        m = model(requests=REQS, device_pages=2, host_pages=3, load_back_evicts=on)
        s = run(m, *steps, ("insert", {"req": 2}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
        lb = act("load_back", node=page(m, 1))
        assert (lb in m.actions(s)) == on
        if on:
            t = m.next_state(s, lb)
            assert node(m, t, 1).dev != ABSENT and node(m, t, 3, 4).dev == ABSENT


def test_lru_evicts_locked_parent_takes_a_node_under_its_write():
    kw = dict(requests=REQS, device_pages=2, host_pages=1, insert_evicts=True)
    steps = [("insert", {"req": 0}), ("insert", {"req": 1}), ("insert", {"req": 2})]
    s = run(model(**kw), *steps)
    assert node(model(**kw), s, 1).lock == 1  # the fixed LRU skips it: the insert does not fit
    m = model(variants={"lru-evicts-locked-parent"}, **kw)
    t = run(m, *steps)
    assert t.ranks[0].nodes[page(m, 1)] is None and t.ranks[0].wq  # its D->H copy is still queued


def test_release_safety_judges_a_reclaim_inside_the_insert_with_its_hold():
    """write_back + duplicate reclaim: insert(1/2) holds 1 while its eviction stages 4, whose
    host allocation reclaims 1's duplicate host copy. 1 was an evictable leaf before the step
    and 1/2 a duplicate after it, but inside the step 1 was locked and 1/2 evicted: the
    reclaim obeyed the two passes (the checker's trace on this model, 7 steps)."""
    from tiercheck.spec.properties import release_safety

    m = model(requests=((1, 2), (1, 3), (4,)), device_pages=2, host_pages=3, policy="write_back",
              duplicate_reclaim=True, storage=True, insert_evicts=True)
    s = run(m, ("insert", {"req": 0}), ("evict", {"node": page(m, 1, 2)}), ("insert", {"req": 1}),
            ("insert", {"req": 2}), ("storage_backup_done", {"rank": 0, "pages": 2}),
            ("drain_storage_control_queues", {}))
    a = act("insert", req=0)
    t = run(m, a, state=s)
    assert node(m, t, 1).host == ABSENT and node(m, t, 1).dev == RESIDENT  # reclaimed inside the step
    assert release_safety(m, s, a, t) is None
