"""Seed 000's durable LRU: bounded by ``durable_capacity`` pages (capacity eviction drops
the least recently marked page) and aged in drain rounds for the anti-churn gate
(``refresh_rounds``: a fully durable node is not staged again until its marks are that
many rounds old, so storage-side eviction is eventually refreshed; ``_REFRESH_ROUNDS``).

The bitmask ``durable`` says which pages are marked. ``dlru`` holds (page, age) least
recently marked first, ages capped at ``refresh_rounds``; it is kept only when the LRU is
bounded or aged, so the unbounded, ungated default has the state it always had.
"""

from __future__ import annotations

from .state import node_pages


def tracks_lru(cfg) -> bool:
    return cfg.durable_capacity > 0 or cfg.refresh_rounds > 0


def age_round(m, rs):
    """A drain round passes: every mark is one round older (capped at refresh_rounds)."""
    cap = m.cfg.refresh_rounds
    if not rs.dlru or cap == 0:
        return rs
    return rs._replace(dlru=tuple((p, min(a + 1, cap)) for p, a in rs.dlru))


def ageing(m, rs) -> bool:
    """Some mark is younger than the gate: an idle drain round still changes the state
    (the seed's drain runs every scheduler iteration, queues empty or not)."""
    cap = m.cfg.refresh_rounds
    return cap > 0 and any(a < cap for _, a in rs.dlru)


def mark(m, rs, p: int):
    """Mark page ``p`` durable (most recent, age 0); over capacity, the least recently
    marked pages lose their marks (losing a mark only removes a release candidate)."""
    durable = rs.durable | 1 << p
    if not tracks_lru(m.cfg):
        return rs._replace(durable=durable)
    lru = tuple(x for x in rs.dlru if x[0] != p) + ((p, 0),)
    cap = m.cfg.durable_capacity
    while cap and len(lru) > cap:
        durable &= ~(1 << lru[0][0])
        lru = lru[1:]
    return rs._replace(durable=durable, dlru=lru)


def revoke(rs, pages):
    """Marks of pages that left the tree."""
    if not rs.dlru:
        return rs
    gone = set(pages)
    return rs._replace(dlru=tuple(x for x in rs.dlru if x[0] not in gone))


def fresh(m, rs, end: int) -> bool:
    """Every mark of the node is younger than refresh_rounds (always, without the gate)."""
    cap = m.cfg.refresh_rounds
    if cap == 0:
        return True
    age = dict(rs.dlru)
    return all(age.get(p, cap) < cap for p in node_pages(m.pages, rs, end))
