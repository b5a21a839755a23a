"""spec/storage_path.py: the H->L3 backup finishing per rank, the drain round with the
mirror-release prepare/commit, and the environment steps."""

from __future__ import annotations

from ...spec.state import HOST_RESIDENT
from ..state import HALT_WHERE, RV, SKIP, state_ite
from ..sym import lt, SymList, and_, const, eq, implies, ite, max2, ne, not_, or_, sel, sum_
from .durable import ageing, capped, lru_view
from .host_eviction import is_redundant_mirror
from .prefetch_end import retire_revoked, revokes_ready
from .sync import digest_round, negated_pairs_agree, wire_digest
from .host_slots import drain_release
from .tree import covers, free_node_host, live, node_len
from .write_path import rank_param, rank_view


def writes(ctx, space, h):
    """_writes: every rank writes, or only rank 0 (single writer)."""
    return or_(not_(ctx.cfg.single_writer), space.is_r0(h))


# --- the H->L3 copy finishing on one rank -------------------------------------------------


def storage_backup_done_params(ctx, s):
    r = rank_param(ctx)
    k = ctx.int("pages")
    rv = rank_view(s, r)
    start, end = rv.sq.at(rv.sdone.n)
    n = ctx.uni.chain_len(start, end)
    partial = and_(ctx.cfg.partial_storage, writes(ctx, s.space, r))
    ctx.side.append(ite(partial, and_(k >= 0, k <= n), eq(k, n)))
    return {"rank": r, "pages": k}


def storage_backup_done_guard(ctx, s, a):
    rv = rank_view(s, a["rank"])
    return rv.sdone.n < rv.sq.n


def storage_backup_done(ctx, s, a):
    r, k = a["rank"], a["pages"]
    cfg = ctx.cfg
    w = writes(ctx, s.space, r)
    rv0 = rank_view(s, r)
    start, end = rv0.sq.at(rv0.sdone.n)
    n = ctx.uni.chain_len(start, end)
    reported = n if cfg.has("failed-batch-acked") else k

    def on_rank(h, rv):
        d = ctx.uni.depth_of(start)
        store = tuple(
            or_(rv.store[p], and_(w, ctx.uni.in_chain(start, end, p), ctx.uni.depth[p] - d < k))
            for p in range(ctx.k)
        )
        ack = (ite(w, reported, SKIP), ite(w, k, SKIP))
        return rv._replace(store=store, sdone=rv.sdone.append(ack))

    return s.only(r, on_rank)


# --- drain_storage_control_queues -----------------------------------------------------------


def deficit(ctx, rv: RV):
    return max2(0, ctx.cfg.host_free_target - rv.host_free)


def candidates(ctx, rv: RV):
    return [is_redundant_mirror(ctx, rv, e) for e in range(ctx.k)]


def prepare_plan(ctx, rv: RV) -> SymList:
    """Candidates in key order until the pool deficit is covered."""
    want = deficit(ctx, rv)
    on = and_(want > 0, not_(rv.closed))
    cand = candidates(ctx, rv)
    plan = SymList(ctx.k, 0, [(0,)] * ctx.k, rv.plan.overflow)
    tokens = 0
    for e in range(ctx.k):
        take = and_(on, cand[e], tokens < want)
        plan = plan.append(e, take)
        tokens = ite(take, tokens + node_len(ctx, rv, e), tokens)
    return plan


def committable(ctx, rv: RV) -> SymList:
    """spec committable: the plan's entries that are still release candidates (taken
    before the round's acks), in plan order."""
    out = SymList(rv.plan.cap, 0, [(0,)] * rv.plan.cap, rv.plan.overflow)
    for i in range(rv.plan.cap):
        e = rv.plan.items[i][0]
        out = out.append(e, and_(rv.plan.valid(i), is_redundant_mirror(ctx, rv, e)))
    return out


def plan_triple(ctx, rv: RV, entries: SymList):
    """spec plan_triple: the plan's length, the tokens and digest of ``entries``."""
    tokens = sum_(
        [ite(entries.valid(i), node_len(ctx, rv, entries.items[i][0]), 0) for i in range(entries.cap)]
    )
    return (rv.plan.n, tokens, wire_digest(ctx.cfg, entries))


def execute_plan(ctx, rv: RV, plan: SymList, cond=True) -> RV:
    for i in range(plan.cap):
        e = plan.items[i][0]
        go = and_(cond, plan.valid(i), is_redundant_mirror(ctx, rv, e))
        rv = free_node_host(ctx, rv, e, go)
        rv = rv.set_fields(e, go, rel=True)
    return rv


