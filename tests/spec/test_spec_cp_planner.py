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
