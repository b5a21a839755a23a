"""spec/host_eviction.py: evict_host, duplicate reclaim, agreed host allocation."""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT, RESIDENT
from ..state import RV
from ..sym import SymList, and_, const, eq, ite, ne, not_, or_, sel
from .tree import (
    all_durable,
    free_node_host,
    is_device_leaf_sym,
    is_duplicate,
    is_host_leaf,
    live,
    node_len,
    remove_nodes,
)


def can_reclaim_duplicate(ctx, rv: RV, end):
    """_can_reclaim_full_host_duplicate: the live re-check at reclaim time."""
    ok = and_(live(rv, end), is_duplicate(ctx, rv, end), not_(sel(rv.href, end) > 0))
    if ctx.cfg.has("reclaim-during-loadback"):
        return ok
    return and_(ok, not_(sel(rv.lbp, end)))


def reclaim_duplicates(ctx, rv: RV, need, active=True):
    """_reclaim_full_host_duplicates: (rank view, pages freed). Two passes over the
    registry snapshot of each pass; stale entries are dropped as they are met."""
    cfg = ctx.cfg
    tracks = cfg.tracks_digest(ctx.multi())
    passes = (False,) if cfg.has("reclaim-demote-leaf") else (True, False)
    freed = const(0)
    for spare_leaves in passes:
        snap = rv.dups
        for j in range(snap.cap):
            end = snap.items[j][0]
            step = and_(active, snap.valid(j), freed < need)
            can = can_reclaim_duplicate(ctx, rv, end)
            stale = and_(step, not_(can), not_(is_duplicate(ctx, rv, end)))
            rv = rv._replace(dups=_drop_item(rv.dups, end, stale))
            take = and_(step, can)
            if spare_leaves:
                take = and_(take, not_(is_device_leaf_sym(ctx, rv, end)))
            freed = ite(take, freed + node_len(ctx, rv, end), freed)
            rv = free_node_host(ctx, rv, end, take)
            dups = _drop_item(rv.dups, end, take)
            digest = rv.digest.append(end, and_(take, tracks))
            digest = _clear(digest, and_(take, not_(tracks)))
            rv = rv._replace(dups=dups, digest=digest)
    return rv, freed


def _drop_item(lst: SymList, item, cond) -> SymList:
    filtered = lst.filter(lambda it: ne(it[0], item))
    return SymList(
        lst.cap, ite(cond, filtered.n, lst.n),
        [ite(cond, a, b) for a, b in zip(filtered.items, lst.items)], lst.overflow,
    )


def _clear(lst: SymList, cond) -> SymList:
    return SymList(lst.cap, ite(cond, 0, lst.n), lst.items, lst.overflow)


def evict_host(ctx, rv: RV, need, active=True) -> RV:
    """evict_host(num_tokens): duplicates first (write_back + reclaim), then LRU host
    leaves (lowest end page first) until ``need`` pages are freed or none is left."""
    cfg = ctx.cfg
    freed = const(0)
    if not _off(and_(cfg.wb, cfg.dupr)):
        rv2, freed2 = reclaim_duplicates(ctx, rv, need, and_(active, cfg.wb, cfg.dupr))
        rv = rv2
        freed = ite(and_(active, cfg.wb, cfg.dupr), freed2, freed)
    for _ in range(ctx.k):
        leaves = [and_(live(rv, e), is_host_leaf(ctx, rv, e), eq(rv.href[e], 0)) for e in range(ctx.k)]
        go = and_(active, freed < need, or_(*leaves))
        victim = const(0)
        for e in range(ctx.k - 1, -1, -1):
            victim = ite(leaves[e], e, victim)
        size = node_len(ctx, rv, victim)
        freed = ite(go, freed + size, freed)
        removed = remove_nodes(ctx, rv, lambda x, v=victim, g=go: and_(g, eq(v, x)))
        rv = removed._replace(host_free=ite(go, rv.host_free + size, rv.host_free))
    return rv


def _off(x) -> bool:
    from ..sym import py

    return py(x) is False


def allocate_host(ctx, state, need, failing, agree=True):
    """allocate_host over all ranks: (new state, ok(h)).

    ``state`` is an SState, ``failing(h)`` says whether rank h's pinned allocation fails
    (alloc_asymmetry), ``need`` is a term (the same on every rank).
    """
    space = state.space

    def local_ok(h, rv):
        return and_(not_(failing(h)), rv.host_free >= need)

    if agree:
        all_ok = space.all(lambda h: local_ok(h, state.rank(h)))
        evicted = state.map(lambda h, rv: evict_host(ctx, rv, need, not_(all_ok)))
        ok_after = space.all(lambda h: local_ok(h, evicted.rank(h)))
        ok = or_(all_ok, ok_after)
        return evicted, (lambda h: ok)
    evicted = state.map(lambda h, rv: evict_host(ctx, rv, need, not_(local_ok(h, rv))))
    return evicted, (lambda h: local_ok(h, evicted.rank(h)))


def is_redundant_mirror(ctx, rv: RV, end):
    """Seed 000's release candidate."""
    n_ok = and_(
        live(rv, end),
        eq(sel(rv.dev, end), RESIDENT),
        eq(sel(rv.host, end), HOST_RESIDENT),
        all_durable(ctx, rv, end),
    )
    if ctx.cfg.has("release-busy"):
        return n_ok
    return and_(n_ok, eq(sel(rv.lock, end), 0), eq(sel(rv.href, end), 0), not_(sel(rv.lbp, end)))
