"""spec/write_path.py: insert (with _inc_hit_count), write_backup, the D->H copy
finishing, writing_check."""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT, RESIDENT, WRITING
from ..state import HUNG, RV
from ..sym import lt, SymList, and_, const, eq, implies, ite, min2, ne, not_, or_, sel, sum_
from .durable import fresh, lru_view
from .host_eviction import allocate_host
from .host_slots import take_node
from .sync import digest_round, tracks_digest_round
from .tree import (
    add_node,
    all_durable,
    covers,
    live,
    node_len,
    register_duplicate,
    split_node,
)

NONE = -1  # "no node" in a per-rank write list


# --- insert -----------------------------------------------------------------------------


def _lead(ctx, rv: RV, q):
    """Per page p: p is on the request path ending at q and it and every page above it
    are cached (the part of the request that _walk walks)."""
    uni = ctx.uni
    out = []
    for p in range(ctx.k):
        cached_above = and_(*(implies(uni.anc[a][p], rv.own[a] >= 0) for a in range(p + 1)))
        out.append(and_(uni.anc_sym(p, q), cached_above))
    return out


def last_walked(ctx, rv: RV, q):
    """The last node insert's walk of the request ending at q reaches (the owner of
    its deepest cached page), -1 when nothing of it is cached."""
    lead = _lead(ctx, rv, q)
    out = -1
    for p in range(ctx.k):
        out = ite(lead[p], rv.own[p], out)
    return out


def insert_device_need(ctx, rv: RV, q):
    """Device pages insert allocates: un-evicted walked pages plus the new pages."""
    lead = _lead(ctx, rv, q)
    return sum_(
        [
            ite(and_(ctx.uni.anc_sym(p, q), or_(not_(lead[p]), eq(sel(rv.dev, rv.own[p]), ABSENT))), 1, 0)
            for p in range(ctx.k)
        ]
    )


def _hit(ctx, rv: RV, end, to_write: SymList, cond, ages):
    """_inc_hit_count: write-through stages a node on its threshold-th hit, unless it is
    fully durable with young marks (the anti-churn guard; ``ages``: encode.durable)."""
    cfg = ctx.cfg
    cond = and_(cond, not_(cfg.wb))
    hits = sel(rv.hits, end)
    new_hits = min2(hits + 1, cfg.threshold)
    rv = rv.set_fields(end, cond, hits=new_hits)
    churn_guard = and_(cfg.mirror, all_durable(ctx, rv, end), fresh(ctx, rv, end, ages))
    want = and_(cond, eq(sel(rv.host, end), ABSENT), new_hits >= cfg.threshold, not_(churn_guard))
    return rv, to_write.append(end, want)


def insert_on_rank(ctx, rv: RV, q, ages):
    """insert(): walk, split at the divergence page, un-evict, hit, add the new leaf.
    Returns the rank view and its write list (nodes _inc_hit_count wants staged).

    The walk visits the nodes ending at walked pages top-down (page ids grow along a
    path); the last walked node is split at the deepest walked page c when it extends
    below c, after the nodes above it were visited, as in the spec's loop."""
    uni, k = ctx.uni, ctx.k
    lead = _lead(ctx, rv, q)
    has_c = or_(*lead)
    c = 0
    for p in range(k):
        c = ite(lead[p], p, c)  # deepest walked page
    to_write = SymList(k, 0, [(NONE,)] * k)

    def visit(rv, to_write, x, walked):
        evicted = eq(rv.dev[x], ABSENT)
        un = and_(walked, evicted)
        rv = rv._replace(dev_free=ite(un, rv.dev_free - node_len(ctx, rv, x), rv.dev_free))
        rv = rv.set_fields(x, un, dev=RESIDENT)
        rv = register_duplicate(ctx, rv, x, un)
        return _hit(ctx, rv, x, to_write, and_(walked, not_(evicted)), ages)

    for x in range(k):  # the nodes above the last walked one
        rv, to_write = visit(rv, to_write, x, and_(lead[x], eq(rv.own[x], x), ne(c, x)))
    end_c = sel(rv.own, c)
    rv = split_node(ctx, rv, end_c, c, and_(has_c, ne(end_c, c)))
    for x in range(k):  # the last walked node (now ending at c)
        rv, to_write = visit(rv, to_write, x, and_(has_c, eq(c, x), eq(rv.own[x], x)))
    new_leaf = not_(lead_at(ctx, lead, q))
    start = 0
    for p in range(k - 1, -1, -1):
        first_new = and_(uni.anc_sym(p, q), not_(lead[p]),
                         or_(eq(uni.parent[p], -1), lead_at(ctx, lead, uni.parent[p])))
        start = ite(first_new, p, start)
    depth_c = ite(has_c, uni.depth_of(c), 0)
    rv = add_node(ctx, rv, start, q, new_leaf)
    rv = rv._replace(dev_free=ite(new_leaf, rv.dev_free - (uni.depth_of(q) - depth_c), rv.dev_free))
    rv, to_write = _hit(ctx, rv, q, to_write, new_leaf, ages)
    return rv, to_write


