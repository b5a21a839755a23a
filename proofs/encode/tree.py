"""spec/state.py tree queries and spec/tree.py structural edits over rank views."""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT, RESIDENT
from ..state import RV
from ..sym import and_, const, eq, implies, ite, ne, not_, or_, sel, sum_, upd


# --- queries (spec/state.py) --------------------------------------------------------------


def live(rv: RV, e):
    return rv.live(e)


def node_len(ctx, rv: RV, e):
    return ctx.uni.chain_len(sel(rv.start, e), e)


def node_has_page(ctx, rv: RV, e, p: int):
    """Page p belongs to node e's chain (by its own start..end)."""
    return ctx.uni.in_chain(sel(rv.start, e), e, p)


def child_pages(ctx, rv: RV, e: int):
    """(child page c of page e that is cached, the node owning it) pairs, as conditions."""
    out = []
    for c, is_child in ctx.uni.children_of(e):
        out.append((c, and_(is_child, rv.own[c] >= 0)))
    return out


def has_child_nodes(ctx, rv: RV, e: int):
    return or_(*(cond for _c, cond in child_pages(ctx, rv, e)))


def is_device_leaf(ctx, rv: RV, e: int):
    """In evictable_leaves: resident, unlocked, no child holds a device copy."""
    parts = [eq(rv.dev[e], RESIDENT), not_(rv.lock[e] > 0)]
    for c, cond in child_pages(ctx, rv, e):
        parts.append(implies(cond, eq(sel(rv.dev, rv.own[c]), ABSENT)))
    return and_(*parts)


def is_device_leaf_sym(ctx, rv: RV, e):
    return or_(*(and_(eq(e, x), is_device_leaf(ctx, rv, x)) for x in range(ctx.k)))


def is_host_leaf(ctx, rv: RV, e: int):
    """In evictable_host_leaves: evicted, unlocked, host-resident, no children left."""
    return and_(
        eq(rv.dev[e], ABSENT),
        eq(rv.lock[e], 0),
        eq(rv.host[e], HOST_RESIDENT),
        not_(has_child_nodes(ctx, rv, e)),
    )


def all_durable(ctx, rv: RV, e):
    return and_(*(implies(node_has_page(ctx, rv, e, p), rv.durable[p]) for p in range(ctx.k)))


def covers(ctx, rv: RV, start, end, x: int):
    """Node x holds a page of the chain start..end (it is in nodes_covering)."""
    return or_(*(and_(ctx.uni.in_chain(start, end, p), eq(rv.own[p], x)) for p in range(ctx.k)))


def on_path(ctx, rv: RV, x: int, end):
    """Node x is on path_to_root(end): a live node ending at an ancestor-or-self of end."""
    return and_(live(rv, x), ctx.uni.anc_sym(x, end))


def below(ctx, rv: RV, e, x: int):
    """Node x is a strict descendant of node e (subtree(e)[1:])."""
    return and_(live(rv, x), ne(e, x), ctx.uni.anc_sym(e, x))


# --- edits (spec/tree.py) -----------------------------------------------------------------


def add_node(ctx, rv: RV, start, end, cond=True, **fields) -> RV:
    """add_node: the chain start..end becomes node ``end`` with the given fields."""
    own = tuple(
        ite(and_(cond, ctx.uni.in_chain(start, end, p)), end, rv.own[p]) for p in range(ctx.k)
    )
    rv = rv._replace(own=own)
    defaults = dict(dev=RESIDENT, host=ABSENT, lock=0, href=0, hits=0, lbp=False, rel=False)
    defaults.update(fields)
    return rv.set_fields(end, cond, start=start, **defaults)


