"""spec/eviction.py: evict() of one device leaf: demote, delete (pruning a host-only
subtree), or under write_back stage the node to host first."""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT
from ..state import RV
from ..sym import and_, const, eq, implies, ite, not_, or_, sel, sum_
from .host_eviction import allocate_host
from .host_slots import give_node, take_node
from .tree import below, is_device_leaf, live, node_len, register_duplicate, remove_nodes
from .write_path import fail_param


def evict_params(ctx, s):
    e = ctx.int("node")
    ctx.side.append(and_(e >= 0, e < ctx.k))
    # evict_params lists the leaves of some replica; the guard says the same.
    return {"node": e, "fail": fail_param(ctx, ctx.cfg.wb)}


def _leaf(ctx, rv: RV, e):
    return or_(*(and_(eq(e, x), live(rv, x), is_device_leaf(ctx, rv, x)) for x in range(ctx.k)))


def evict_guard(ctx, s, a):
    e = a["node"]
    return s.space.any(lambda h: _leaf(ctx, s.rank(h), e))


def _demote(ctx, rv: RV, e, cond):
    rv = rv._replace(dev_free=ite(cond, rv.dev_free + node_len(ctx, rv, e), rv.dev_free))
    return rv.set_fields(e, cond, dev=ABSENT)


def _prunable(ctx, rv: RV, e):
    return and_(*(implies(below(ctx, rv, e, d), and_(eq(rv.href[d], 0), eq(rv.lock[d], 0))) for d in range(ctx.k)))


def _delete(ctx, rv: RV, e, cond):
    under = [below(ctx, rv, e, d) for d in range(ctx.k)]
    freed_host = 0
    if not ctx.cfg.has("orphan-host-subtree"):
        freed_host = sum_([ite(under[d], node_len(ctx, rv, d), 0) for d in range(ctx.k)])
        for d in range(ctx.k):
            rv = give_node(ctx, rv, d, and_(cond, under[d]))
    new = rv._replace(
        dev_free=ite(cond, rv.dev_free + node_len(ctx, rv, e), rv.dev_free),
        host_free=ite(cond, rv.host_free + freed_host, rv.host_free),
    )
    return remove_nodes(ctx, new, lambda x: and_(cond, or_(eq(e, x), under[x])))


def evict_on_rank(ctx, rv: RV, e, cond=True):
    """One rank's eviction of leaf e when no host write is needed."""
    return evict_leaf(ctx, rv, e, and_(cond, _leaf(ctx, rv, e)))


def evict_leaf(ctx, rv: RV, e, leaf):
    """_evict_leaf of a node the caller found to be a leaf (``leaf``, locked or not):
    demote it if backed up, else delete it with its free host-only subtree."""
    backed = eq(sel(rv.host, e), HOST_RESIDENT)
    rv = _demote(ctx, rv, e, and_(leaf, backed))
    if ctx.cfg.has("orphan-host-subtree"):
        deletable = True
    else:
        deletable = _prunable(ctx, rv, e)
    return _delete(ctx, rv, e, and_(leaf, not_(backed), deletable))


def evict(ctx, s, a):
    e = a["node"]
    cfg, space = ctx.cfg, s.space

    def needs_write(h):
        rv = s.rank(h)
        return and_(_leaf(ctx, rv, e), eq(sel(rv.host, e), ABSENT))

    write_path = and_(cfg.wb, space.any(needs_write))
    plain = s.map(lambda h, rv: evict_on_rank(ctx, rv, e))
    agree = not cfg.has("partial-backup-leak")
    # holder = the first rank that needs the write (needs_write.index(True)). In the fixed
    # protocol the replicas a replicated step sees are identical (rank_agreement, and
    # round_due holds replicated steps back while digests differ), so any such rank
    # gives the same length; bug variants that let replicas diverge take the first.
    # partial-backup-leak: each writing rank asks for its own node's length, alone.
    if agree:
        pick = space.first if cfg.variants else space.some
        need = pick(needs_write, lambda h: node_len(ctx, s.rank(h), e), 0)
    else:
        need = lambda h: ite(needs_write(h), node_len(ctx, s.rank(h), e), 0)  # noqa: E731
    alloc, oks = allocate_host(ctx, s, need, a["fail"], agree)

    def after(h, rv):
        nw = needs_write(h)
        return write_and_demote(ctx, evict_on_rank(ctx, rv, e, not_(nw)), e, and_(nw, oks(h)))

    written = alloc.map(after)
    from ..state import state_ite

    return state_ite(write_path, written, plain)


def write_and_demote(ctx, rv: RV, e, do):
    """Where ``do``: the write_back stage of leaf e whose host allocation succeeded
    (write_backup, the blocking writing_check: host resident, a storage backup started, a
    duplicate birth point), then its demotion. The rank takes and charges its own node's
    pages (the allocation asked for the agreed length: the same, unless replicas diverged)."""
    cfg = ctx.cfg
    rv = rv._replace(host_free=ite(do, rv.host_free - node_len(ctx, rv, e), rv.host_free))
    rv = take_node(ctx, rv, e, do)
    rv = rv.set_fields(e, do, host=HOST_RESIDENT, href=sel(rv.href, e) + ite(cfg.storage, 1, 0))
    rv = register_duplicate(ctx, rv, e, do)
    rv = rv._replace(sq=rv.sq.append((sel(rv.start, e), e), and_(do, cfg.storage)))
    return _demote(ctx, rv, e, do)
