"""spec/host_eviction.py: evict_host, duplicate reclaim, agreed host allocation."""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT, RESIDENT
from ..state import RV
from ..sym import SymList, and_, const, eq, ite, ne, not_, or_, sel
from .host_slots import give_node
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


def _reclaim_item(ctx, rv: RV, freed, need, end, valid, spare_leaves, active):
    """One registry entry of one pass of _reclaim_full_host_duplicates."""
    cfg = ctx.cfg
    tracks = cfg.tracks_digest(ctx.multi())
    step = and_(active, valid, freed < need)
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
    return rv._replace(dups=dups, digest=digest), freed


def _drop_item(lst: SymList, item, cond) -> SymList:
    filtered = lst.filter(lambda it: ne(it[0], item))
    return SymList(
        lst.cap, ite(cond, filtered.n, lst.n),
        [ite(cond, a, b) for a, b in zip(filtered.items, lst.items)], lst.overflow,
    )


def _clear(lst: SymList, cond) -> SymList:
    return SymList(lst.cap, ite(cond, 0, lst.n), lst.items, lst.overflow)


def victim_keys(ctx):
    """Per rank handle h, the key of each end page that evict_host takes host victims by
    (smallest first, ties by the end page): 0 under page order; under victim_order =
    "lru" the node's position in the replicated LRU order, or with lru-local-clock in
    the rank's own wall-clock order. The order is not part of the encoded state: each
    evict_host sees a free one (an over-approximation of every order the spec keeps),
    shared by all ranks when the pre-state's replicas are identical (the replicated
    order is part of the replica, spec/properties.py replica) and the variant is off,
    else free per rank. On concrete states (proofs.agreement) the positions are exact."""
    cfg = ctx.cfg
    if ctx.lru_positions is not None:
        return lambda h: [ite(cfg.lru, x, 0) for x in ctx.lru_positions(h)]
    call = ctx.int("lru_call")  # a fresh name per evict_host
    if cfg.has("lru-local-clock") or not ctx.replicas_agree:
        own = [ctx.rank_int(f"{call}.clock{p}") for p in range(ctx.k)]
        raw = lambda h: [own[p](h) for p in range(ctx.k)]
    else:
        shared = [ctx.int(f"{call}.lru{p}") for p in range(ctx.k)]
        raw = lambda h: shared
    ctx.__dict__.setdefault("_host_key_views", []).append(raw)
    return lambda h: [ite(cfg.lru, x, 0) for x in raw(h)]


def host_order_into_state(ctx, value, reps, state):
    """A CTI's pre-state with the LRU order its evict_host saw (``value``: a term's value
    in the z3 model; ``reps``: a rank handle per rank of ``state``): live node ends by
    (key, end page) as each rank's ``clock`` under lru-local-clock (``lru`` then in page
    order, unread by the step), else as ``lru``, so the explicit spec takes the same host
    victims. Left alone under page order, or when the step ran evict_host more than once."""
    views = ctx.__dict__.get("_host_key_views", ())
    if len(views) != 1 or ctx.lru_positions is not None or not value(ctx.cfg.lru):
        return state
    if ctx.__dict__.get("_cp_keys") is not None:  # the planner's order is the CTI's (order_into_state)
        return state
    local = ctx.cfg.has("lru-local-clock")
    ranks = []
    for h, rs in zip(reps, state.ranks):
        key = [value(x) for x in views[0](h)]
        ends = [e for e, n in enumerate(rs.nodes) if n is not None]
        order = tuple(sorted(ends, key=lambda e: (key[e], e)))
        ranks.append(rs._replace(clock=order, lru=tuple(ends)) if local else rs._replace(lru=order))
    return state._replace(ranks=tuple(ranks))


def _lru_step(ctx, rv: RV, freed, need, active, key):
    """One iteration of evict_host's LRU loop: remove the host leaf with the smallest key."""
    leaves = [and_(live(rv, e), is_host_leaf(ctx, rv, e), eq(rv.href[e], 0)) for e in range(ctx.k)]
    go = and_(active, freed < need, or_(*leaves))
    victim, best, found = 0, 0, False
    for e in range(ctx.k):
        take = and_(leaves[e], or_(not_(found), key[e] < best))
        victim, best, found = ite(take, e, victim), ite(take, key[e], best), or_(found, leaves[e])
    size = node_len(ctx, rv, victim)
    removed = remove_nodes(ctx, give_node(ctx, rv, victim, go), lambda x: and_(go, eq(victim, x)))
    return removed._replace(host_free=ite(go, rv.host_free + size, rv.host_free)), ite(go, freed + size, freed)


def _per_rank(need):
    """``need`` as a function of the rank: a term is the same on every rank."""
    return need if callable(need) else (lambda h: need)


def evict_host_all(ctx, state, need, active):
    """evict_host on every rank (``active(h)``: whether rank h runs it), as a chain of
    named intermediate states (see SState.named). ``need``: a term, or one per rank."""
    from ..state import PerRank, map_pair

    need = _per_rank(need)
    cfg = ctx.cfg
    space = state.space
    freed = PerRank(space, lambda h: 0)
    on = lambda h: and_(active(h), cfg.wb, cfg.dupr)
    if not _off(and_(cfg.wb, cfg.dupr)):
        passes = (False,) if cfg.has("reclaim-demote-leaf") else (True, False)
        for p, spare in enumerate(passes):
            snap = PerRank(space, lambda h, st=state: st.rank(h).dups)
            for j in range(ctx.k):
                state, freed = map_pair(state, lambda h, rv, fr=freed, sn=snap, j=j, spare=spare: _reclaim_item(
                    ctx, rv, fr(h), need(h), sn(h).items[j][0], sn(h).valid(j), spare, on(h)))
                state, freed = state.named(f"reclaim{p}.{j}"), freed.named(f"freed{p}.{j}")
    keys = victim_keys(ctx)
    for i in range(ctx.k):
        state, freed = map_pair(state, lambda h, rv, fr=freed: _lru_step(ctx, rv, fr(h), need(h), active(h), keys(h)))
        state, freed = state.named(f"lru{i}"), freed.named(f"freed.lru{i}")
    return state


def _off(x) -> bool:
    from ..sym import py

    return py(x) is False


def allocate_host(ctx, state, need, failing, agree=True):
    """allocate_host over all ranks: (new state, ok(h)).

    ``state`` is an SState, ``failing(h)`` says whether rank h's pinned allocation fails
    (alloc_asymmetry), ``need`` is a term (the same on every rank) or a function of the
    rank (each rank's own node length: spec allocate_host's per-rank need).
    """
    space = state.space
    need = _per_rank(need)

    def local_ok(h, rv):
        return and_(not_(failing(h)), rv.host_free >= need(h))

    if agree:
        all_ok = space.all(lambda h: local_ok(h, state.rank(h)))
        evicted = evict_host_all(ctx, state, need, lambda h: not_(all_ok))
        ok_after = space.all(lambda h: local_ok(h, evicted.rank(h)))
        ok = or_(all_ok, ok_after)
        return evicted, (lambda h: ok)
    evicted = evict_host_all(ctx, state, need, lambda h: not_(local_ok(h, state.rank(h))))
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
