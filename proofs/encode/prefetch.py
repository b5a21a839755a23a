"""spec/prefetch.py: prefetch_from_storage, the L3->H read per rank,
check_prefetch_progress (MAX-agreed termination, MIN of completed pages)."""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT
from ..state import NOT_DONE, RV
from ..sym import SymList, and_, const, eq, implies, ite, max2, ne, not_, or_, sel, sum_
from ...spec.prefetch_end import REVOKED
from . import host_slots
from .host_eviction import allocate_host
from .prefetch_end import FLAGS, has, skips_vote, terminate_vote
from .tree import add_node, ensure_boundary, live
from .write_path import fail_param, rank_param, rank_view


def matched_prefix(ctx, rv: RV, q):
    """Leading cached pages of the request ending at q."""
    uni = ctx.uni
    return sum_([
        ite(and_(uni.anc_sym(p, q), *(implies(uni.anc[a][p], rv.own[a] >= 0) for a in range(p + 1))), 1, 0)
        for p in range(ctx.k)
    ])


def path_page(ctx, q, depth):
    """The page of the request path ending at q that has the given depth (1-based)."""
    uni = ctx.uni
    out = 0
    for p in range(ctx.k - 1, -1, -1):
        out = ite(and_(uni.anc_sym(p, q), eq(uni.depth[p], depth)), p, out)
    return out


def anchor(ctx, rv: RV, q):
    """(usable, matched pages k, anchor end or -1), as _anchor returns (k, end) or None."""
    k = matched_prefix(ctx, rv, q)
    n = ctx.uni.depth_of(q)
    last = path_page(ctx, q, k)
    end = sel(rv.own, last)
    ok_mid = and_(eq(end, last), eq(sel(rv.host, end), HOST_RESIDENT))
    usable = and_(k < n, or_(eq(k, 0), ok_mid))
    return usable, k, ite(eq(k, 0), -1, end)


def source_store(ctx, s, h):
    """The store a rank reads: rank 0's under single writer, else its own."""
    from ..state import rv_ite

    own = s.rank(h).store
    first = s.rank(s.space.r0).store
    return tuple(ite(ctx.cfg.single_writer, a, b) for a, b in zip(first, own))


def prefetch_params(ctx, s):
    ctx.side.append(and_(ctx.cfg.prefetch, ctx.cfg.storage))
    return {"req": ctx.request_param(), "fail": fail_param(ctx)}


def prefetch_guard(ctx, s, a):
    q = a["req"]
    space = s.space

    def busy(h):
        pq = s.rank(h).pq
        return or_(*(and_(pq.valid(i), eq(pq.items[i][0], q)) for i in range(pq.cap)))

    u0, k0, e0 = anchor(ctx, s.rank(space.r0), q)

    def same(h):
        u, k, e = anchor(ctx, s.rank(h), q)
        return and_(eq(u, u0), implies(u0, and_(eq(k, k0), eq(e, e0))))

    first = path_page(ctx, q, k0 + 1)
    hit = space.any(lambda h: sel(source_store(ctx, s, h), first))
    return and_(not_(space.any(busy)), u0, space.all(same), hit)


def held_during_step(ctx, s, a):
    """prefetch.held_during_step: the anchor protect_host holds while the step's fallback
    evict_host runs (-1 for a match of 0 pages)."""
    return anchor(ctx, s.rank(s.space.r0), a["req"])[2]


def prefetch_from_storage(ctx, s, a):
    """protect_host(anchor), reserve host slots for the missing pages, start the reads."""
    q = a["req"]
    space = s.space
    _u, k, anc = anchor(ctx, s.rank(space.r0), q)
    n = ctx.uni.depth_of(q) - k

    def protect(rv, delta, cond=True):
        return rv.set_fields(anc, and_(cond, anc >= 0), href=sel(rv.href, anc) + delta)

    protected = s.map(lambda h, rv: protect(rv, 1))
    alloc, oks = allocate_host(ctx, protected, n, a["fail"])

    def finish(h, rv):
        ok = oks(h)
        rv = protect(rv, -1, not_(ok))
        rv, got = host_slots.reserve(ctx, rv, n, ok)
        return rv._replace(
            host_free=ite(ok, rv.host_free - n, rv.host_free),
            pq=rv.pq.append((q, anc, k, n, NOT_DONE, 0) + tuple(got), ok),
        )

    return alloc.map(finish)


def prefetch_io_params(ctx, s):
    r = rank_param(ctx)
    i = ctx.int("op")
    ctx.side.append(and_(i >= 0, i < ctx.k))
    return {"rank": r, "op": i}