def mirror_work_pending(ctx, s):
    def pending(h):
        rv = s.rank(h)
        cand = or_(*candidates(ctx, rv))
        return and_(not_(rv.closed), or_(rv.plan.n > 0, and_(deficit(ctx, rv) > 0, cand)))

    return and_(ctx.cfg.mirror_release_on(), s.space.any(pending))


def drain_params(ctx, s):
    return {}


def drain_guard(ctx, s, a):
    space = s.space
    # Runs every iteration while storage operations are outstanding; MIN may be 0.
    return or_(
        space.any(lambda h: or_(s.rank(h).sq.n > 0, s.rank(h).relq_n > 0)),
        revokes_ready(ctx, s),
        and_(ctx.cfg.mirror_release_on(), ageing(ctx, s)),  # an idle round still ages the marks
        mirror_work_pending(ctx, s),
    )


def synced_completed(ctx, s, i):
    """Per ack slot i, what rank h takes as completed: its own count, or (single writer)
    the MIN over the ranks that did not send the SKIP sentinel, i.e. the writer's."""
    space = s.space

    def rep(h):
        return s.rank(h).sdone.items[i][0]

    synced = space.min_where(lambda h: ne(rep(h), SKIP), rep, 0)
    return lambda h: ite(ctx.cfg.single_writer, synced, rep(h))


def drain_storage_control_queues(ctx, s, a):
    cfg, space = ctx.cfg, s.space
    digested, halt = digest_round(ctx, s, "drain_storage_control_queues")
    s2 = retire_revoked(ctx, digested)  # _drain_revoke runs first in the seed's drain
    nb = space.min(lambda h: s2.rank(h).sdone.n)
    nr = space.min(lambda h: s2.rank(h).relq_n)
    completed = [synced_completed(ctx, s2, i) for i in range(ctx.k)]
    mirror = cfg.mirror_release_on()
    dlru = lru_view(ctx)

    def on_rank(h, rv):
        """_drain_rank: the acks drop their host references, the release queue is freed."""
        for i in range(rv.sq.cap):
            act = lt(i, nb)
            start, end = rv.sq.items[i]
            for x in range(ctx.k):
                if cfg.has("split-during-backup"):
                    t = and_(act, eq(end, x), live(rv, x))
                else:
                    t = and_(act, covers(ctx, rv, start, end, x))
                rv = rv.set_fields(x, t, href=rv.href[x] - 1)
        # host_mem_release_queue: (count, pages); the MIN covers the whole queue when the
        # replicas agree on it, which they always do (identical sync-round appends).
        freed = ite(eq(nr, rv.relq_n), rv.relq_sum, ctx.rank_int("relq_part")(h))
        rv = drain_release(ctx, rv, eq(nr, rv.relq_n))
        return rv._replace(
            sdone=rv.sdone.drop(nb),
            relq_n=rv.relq_n - nr, relq_sum=rv.relq_sum - freed,
            host_free=rv.host_free + freed,
        )

    def marks(h, rv):
        """_mark_rank: the durable marks of the first nb acks (in ack order, each chain
        top-down; a bounded LRU keeps the most recent), then the ops leave sq."""
        new, order = [False] * ctx.k, [0] * ctx.k
        for i in range(rv.sq.cap):
            start, end = rv.sq.items[i]
            done = ctx.uni.chain_len(start, end) if cfg.has("durable-on-ack") else completed[i](h)
            d0 = ctx.uni.depth_of(start)
            for p in range(ctx.k):
                hit = and_(lt(i, nb), mirror, ctx.uni.in_chain(start, end, p), ctx.uni.depth[p] - d0 < done,
                           rv.own[p] >= 0)
                new[p], order[p] = or_(new[p], hit), ite(hit, i * (ctx.k + 1) + ctx.uni.depth[p], order[p])
        stamps, _ages = dlru(h)
        return rv._replace(durable=capped(ctx, rv.durable, new, order, stamps), sq=rv.sq.drop(nb))

    acked = s2.map(on_rank)
    # The agreed entries are released before this round's acks add durable marks (a
    # bounded LRU's eviction could unmake a planned entry on one rank only); the
    # variants durable-evicted-while-planned and release-no-consensus mark first.
    late = cfg.has("durable-evicted-while-planned") or cfg.has("release-no-consensus")
    mark_all = lambda st: st.map(marks)
    if late:
        acked = mark_all(acked)
    # The triples ride this round's all-reduce: committable entries are taken before the acks.
    released = release_round(ctx, acked, lambda h: committable(ctx, s2.rank(h)), None if late else mark_all)
    done = state_ite(mirror, released, acked if late else mark_all(acked))
    return state_ite(halt, digested.replace(halted=HALT_WHERE["drain_storage_control_queues"]), done)