def lead_at(ctx, lead, p):
    return sel(lead, p)


def write_backup(ctx, state, lists, failing):
    """write_backup for the i-th node each rank wants staged, i = 0, 1, ...

    ``lists(h)`` is rank h's write list. Allocation is agreed across ranks; where the
    replicas want different nodes nobody stages (partial-backup-leak: each rank alone).
    """
    cfg, space = ctx.cfg, state.space
    agree = not cfg.has("partial-backup-leak")
    k = ctx.k
    for i in range(k):

        def wanted(h, i=i):
            lst = lists(h)
            return ite(lst.valid(i), lst.items[i][0], NONE)

        active = space.any(lambda h: ne(wanted(h), NONE))
        if agree:
            end = wanted(space.r0)
            disagree = space.any(lambda h: ne(wanted(h), end))
            go = and_(active, not_(disagree))
        else:
            go = active
        # Each rank asks for, takes and charges its own node (agreed: the same key on every
        # rank; partial-backup-leak: whatever each rank wants), of its own length.
        def need(h, wanted=wanted, pre=state):
            return ite(ne(wanted(h), NONE), node_len(ctx, pre.rank(h), wanted(h)), 0)

        alloc, oks = allocate_host(ctx, state, need, failing, agree)
        nxt = _choose(go, alloc, state)

        def stage(h, rv, go=go, oks=oks, wanted=wanted):
            e = wanted(h)
            do = and_(go, oks(h), ne(e, NONE))
            rv = rv._replace(
                host_free=ite(do, rv.host_free - node_len(ctx, rv, e), rv.host_free),
                wq=rv.wq.append((sel(rv.start, e), e), do),
            )
            rv = take_node(ctx, rv, e, do)
            return rv.set_fields(e, do, host=WRITING, lock=sel(rv.lock, e) + 1)

        state = nxt.map(stage)
    return state


def _choose(c, a, b):
    from ..state import state_ite

    return state_ite(c, a, b)


def insert_params(ctx, s):
    return {"req": ctx.request_param(), "fail": fail_param(ctx)}


def fail_param(ctx, enabled=True):
    """The ranks whose pinned host allocation fails this step (a strict subset, and only
    under the alloc_asymmetry fault on more than one rank: Model.fail_sets)."""
    space = ctx.space
    f = ctx.rank_pred("fail")
    on = and_(enabled, ctx.cfg.alloc_asymmetry, ctx.multi())
    ctx.side.append(space.forall(lambda h: implies(f(h), on)))
    ctx.side.append(implies(on, space.any(lambda h: not_(f(h)))))
    return f


def insert_guard(ctx, s, a):
    """Room on every rank (in every CP lane); with insert_evicts also without room (the
    spec's step is one when its own eviction changes something: here also when it
    changes nothing, a stuttering step, an over-approximation)."""
    from .cp_planner import insert_lanes_fit

    q = a["req"]
    fits = s.space.all(lambda h: and_(insert_device_need(ctx, s.rank(h), q) <= s.rank(h).dev_free,
                                      insert_lanes_fit(ctx, s.rank(h), q)))
    return or_(fits, ctx.cfg.insert_evicts)


