"""Slot identities (Config slots): lowest-first allocation in page order, splits keep each
page's slot, and slot_ownership catches what balanced counters hide (a slot with two
owners, a leaked slot) and a double free (a counter above the free set)."""

from __future__ import annotations

from spec_helpers import model, page, run

from tiercheck.spec.properties import slot_conservation, slot_ownership


def test_allocation_takes_the_lowest_slots_and_splits_keep_them():
    m = model(requests=((1, 2, 3), (1, 4)), device_pages=4, host_pages=1, slots=True)
    s = run(m, ("insert", {"req": 0}))
    rs = s.ranks[0]
    assert [rs.dslot[page(m, *p)] for p in ((1,), (1, 2), (1, 2, 3))] == [0, 1, 2]
    s = run(m, ("insert", {"req": 1}), state=s)
    rs = s.ranks[0]
    assert rs.dslot[page(m, 1)] == 0 and rs.dslot[page(m, 1, 2)] == 1 and rs.dslot[page(m, 1, 4)] == 3
    assert slot_ownership(m, s) is None
    assert model(requests=((1,),)).init_states()[0].ranks[0].dslot == ()  # off: no identities


def test_an_off_by_one_split_balances_the_counters_but_not_the_owners():
    m = model(requests=((1, 2), (1, 3)), device_pages=3, host_pages=1, slots=True,
              variants={"split-slice-off-by-one"})
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 1}))
    assert slot_conservation(m, s) is None
    assert "device slot 0 has two owners: page 1 and page 1/2" in slot_ownership(m, s)


def test_a_double_free_is_a_counter_above_the_free_set():
    m = model(requests=((1,),), device_pages=2, host_pages=2, slots=True)
    s = m.init_states()[0]
    rs = s.ranks[0]._replace(host_free=3)
    assert "a double free" in slot_ownership(m, s._replace(ranks=(rs,)))
    rs = s.ranks[0]._replace(hfree=1)  # slot 1 neither free nor owned
    assert "owned by nobody (leak)" in slot_ownership(m, s._replace(ranks=(rs,)))
