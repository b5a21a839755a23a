"""spec/load_path.py: load_back, the H->D copy finishing per rank, loading_check."""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT, LOADING, RESIDENT
from ..state import HALT_WHERE, RV, rv_ite, state_ite
from ..sym import lt, and_, const, eq, implies, ite, not_, or_, sel, sum_
from .cp_planner import chain_pages, lanes_fit, load_keys, load_room
from .sync import digest_round
from .tree import covers, live, lock_path, node_len
from .write_path import rank_param, rank_view


def in_load_chain(ctx, rv: RV, x: int, e):
    """Node x is in nodes_to_load(e): x and every node between x and e are evicted."""
    uni = ctx.uni
    between = and_(*(
        implies(and_(live(rv, y), uni.anc[x][y], uni.anc_sym(y, e)), eq(rv.dev[y], ABSENT))
        for y in range(x, ctx.k)
    ))
    return and_(live(rv, x), uni.anc_sym(x, e), between)


def load_back_params(ctx, s):
    e = ctx.int("node")
    ctx.side.append(and_(e >= 0, e < ctx.k))
    return {"node": e}


def load_chain(ctx, rv: RV, e):
    """nodes_to_load(e): (per node, whether it is in the chain; the chain's pages; the
    first page of its top node)."""
    chain = [in_load_chain(ctx, rv, x, e) for x in range(ctx.k)]
    total = sum_([ite(chain[x], node_len(ctx, rv, x), 0) for x in range(ctx.k)])
    first = 0
    for x in range(ctx.k - 1, -1, -1):  # the top node of the chain has the lowest id
        first = ite(chain[x], rv.start[x], first)
    return chain, total, first


def load_back_guard(ctx, s, a):
    e = a["node"]
    keys = load_keys(ctx)

    def ok(h):
        rv = s.rank(h)
        chain, total, _first = load_chain(ctx, rv, e)
        hosts = and_(*(implies(chain[x], eq(rv.host[x], HOST_RESIDENT)) for x in range(ctx.k)))
        room, _after = load_room(ctx, rv, e, chain, total, keys(h))  # per lane; CP: after its plan
        # load_back_evicts (not under the CP planner, which plans its own victims): also
        # without room (a stuttering step where its own eviction changes nothing, which
        # the spec does not count: an over-approximation)
        room = or_(room, and_(ctx.cfg.load_back_evicts, not_(ctx.cfg.cp)))
        return and_(live(rv, e), eq(sel(rv.dev, e), ABSENT), hosts, room)

    return s.space.all(ok)


def load_back(ctx, s, a):
    """Lock the path, take device slots, one H->D copy for the evicted chain, mark it.
    load_back_evicts: a rank without room evicts first (encode/scheduler_evict.py); the
    chain and its pages are the pre-state's, what the eviction left of it is loaded, and
    a rank still without room loads nothing."""
    from .scheduler_evict import room_for_load

    e = a["node"]
    keys = load_keys(ctx)
    after = room_for_load(ctx, s, e, lambda rv: load_chain(ctx, rv, e))

    def on_rank(h, rv):
        chain, total, first = load_chain(ctx, rv, e)
        fits, planned = load_room(ctx, rv, e, chain, total, keys(h))  # CP: the planner's victims
        # Without the planner: the view after load_back_evicts' own eviction (the rank's
        # own view where it had room or the option is off), loaded only if the chain's
        # pre-state pages now fit (spec: "still no room ... returns 0").
        evicted = after.rank(h)
        pages = chain_pages(ctx, rv, chain)
        room = rv_ite(ctx.cfg.cp, planned, evicted)
        ok = ite(ctx.cfg.cp, fits, lanes_fit(ctx, evicted, pages, total))
        out = room
        for x in range(ctx.k):
            out = out.set_fields(x, and_(chain[x], live(room, x)), dev=LOADING, lbp=True)
        out = lock_path(ctx, out, e, 1)
        out = out._replace(dev_free=out.dev_free - total, lq=out.lq.append((first, e)))
        return rv_ite(ok, out, room)

    return s.map(on_rank)


def load_dma_done_params(ctx, s):
    return {"rank": rank_param(ctx)}


def load_dma_done_guard(ctx, s, a):
    rv = rank_view(s, a["rank"])
    return rv.ldone < rv.lq.n


def load_dma_done(ctx, s, a):
    return s.only(a["rank"], lambda h, rv: rv._replace(ldone=rv.ldone + 1))


def loading_check_params(ctx, s):
    return {}


def loading_check_guard(ctx, s, a):
    # Runs every iteration while loads are in flight; MIN may be 0.
    return s.space.any(lambda h: s.rank(h).lq.n > 0)


def loading_check(ctx, s, a):
    """Ack the load-backs finished everywhere (MIN): device copies usable, path
    unlocked, load_back_pending cleared."""
    s2, halt = digest_round(ctx, s, "loading_check")
    n = s.space.min(lambda h: s2.rank(h).ldone)

    def on_rank(h, rv):
        for i in range(rv.lq.cap):
            act = lt(i, n)
            start, end = rv.lq.items[i]
            for x in range(ctx.k):
                rv = rv.set_fields(x, and_(act, covers(ctx, rv, start, end, x)), dev=RESIDENT, lbp=False)
            rv = lock_path(ctx, rv, end, -1, and_(act, live(rv, end)))
        return rv._replace(lq=rv.lq.drop(n), ldone=rv.ldone - n)

    done = s2.map(on_rank)
    return state_ite(halt, s2.replace(halted=HALT_WHERE["loading_check"]), done)
