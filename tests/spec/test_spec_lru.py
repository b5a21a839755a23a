"""victim_order = "lru": the spec's replicated LRU order (touch order of the replicated
steps, a split's upper half tied with the lower half and placed first), evict_host taking
the least recently used host leaf, and the rank's wall-clock order that only the
lru-local-clock variant reads."""

from __future__ import annotations

from spec_helpers import model, page, run


def test_touches_order_the_lru_and_a_split_ties_upper_before_lower():
    m = model(requests=((1, 2), (1, 3), (4,)), device_pages=5, victim_order="lru")
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 2}))
    assert s.ranks[0].lru == (page(m, 1, 2), page(m, 4))
    s = run(m, ("insert", {"req": 1}), state=s)  # splits 1/2 at 1, touches 1 then 1/3
    assert s.ranks[0].lru == (page(m, 1, 2), page(m, 4), page(m, 1), page(m, 1, 3))
    assert s.ranks[0].clock == s.ranks[0].lru  # no local touch: the wall clock agrees
    m_path = model(requests=((1, 2), (1, 3), (4,)), device_pages=5)
    assert run(m_path, ("insert", {"req": 0})).ranks[0].lru == ()  # page order: nothing tracked


def test_evict_host_takes_the_least_recently_used_leaf():
    steps = [("insert", {"req": 0}), ("insert", {"req": 1}), ("write_dma_done", {"rank": 0}),
             ("write_dma_done", {"rank": 0}), ("writing_check", {})]
    for order, kept in (("path", (2,)), ("lru", (2,))):
        m = model(requests=((2,), (1,), (3,)), device_pages=2, host_pages=2, victim_order=order)
        s = run(m, *steps, ("evict", {"node": page(m, 2)}), ("evict", {"node": page(m, 1)}))
        s = run(m, ("insert", {"req": 2}), state=s)
        survivors = {m.pages.paths[e] for e in range(m.pages.count) if s.ranks[0].nodes[e] is not None}
        # page order evicts 1 (lower id); LRU evicts 2 (inserted first, touched least recently)
        assert survivors == ({(1,), (3,)} if order == "lru" else {kept, (3,)})