def split_node(ctx, rv: RV, end, at, cond=True) -> RV:
    """_split_node: cut node ``end`` after page ``at``; the new upper half ends at ``at``.

    The upper half takes the node's fields, with host_ref_counter = the storage backups
    whose chain contains ``at`` (not the lower half's prefetch-anchor holds) and the
    load-back mark (both dropped by the split-* variants); the lower half keeps its end.
    """
    cfg, uni = ctx.cfg, ctx.uni
    k = ctx.k
    old_start = sel(rv.start, end)
    lower_start = 0
    for c in range(k - 1, -1, -1):
        lower_start = ite(and_(uni.in_chain(old_start, end, c), eq(uni.parent[c], at)), c, lower_start)
    backups = sum_(
        [ite(and_(rv.sq.valid(i), uni.in_chain(rv.sq.items[i][0], rv.sq.items[i][1], at) if isinstance(at, int)
                  else _in_chain_sym(ctx, rv.sq.items[i][0], rv.sq.items[i][1], at)), 1, 0)
         for i in range(rv.sq.cap)]
    )
    upper = dict(
        dev=sel(rv.dev, end),
        host=sel(rv.host, end),
        lock=sel(rv.lock, end),
        href=0 if cfg.has("split-during-backup") else backups,
        hits=sel(rv.hits, end),
        lbp=False if cfg.has("split-drops-pending-mark") else sel(rv.lbp, end),
        rel=sel(rv.rel, end),
    )
    new = add_node(ctx, rv, old_start, at, cond, **upper)
    new = new.set_fields(end, cond, start=lower_start)
    return register_duplicate(ctx, new, at, cond)


def _in_chain_sym(ctx, start, end, p):
    return or_(*(and_(eq(p, x), ctx.uni.in_chain(start, end, x)) for x in range(ctx.k)))


def ensure_boundary(ctx, rv: RV, page, cond=True) -> RV:
    end = sel(rv.own, page)
    return split_node(ctx, rv, end, page, and_(cond, end >= 0, ne(end, page)))


def remove_nodes(ctx, rv: RV, gone) -> RV:
    """remove_nodes for the nodes x with ``gone(x)`` (x an int page): pages uncached,
    durable marks revoked, registry entries cleaned."""
    k = ctx.k
    gone_x = [and_(gone(x), live(rv, x)) for x in range(k)]
    own, durable = [], []
    for p in range(k):
        hit = or_(*(and_(gone_x[x], node_has_page(ctx, rv, x, p)) for x in range(k)))
        own.append(ite(hit, -1, rv.own[p]))
        durable.append(and_(rv.durable[p], not_(hit)))
    dups = rv.dups.filter(lambda it: not_(or_(*(and_(gone_x[x], eq(it[0], x)) for x in range(k)))))
    return rv._replace(own=tuple(own), durable=tuple(durable), dups=dups)


def lock_path(ctx, rv: RV, end, delta, cond=True) -> RV:
    """inc_lock_ref / dec_lock_ref along path_to_root(end)."""
    lock = tuple(
        ite(and_(cond, on_path(ctx, rv, x, end)), rv.lock[x] + delta, rv.lock[x]) for x in range(ctx.k)
    )
    return rv._replace(lock=lock)


def is_duplicate(ctx, rv: RV, e):
    return and_(live(rv, e), ne(sel(rv.dev, e), ABSENT), eq(sel(rv.host, e), HOST_RESIDENT))


def register_duplicate(ctx, rv: RV, end, cond=True) -> RV:
    """_update_duplicate_tracking at a birth point (write_back + duplicate reclaim)."""
    cfg = ctx.cfg
    do = and_(cond, cfg.wb, cfg.dupr, not_(rv.dups.contains(end)), is_duplicate(ctx, rv, end))
    return rv._replace(dups=rv.dups.append(end, do))


def free_node_host(ctx, rv: RV, end, cond=True) -> RV:
    from .host_slots import give_node

    rv = rv._replace(host_free=ite(cond, rv.host_free + node_len(ctx, rv, end), rv.host_free))
    rv = give_node(ctx, rv, end, cond)
    return rv.set_fields(end, cond, host=ABSENT)


def update_node(rv: RV, e, cond=True, **fields) -> RV:
    return rv.set_fields(e, cond, **fields)


def upd_page(arr, p, val, cond=True):
    return upd(arr, p, val, cond)