def release_round(ctx, s, entries, then=None):
    """Commit last round's plans if every rank proposed the identical (count, tokens,
    digest) triple (MIN of negated pairs), else count a mismatch / fail-close; then
    prepare the next plans. ``entries(h)``: rank h's committable entries (pre-ack).
    ``then``: what runs between the commit and the next plans (the durable marks)."""
    cfg, space = ctx.cfg, s.space
    then = then or (lambda st: st)
    any_closed = space.any(lambda h: s.rank(h).closed)
    if cfg.has("release-no-consensus"):
        fresh = s.map(lambda h, rv: execute_plan(ctx, rv, prepare_plan(ctx, rv)))
        return then(state_ite(any_closed, s, fresh))
    any_plan = space.any(lambda h: s.rank(h).plan.n > 0)
    triples = lambda h: plan_triple(ctx, s.rank(h), entries(h))
    agree = plans_agree(ctx, s, triples, entries)
    mism = s.rank(space.r0).mismatch + 1
    closing = mism >= cfg.fail_close_after

    def commit(h, rv):
        ok = and_(any_plan, agree)
        bad = and_(any_plan, not_(agree))
        rv = execute_plan(ctx, rv, entries(h), ok)
        rv = rv._replace(
            mismatch=ite(ok, 0, ite(bad, mism, rv.mismatch)),
            closed=ite(bad, closing, rv.closed),
            plan=_cleared(rv.plan, bad),
        )
        return rv

    committed = then(s.map(commit))
    stop = and_(any_plan, not_(agree), closing)
    prepared = committed.map(lambda h, rv: rv._replace(plan=prepare_plan(ctx, rv)))
    return state_ite(any_closed, then(s), state_ite(stop, committed, prepared))


def plans_agree(ctx, s, triples, entries):
    """The negated-pair MIN check of the plan triples. Exact wire arithmetic, except in
    proof obligations (``ctx.lemmas``) under the fixed encoding, where the check is
    replaced by what two proved lemmas make it mean: values in [0, 2^(w-1) - 1) pass iff
    identical (consensus.agree_iff_identical_at_width), and an identical digest of two
    ascending lists (committable entries: a subsequence of an ascending plan) means
    identical lists (consensus.plan_digest_injective)."""
    cfg, space = ctx.cfg, s.space
    if getattr(ctx, "lemmas", False) and not cfg.has("negated-pair-overflow"):
        t0 = triples(space.r0)
        e0 = entries(space.r0)
        return space.all(
            lambda h: and_(eq(triples(h)[0], t0[0]), eq(triples(h)[1], t0[1]), entries(h).same(e0))
        )
    return and_(*(negated_pairs_agree(space, lambda h, f=f: triples(h)[f], cfg.digest_bits) for f in range(3)))


def _cleared(lst: SymList, cond) -> SymList:
    return SymList(lst.cap, ite(cond, 0, lst.n), lst.items, lst.overflow)


# --- the environment ---------------------------------------------------------------------


def store_lose_params(ctx, s):
    r = rank_param(ctx)
    p = ctx.int("page")
    ctx.side.append(and_(p >= 0, p < ctx.k, ctx.cfg.store_loss))
    return {"rank": r, "page": p}


def store_lose_guard(ctx, s, a):
    return sel(rank_view(s, a["rank"]).store, a["page"])


def store_lose(ctx, s, a):
    p = a["page"]
    return s.only(a["rank"], lambda h, rv: rv._replace(
        store=tuple(and_(rv.store[x], ne(p, x)) for x in range(ctx.k))
    ))


def registry_skew_params(ctx, s):
    ctx.side.append(ctx.cfg.registry_skew)
    return {"rank": rank_param(ctx)}


def registry_skew_guard(ctx, s, a):
    return rank_view(s, a["rank"]).dups.n >= 2


def registry_skew(ctx, s, a):
    """The rank's oldest registry entry moves to the back."""

    def on_rank(h, rv):
        d = rv.dups
        first = d.items[0]
        rotated = d.drop(1).append(first)
        return rv._replace(dups=SymList(d.cap, d.n, rotated.items, d.overflow))

    return s.only(a["rank"], on_rank)