def insert(ctx, s, a):
    """insert_evicts first makes room (encode/scheduler_evict.py); a request that still
    does not fit leaves the state after that eviction."""
    from .scheduler_evict import room_for_insert

    q = a["req"]
    s, fits = room_for_insert(ctx, s, q, a["fail"])
    return _choose(fits, _insert_fitting(ctx, s, q, a["fail"]), s)


def _insert_fitting(ctx, s, q, failing):
    results = {}
    dlru = lru_view(ctx)

    def on_rank(h):
        from ..state import _key

        key = _key(h)
        if key not in results:
            results[key] = insert_on_rank(ctx, s.rank(h), q, dlru(h)[1])
        return results[key]

    inserted = s.map(lambda h, rv: on_rank(h)[0])
    return write_backup(ctx, inserted, lambda h: on_rank(h)[1], failing)


# --- the D->H copy finishing on one rank ------------------------------------------------


def write_dma_done_params(ctx, s):
    return {"rank": rank_param(ctx)}


def rank_param(ctx):
    if ctx.space.symbolic:
        return ctx.space.fresh("rank")
    r = ctx.int("rank")
    ctx.side.append(and_(r >= 0, r < ctx.space.n))
    return r


def rank_view(s, h):
    """The view of a rank named by an action parameter (symbolic index over concrete ranks)."""
    from ..state import rv_ite

    if s.space.symbolic or isinstance(h, int):
        return s.rank(h)
    out = s.rank(s.space.n - 1)
    for r in range(s.space.n - 2, -1, -1):
        out = rv_ite(h == r, s.rank(r), out)
    return out


def write_dma_done_guard(ctx, s, a):
    rv = rank_view(s, a["rank"])
    return rv.wdone < rv.wq.n


def write_dma_done(ctx, s, a):
    return s.only(a["rank"], lambda h, rv: rv._replace(wdone=rv.wdone + 1))


# --- writing_check ------------------------------------------------------------------------


def writing_check_params(ctx, s):
    return {}


def writing_check_guard(ctx, s, a):
    """The round runs every iteration while ongoing_write_through is non-empty anywhere
    (MIN may be 0: a stuttering step), or when a reclaim digest is due."""
    space = s.space
    digest_due = and_(tracks_digest_round(ctx), space.any(lambda h: s.rank(h).digest.n > 0))
    return or_(digest_due, space.any(lambda h: s.rank(h).wq.n > 0))


def writing_check(ctx, s, a):
    space = s.space
    if ctx.cfg.has("early-return-collective"):
        hang = and_(space.any(lambda h: eq(s.rank(h).wdone, 0)), space.any(lambda h: s.rank(h).wq.n > 0))
    else:
        hang = False
    s2, halt = digest_round(ctx, s, "writing_check")
    n = space.min(lambda h: s2.rank(h).wdone)
    done = s2.map(lambda h, rv: commit_writes(ctx, rv, n))
    from ..state import HALT_WHERE, state_ite

    halted = state_ite(halt, s2.replace(halted=HALT_WHERE["writing_check"]), done)
    return state_ite(hang, s.replace(hung=HUNG["writing_check"]), halted)


def commit_writes(ctx, rv: RV, n):
    """Commit the first n D->H copies: host resident, write lock dropped, storage backup
    started (protect_host + H->L3 op)."""
    cfg = ctx.cfg
    for i in range(rv.wq.cap):
        act = lt(i, n)
        start, end = rv.wq.items[i]
        for x in range(ctx.k):
            c = and_(act, covers(ctx, rv, start, end, x))
            rv = rv.set_fields(
                x, c,
                host=HOST_RESIDENT,
                lock=rv.lock[x] - ite(cfg.wb, 0, 1),
                href=rv.href[x] + ite(cfg.storage, 1, 0),
            )
            rv = register_duplicate(ctx, rv, x, c)
        rv = rv._replace(sq=rv.sq.append((start, end), and_(act, cfg.storage)))
    return rv._replace(wq=rv.wq.drop(n), wdone=rv.wdone - n)