def prefetch_io_guard(ctx, s, a):
    rv = rank_view(s, a["rank"])
    i = a["op"]
    return and_(i < rv.pq.n, eq(rv.pq.at(i)[4], NOT_DONE))


def prefetch_io(ctx, s, a):
    """The rank's read finishes: it got the leading pages its store holds."""
    r, i = a["rank"], a["op"]
    uni = ctx.uni

    def on_rank(h, rv):
        q, _anc, k, n = rv.pq.at(i)[:4]
        held = source_store(ctx, s, h)
        got = sum_([
            ite(and_(uni.anc_sym(p, q), uni.depth[p] > k, uni.depth[p] <= k + n,
                     *(implies(and_(uni.anc[x][p], uni.depth[x] > k), held[x]) for x in range(p + 1))), 1, 0)
            for p in range(ctx.k)
        ])
        items = [
            ite(eq(i, j), it[:4] + (got,) + it[5:], it) for j, it in enumerate(rv.pq.items)
        ]
        return rv._replace(pq=SymList(rv.pq.cap, rv.pq.n, items, rv.pq.overflow))

    return s.only(r, on_rank)


def check_prefetch_params(ctx, s):
    i = ctx.int("op")
    ctx.side.append(and_(i >= 0, i < ctx.k))
    return {"op": i}


def check_prefetch_guard(ctx, s, a):
    i = a["op"]
    space = s.space
    op0 = s.rank(space.r0).pq.at(i)
    n0 = s.rank(space.r0).pq.n

    def same(h):
        pq = s.rank(h).pq
        return and_(i < pq.n, eq(pq.at(i)[:4], op0[:4]))

    # a revoked prefetch is no longer checked: the drain round retires it
    return and_(i < n0, space.all(same), not_(has(op0[FLAGS], REVOKED)))


def check_prefetch_progress(ctx, s, a):
    """Terminate once the MAX vote says so (prefetch_end.terminate_vote; else a
    stuttering step, or with prefetch-vote-skipped / timeout-local-vote a hang when some
    rank went ahead alone), then ``terminate_prefetch``."""
    from ..state import HUNG, state_ite

    i = a["op"]
    vote = terminate_vote(ctx, s, i)
    waiting = state_ite(skips_vote(ctx, s, i), s.replace(hung=HUNG["check_prefetch_progress"]), s)
    return state_ite(vote, terminate_prefetch(ctx, s, a), waiting)


def terminate_prefetch(ctx, s, a):
    """Agree on the completed prefix (MIN), insert it as host-only nodes, free what the
    tree already had, queue the unused tail for the next drain, release the anchor."""
    i = a["op"]
    cfg, uni, space = ctx.cfg, ctx.uni, s.space
    completed = space.min(lambda h: max2(s.rank(h).pq.at(i)[4], 0))

    def on_rank(h, rv):
        item = rv.pq.at(i)
        q, anc, k, n = item[:4]
        fetched = [and_(uni.anc_sym(p, q), uni.depth[p] > k, uni.depth[p] <= k + completed) for p in range(ctx.k)]
        have_p = [
            and_(fetched[p], *(implies(and_(fetched[x], uni.anc[x][p]), rv.own[x] >= 0) for x in range(p + 1)))
            for p in range(ctx.k)
        ]
        have = sum_([ite(c, 1, 0) for c in have_p])
        last_have = path_page(ctx, q, k + have)
        rv = ensure_boundary(ctx, rv, last_have, have > 0)
        start = path_page(ctx, q, k + have + 1)
        end = path_page(ctx, q, k + completed)
        rv = add_node(ctx, rv, start, end, have < completed, dev=ABSENT, host=HOST_RESIDENT)
        tail = n - completed
        at = lambda j, p: and_(uni.anc_sym(p, q), eq(uni.depth[p], k + 1 + j))
        rv = host_slots.finish_prefetch(ctx, rv, item, at, have, completed, tail)
        free_now = have + (tail if cfg.has("prefetch-double-free") else 0)
        rv = rv._replace(
            host_free=rv.host_free + free_now,
            relq_n=ite(ne(tail, 0), rv.relq_n + 1, rv.relq_n),
            relq_sum=ite(ne(tail, 0), rv.relq_sum + tail, rv.relq_sum),
            pq=rv.pq.remove_at_sym(i),
        )
        rv = rv.set_fields(anc, and_(anc >= 0, live(rv, anc)), href=sel(rv.href, anc) - 1)
        return rv

    return s.map(on_rank)
