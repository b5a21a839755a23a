"""Slot identities (Config ``slots``): which device and host slot holds each page.

Without it the pools are free-page counters (``dev_free``, ``host_free``), which keep
every verdict but cannot tell one slot from another: a slot handed to two owners, freed
while still owned, or lost by a wrong slice balances the counters. With it each rank also
records, per page, the slot its device copy and its host copy occupy (``dslot``,
``hslot``; -1 for none), the slots a prefetch reserved and the release queue holds
(``pslots``, ``rslots``, aligned with ``pq`` and ``relq``), and each pool's free slots as
a set (``dfree``, ``hfree`` bitmasks). Allocation takes the lowest free slots, assigned
to the pages in path order, so the state does not depend on the order frees happened in
(the reference implementation allocates the same way in conformance runs). The counters
stay as they are; a double free shows as a counter above the free set's size.
"""

from __future__ import annotations

from typing import Tuple


def _lowest(mask: int, n: int) -> Tuple[Tuple[int, ...], int]:
    out = []
    while len(out) < n and mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return tuple(out), mask


def take(m, rs, pool: str, pages) -> "RankState":  # noqa: F821
    """Give ``pages`` (in order) the lowest free slots of ``pool`` ("d" or "h")."""
    if not m.cfg.slots:
        return rs
    free = rs.dfree if pool == "d" else rs.hfree
    got, free = _lowest(free, len(pages))
    owner = list(rs.dslot if pool == "d" else rs.hslot)
    for p, s in zip(pages, got):
        owner[p] = s
    if pool == "d":
        return rs._replace(dslot=tuple(owner), dfree=free)
    return rs._replace(hslot=tuple(owner), hfree=free)


def give(m, rs, pool: str, pages) -> "RankState":  # noqa: F821
    """Return the slots of ``pages`` to ``pool``'s free set."""
    if not m.cfg.slots:
        return rs
    free = rs.dfree if pool == "d" else rs.hfree
    owner = list(rs.dslot if pool == "d" else rs.hslot)
    for p in pages:
        if owner[p] >= 0:
            free |= 1 << owner[p]
        owner[p] = -1
    if pool == "d":
        return rs._replace(dslot=tuple(owner), dfree=free)
    return rs._replace(hslot=tuple(owner), hfree=free)


def reserve(m, rs, n: int):
    """``n`` host slots for a holder that is not a node (a prefetch): (rank state, slots)."""
    if not m.cfg.slots:
        return rs, ()
    got, free = _lowest(rs.hfree, n)
    return rs._replace(hfree=free), got


def release(m, rs, slots) -> "RankState":  # noqa: F821
    if not m.cfg.slots:
        return rs
    free = rs.hfree
    for s in slots:
        free |= 1 << s
    return rs._replace(hfree=free)


def adopt(m, rs, pages, slots) -> "RankState":  # noqa: F821
    """Reserved host slots become the host copies of ``pages`` (a prefetch inserted)."""
    if not m.cfg.slots:
        return rs
    owner = list(rs.hslot)
    for p, s in zip(pages, slots):
        owner[p] = s
    return rs._replace(hslot=tuple(owner))


def split_slots(m, rs, lower_pages, upper_last: int) -> "RankState":  # noqa: F821
    """Variant split-slice-off-by-one: the lower half's device slots are sliced one page
    early (value[k-1:-1] instead of value[k:]): its first page takes the upper half's last
    slot, and its own last slot is owned by nobody."""
    if not m.cfg.slots:
        return rs
    owner = list(rs.dslot)
    old = [owner[upper_last]] + [owner[p] for p in lower_pages]
    for p, s in zip(lower_pages, old):
        owner[p] = s
    return rs._replace(dslot=tuple(owner))
