"""spec/load_path.py: load_back, the H->D copy finishing per rank, loading_check."""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT, LOADING, RESIDENT
from ..state import HALT_WHERE, RV, state_ite
from ..sym import lt, and_, const, eq, implies, ite, not_, or_, sel, sum_
from .cp_planner import load_keys, load_room
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


def load_back_guard(ctx, s, a):
    e = a["node"]
    keys = load_keys(ctx)

    def ok(h):
        rv = s.rank(h)
        chain = [in_load_chain(ctx, rv, x, e) for x in range(ctx.k)]
        hosts = and_(*(implies(chain[x], eq(rv.host[x], HOST_RESIDENT)) for x in range(ctx.k)))
        total = sum_([ite(chain[x], node_len(ctx, rv, x), 0) for x in range(ctx.k)])
        room, _after = load_room(ctx, rv, e, chain, total, keys(h))  # per lane; CP: after its plan
        return and_(live(rv, e), eq(sel(rv.dev, e), ABSENT), hosts, room)

    return s.space.all(ok)


def load_back(ctx, s, a):
    """Lock the path, take device slots, one H->D copy for the evicted chain, mark it."""
    e = a["node"]
    keys = load_keys(ctx)

    def on_rank(h, rv):
        chain = [in_load_chain(ctx, rv, x, e) for x in range(ctx.k)]
        total = sum_([ite(chain[x], node_len(ctx, rv, x), 0) for x in range(ctx.k)])
        first = 0
        for x in range(ctx.k - 1, -1, -1):  # the top node of the chain has the lowest id
            first = ite(chain[x], rv.start[x], first)
        _room, rv = load_room(ctx, rv, e, chain, total, keys(h))  # CP: the planner's victims
        for x in range(ctx.k):
            rv = rv.set_fields(x, chain[x], dev=LOADING, lbp=True)
        rv = lock_path(ctx, rv, e, 1)
        return rv._replace(dev_free=rv.dev_free - total, lq=rv.lq.append((first, e)))

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
