"""Making room in the host pool: evict_host, duplicate reclaim, agreed host allocation.

Victim order. HiCache pops victims by LRU priority, which is replicated across ranks. The
spec fixes one total order over replicated state (the node's end page id) for host-side
victims; device eviction victims are chosen freely by the ``evict`` action instead. The
reference implementation can be run with the same key order for conformance.
"""

from __future__ import annotations

from . import slots
from .memo import per_model
from .sync import tracks_digest
from .state import (
    ABSENT,
    HOST_RESIDENT,
    RESIDENT,
    RankState,
    is_device_leaf,
    is_host_leaf,
    live_nodes,
    node_len,
)
from .tree import free_node_host, is_duplicate, remove_nodes


def victim_key(m, rs: RankState):
    """The order host-side victims are taken in (smallest first): the end page id, or
    under victim_order = "lru" the position in the replicated LRU order. Variant
    lru-local-clock: the position in this rank's wall-clock order, which its own local
    touches move (seed 004: the base LRU strategy keys on per-rank last_access_time)."""
    if not m.cfg.lru:
        return lambda e: e
    order = rs.clock if m.cfg.has("lru-local-clock") else rs.lru
    pos = {e: i for i, e in enumerate(order)}
    return pos.__getitem__


def can_reclaim_duplicate(m, rs: RankState, end: int) -> bool:
    """_can_reclaim_full_host_duplicate: the live re-check at reclaim time."""
    n = rs.nodes[end]
    if n is None or not is_duplicate(rs, end) or n.href > 0:
        return False
    return not n.lbp or m.cfg.has("reclaim-during-loadback")


def reclaim_duplicates(m, rs: RankState, need: int):
    """_reclaim_full_host_duplicates (write_back, seed 001): returns (rank state, freed).

    Two passes over the registry in insertion order: the first spares evictable device
    leaves (about to be demoted: their host copy may soon be the only one), the second
    does not. Stale entries are dropped as they are met (lazy deregistration).
    """
    passes = (False,) if m.cfg.has("reclaim-demote-leaf") else (True, False)
    freed = 0
    for spare_leaves in passes:
        for end in rs.dups:
            if freed >= need:
                return rs, freed
            if not can_reclaim_duplicate(m, rs, end):
                if not is_duplicate(rs, end):
                    rs = rs._replace(dups=tuple(d for d in rs.dups if d != end))
                continue
            if spare_leaves and is_device_leaf(m.pages, rs, end):
                continue
            freed += node_len(m.pages, rs, end)
            rs = free_node_host(m, rs, end)
            rs = rs._replace(
                dups=tuple(d for d in rs.dups if d != end),
                digest=rs.digest + (end,) if tracks_digest(m.cfg) else (),
            )
    return rs, freed


@per_model
def evict_host(m, rs: RankState, need: int) -> RankState:
    """evict_host(num_tokens): free at least ``need`` host pages if it can.

    Under write_back with duplicate reclaim the redundant host copies go first
    (drive_host_eviction); then LRU host leaves: evicted, unlocked, unreferenced nodes
    without children, removed from the tree; a parent left childless becomes a leaf.
    """
    freed = 0
    if m.cfg.write_back and m.cfg.duplicate_reclaim:
        rs, freed = reclaim_duplicates(m, rs, need)
    while freed < need:
        leaves = [
            e
            for e in live_nodes(rs)
            if is_host_leaf(m.pages, rs, e) and rs.nodes[e].href == 0
        ]
        if not leaves:
            break
        victim = min(leaves, key=victim_key(m, rs))
        size = node_len(m.pages, rs, victim)
        freed += size
        rs = slots.give(m, rs, "h", m.pages.chain(rs.nodes[victim].start, victim))
        rs = remove_nodes(m, rs, (victim,))._replace(host_free=rs.host_free + size)
    return rs


def allocate_host(m, ranks, need, failing=frozenset(), agree=True, shortfall=False):
    """Host allocation for ``need`` pages on every rank, with evict_host as the fallback.

    ``need``: a number of pages, or one per rank (each rank asks for its own node's
    length: replicas that diverged may hold nodes of different lengths under one key).
    Returns (ranks, ok per rank); the caller takes the pages where ok. ``failing`` are the
    ranks whose pinned allocation fails this time (the alloc_asymmetry fault). In the fixed
    protocol the outcome is agreed (a MIN all-reduce of the local results) before and after
    the fallback eviction, which runs on every rank, so replicas stay identical. The
    partial-backup-leak variant lets each rank go its own way. ``shortfall`` (option
    evict_host_shortfall): the fallback asks evict_host for what is missing, not ``need``.
    """
    ranks = list(ranks)
    needs = list(need) if isinstance(need, (tuple, list)) else [need] * len(ranks)

    def local_ok(i):
        return i not in failing and ranks[i].host_free >= needs[i]

    def evict(i):
        rs = ranks[i]
        return evict_host(m, rs, max(0, needs[i] - rs.host_free) if shortfall else needs[i])

    if agree:
        if all(local_ok(i) for i in range(len(ranks))):
            return ranks, [True] * len(ranks)
        ranks = [evict(i) for i in range(len(ranks))]
        ok = all(local_ok(i) for i in range(len(ranks)))
        return ranks, [ok] * len(ranks)
    oks = []
    for i in range(len(ranks)):
        if not local_ok(i):
            ranks[i] = evict(i)
        oks.append(local_ok(i))
    return ranks, oks


def host_holders(m, rs: RankState) -> int:
    """Host pages held by nodes (for conservation checks)."""
    return sum(
        node_len(m.pages, rs, e)
        for e in live_nodes(rs)
        if rs.nodes[e].host != ABSENT
    )


def is_redundant_mirror(m, rs: RankState, end: int) -> bool:
    """Seed 000's release candidate: a mirror the storage tier makes redundant."""
    n = rs.nodes[end]
    if n is None or n.dev != RESIDENT or n.host != HOST_RESIDENT:
        return False
    if not all(rs.durable >> p & 1 for p in m.pages.chain(n.start, end)):
        return False
    if m.cfg.has("release-busy"):
        return True
    return n.lock == 0 and n.href == 0 and not n.lbp
