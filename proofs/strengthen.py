"""The strengthening invariants: what the protocol keeps true beyond the properties, and
what makes the properties inductive. Each has a name, one encoding and one sentence on
what it means for the protocol (docs/proofs.md lists them; the audit proves each one
inductive together with the properties).
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple

from ..spec.state import ABSENT, HOST_RESIDENT, LOADING, RESIDENT, WRITING
from ..spec.prefetch_end import FREED, REVOKED, TERMINATED, TIMED_OUT
from .encode.prefetch_end import has
from .encode.storage_path import writes
from .encode.tree import live, node_has_page, node_len
from .encode.sync import tracks_digest_round
from .formula import Every, Fact
from .properties import replica_same
from .state import HUNG, NOT_DONE, RV, SKIP
from .sym import and_, eq, implies, ite, le, lt, ne, not_, or_, sel, sum_


class Strengthening(NamedTuple):
    name: str
    fn: Callable  # (ctx, s) -> parts
    meaning: str


def _every(fn):
    """An invariant of each rank's state alone."""
    return lambda ctx, s: [Every(lambda h: fn(ctx, s, h, s.rank(h)))]


def _list_entries(lst, fn):
    return and_(*(implies(lst.valid(i), fn(i, lst.items[i])) for i in range(lst.cap)))


def _chain_pages(ctx, start, end, fn):
    return and_(*(implies(ctx.uni.in_chain(start, end, p), fn(p)) for p in range(ctx.k)))


def _disjoint(ctx, lst):
    parts = []
    for i in range(lst.cap):
        for j in range(i + 1, lst.cap):
            si, ei = lst.items[i][:2]
            sj, ej = lst.items[j][:2]
            both = and_(lst.valid(i), lst.valid(j))
            parts.append(implies(both, and_(*(
                not_(and_(ctx.uni.in_chain(si, ei, p), ctx.uni.in_chain(sj, ej, p))) for p in range(ctx.k)
            ))))
    return and_(*parts)


def _aligned(ctx, rv: RV, start, end, p):
    """Page p's node lies inside the chain start..end (entries cover whole nodes)."""
    x = rv.own[p]
    return and_(x >= 0, _in_chain_sym(ctx, start, end, sel(rv.start, x)), _in_chain_sym(ctx, start, end, x))


def _in_chain_sym(ctx, start, end, p):
    return or_(*(and_(eq(p, x), ctx.uni.in_chain(start, end, x)) for x in range(ctx.k)))


def _distinct(lst):
    parts = []
    for i in range(lst.cap):
        for j in range(i + 1, lst.cap):
            parts.append(implies(and_(lst.valid(i), lst.valid(j)), ne(lst.items[i][0], lst.items[j][0])))
    return and_(*parts)


def _ascending(lst):
    return and_(*(implies(lst.valid(i + 1), lt(lst.items[i][0], lst.items[i + 1][0])) for i in range(lst.cap - 1)))


def _page_ids(ctx, lst, comps=(0,)):
    return _list_entries(lst, lambda i, it: and_(*(and_(it[c] >= 0, it[c] < ctx.k) for c in comps)))


# --- the tree -------------------------------------------------------------------------------


def tree_owner(ctx, s, h, rv):
    return and_(*(
        or_(eq(rv.own[p], -1), and_(rv.own[p] >= 0, rv.own[p] < ctx.k, rv.live(rv.own[p]),
                                     _node_has_page_sym(ctx, rv, rv.own[p], p)))
        for p in range(ctx.k)
    ))


def _node_has_page_sym(ctx, rv, e, p):
    return or_(*(and_(eq(e, x), node_has_page(ctx, rv, x, p)) for x in range(ctx.k)))


def tree_chain(ctx, s, h, rv):
    parts = []
    for e in range(ctx.k):
        st = rv.start[e]
        ok = and_(st >= 0, le(st, e), ctx.uni.anc_sym(st, e),
                  _chain_pages(ctx, st, e, lambda p: eq(rv.own[p], e)))
        parts.append(implies(live(rv, e), ok))
    return and_(*parts)


def tree_closed(ctx, s, h, rv):
    uni = ctx.uni
    return and_(*(
        implies(and_(rv.own[p] >= 0, uni.parent[p] >= 0), sel(rv.own, uni.parent[p]) >= 0)
        for p in range(1, ctx.k)
    ))


def tree_paths(ctx, s, h, rv):
    uni = ctx.uni
    parts = []
    for c in range(1, ctx.k):
        for p in range(c):
            mid = and_(eq(uni.parent[c], p), rv.own[c] >= 0, rv.own[p] >= 0, ne(rv.own[p], p))
            parts.append(implies(mid, eq(rv.own[c], rv.own[p])))
    return and_(*parts)


# --- tier states ------------------------------------------------------------------------------


def node_fields(ctx, s, h, rv):
    parts = []
    for e in range(ctx.k):
        parts.append(implies(live(rv, e), and_(
            rv.dev[e] >= 0, rv.dev[e] <= 2, rv.host[e] >= 0, rv.host[e] <= 2, rv.hits[e] >= 0,
            eq(eq(rv.dev[e], LOADING), rv.lbp[e]),
            implies(eq(rv.dev[e], LOADING), eq(rv.host[e], HOST_RESIDENT)),
            implies(eq(rv.host[e], WRITING), and_(not_(ctx.cfg.wb), eq(rv.dev[e], RESIDENT))),
        )))
    return and_(*parts)


def device_closed(ctx, s, h, rv):
    uni = ctx.uni
    parts = []
    for x in range(ctx.k):
        for e in range(x + 1, ctx.k):
            parts.append(implies(
                and_(live(rv, x), live(rv, e), uni.anc[x][e], ne(rv.dev[e], ABSENT)),
                ne(rv.dev[x], ABSENT),
            ))
    return and_(*parts)


# --- queues -------------------------------------------------------------------------------------


def write_queue(ctx, s, h, rv):
    def entry(i, it):
        start, end = it
        return and_(
            start >= 0, start < ctx.k, end >= 0, end < ctx.k, ctx.uni.anc_sym(start, end),
            _chain_pages(ctx, start, end, lambda p: and_(
                _aligned(ctx, rv, start, end, p), eq(sel(rv.host, rv.own[p]), WRITING))),
        )

    return and_(rv.wdone >= 0, le(rv.wdone, rv.wq.n), le(rv.wq.n, rv.wq.cap), _list_entries(rv.wq, entry),
                _disjoint(ctx, rv.wq))


def load_queue(ctx, s, h, rv):
    def entry(i, it):
        start, end = it
        return and_(
            start >= 0, start < ctx.k, end >= 0, end < ctx.k, ctx.uni.anc_sym(start, end), rv.live(end),
            _chain_pages(ctx, start, end, lambda p: and_(
                _aligned(ctx, rv, start, end, p), eq(sel(rv.dev, rv.own[p]), LOADING))),
        )

    # and conversely every page of a LOADING node is in an entry's chain (so the node is
    # locked by lock_accounting: the CP planner never picks it)
    covered = and_(*(implies(and_(rv.own[p] >= 0, eq(sel(rv.dev, rv.own[p]), LOADING)),
                             or_(*(and_(rv.lq.valid(i), ctx.uni.in_chain(it[0], it[1], p))
                                   for i, it in enumerate(rv.lq.items))))
                     for p in range(ctx.k)))
    return and_(rv.ldone >= 0, le(rv.ldone, rv.lq.n), le(rv.lq.n, rv.lq.cap), _list_entries(rv.lq, entry),
                _disjoint(ctx, rv.lq), covered)


def backup_queue(ctx, s, h, rv):
    def entry(i, it):
        start, end = it
        return and_(
            start >= 0, start < ctx.k, end >= 0, end < ctx.k, ctx.uni.anc_sym(start, end),
            _chain_pages(ctx, start, end, lambda p: and_(
                _aligned(ctx, rv, start, end, p), eq(sel(rv.host, rv.own[p]), HOST_RESIDENT))),
        )

    return and_(le(rv.sq.n, rv.sq.cap), le(rv.sdone.n, rv.sq.n), rv.sdone.n >= 0,
                implies(not_(ctx.cfg.storage), eq(rv.sq.n, 0)),
                _list_entries(rv.sq, entry), _disjoint(ctx, rv.sq))


def storage_acks(ctx, s, h, rv):
    w = writes(ctx, s.space, h)

    def ack(i, it):
        rep, act = it
        start, end = rv.sq.items[i]
        return ite(w, and_(eq(rep, act), act >= 0, le(act, ctx.uni.chain_len(start, end))),
                   and_(eq(rep, SKIP), eq(act, SKIP)))

    return _list_entries(rv.sdone, ack)


def prefetch_queue(ctx, s, h, rv):
    uni = ctx.uni

    def entry(i, it):
        q, anc, k, n, done, f = it[:6]
        depth_q = uni.depth_of(q)
        anchor_ok = or_(
            and_(eq(k, 0), eq(anc, -1)),
            and_(k >= 1, anc >= 0, anc < ctx.k, uni.anc_sym(anc, q), eq(uni.depth_of(anc), k),
                 rv.live(anc), eq(sel(rv.host, anc), HOST_RESIDENT)),
        )
        return and_(q >= 0, q < ctx.k, k >= 0, n >= 1, eq(k + n, depth_q), anchor_ok,
                    or_(eq(done, NOT_DONE), and_(done >= 0, le(done, n))), prefetch_flags(ctx, f, done))

    distinct_req = _distinct(rv.pq)
    return and_(le(rv.pq.n, rv.pq.cap), rv.pq.n >= 0, _list_entries(rv.pq, entry), distinct_req,
                implies(not_(and_(ctx.cfg.prefetch, ctx.cfg.storage)), eq(rv.pq.n, 0)))


def prefetch_flags(ctx, f, done):
    """pflags (spec/prefetch_end.py): a timer fires only under the timeout policy; a
    revoke terminates; an operation terminated but not revoked had its read fail (done
    0); slots are freed early only by revoke-frees-in-flight, at the revoke."""
    cfg = ctx.cfg
    freed_ok = has(f, REVOKED) if cfg.has("revoke-frees-in-flight") else False
    return and_(f >= 0, f < 2 * FREED,
                implies(has(f, TIMED_OUT), cfg.timeout),
                implies(has(f, REVOKED), and_(cfg.revoke, has(f, TERMINATED))),
                implies(and_(has(f, TERMINATED), not_(has(f, REVOKED))), and_(cfg.read_fail, eq(done, 0))),
                implies(has(f, FREED), freed_ok))


def release_queue(ctx, s, h, rv):
    return and_(rv.relq_n >= 0, rv.relq_sum >= rv.relq_n)


# --- reference counts -------------------------------------------------------------------------


def lock_accounting(ctx, s, h, rv):
    uni = ctx.uni
    parts = []
    for x in range(ctx.k):
        loads = sum_([ite(and_(rv.lq.valid(i), uni.anc_sym(x, rv.lq.items[i][1])), 1, 0) for i in range(rv.lq.cap)])
        writing = ite(and_(eq(rv.host[x], WRITING), not_(ctx.cfg.wb)), 1, 0)
        running = sum_([ite(and_(rv.run[q] >= 0, uni.anc_sym(x, rv.run[q])), 1, 0) for q in range(ctx.k)])
        parts.append(implies(live(rv, x), eq(rv.lock[x], writing + loads + running)))
    for q in range(ctx.k):  # a running request's lock names a live node on its own path
        e = rv.run[q]
        parts.append(or_(eq(e, -1), and_(ctx.cfg.request_locks, e >= 0, e < ctx.k, rv.live(e), uni.anc_sym(e, q))))
    return and_(*parts)


def href_accounting(ctx, s, h, rv):
    parts = []
    for x in range(ctx.k):
        backups = sum_([ite(and_(rv.sq.valid(i), _in_chain_sym(ctx, rv.sq.items[i][0], rv.sq.items[i][1], x)), 1, 0)
                        for i in range(rv.sq.cap)])
        anchors = sum_([ite(and_(rv.pq.valid(j), eq(rv.pq.items[j][1], x)), 1, 0) for j in range(rv.pq.cap)])
        parts.append(implies(live(rv, x), eq(rv.href[x], backups + anchors)))
    return and_(*parts)


# --- durable marks, registries, plans ------------------------------------------------------


def durable_cached(ctx, s, h, rv):
    return and_(*(implies(rv.durable[p], rv.own[p] >= 0) for p in range(ctx.k)))


def registry(ctx, s, h, rv):
    cfg = ctx.cfg
    on = and_(cfg.wb, cfg.dupr)
    return and_(
        le(rv.dups.n, rv.dups.cap), rv.dups.n >= 0, _page_ids(ctx, rv.dups), _distinct(rv.dups),
        implies(not_(on), eq(rv.dups.n, 0)),
        le(rv.digest.n, rv.digest.cap), rv.digest.n >= 0, _page_ids(ctx, rv.digest), _distinct(rv.digest),
        implies(not_(tracks_digest_round(ctx)), eq(rv.digest.n, 0)),
    )


def release_plan(ctx, s, h, rv):
    on = ctx.cfg.mirror_release_on()
    return and_(
        le(rv.plan.n, rv.plan.cap), rv.plan.n >= 0, _page_ids(ctx, rv.plan), _ascending(rv.plan),
        rv.mismatch >= 0,
        implies(rv.closed, eq(rv.plan.n, 0)),
        implies(not_(on), and_(eq(rv.plan.n, 0), not_(rv.closed), eq(rv.mismatch, 0))),
    )


def plan_durable(ctx, s):
    """Ranks holding the same plan see each live planned node as fully durable alike, and
    no storage backup of it is in flight.

    NOT in STRENGTHENING: it makes rank_agreement under the drain round provable, but it
    is not inductive (insert, writing_check and check_prefetch_progress break it when a
    planned node leaves the tree and comes back, or is staged again, before the commit),
    and its pairwise instances make every obligation several times slower. Kept so the
    gap can be reproduced: docs/proofs.md, "Open"."""
    from .encode.tree import all_durable
    from .formula import Pairs

    def pair(h1, h2):
        a, b = s.rank(h1), s.rank(h2)
        parts = []
        for i in range(a.plan.cap):
            e = a.plan.items[i][0]
            for x in range(ctx.k):
                backed = or_(*(and_(a.sq.valid(j), _in_chain_sym(ctx, a.sq.items[j][0], a.sq.items[j][1], x))
                               for j in range(a.sq.cap)))
                parts.append(implies(and_(a.plan.valid(i), eq(e, x), live(a, x)),
                                     and_(not_(backed), eq(all_durable(ctx, a, x), all_durable(ctx, b, x)))))
        return implies(and_(ctx.cfg.mirror_release_on(), a.plan.same(b.plan)), and_(*parts))

    return [Pairs(pair)]


def flags(ctx, s):
    """hung and halted are one of their codes."""
    return [Fact(and_(s.hung >= 0, s.hung <= max(HUNG.values()), s.halted >= 0, s.halted <= 3))]


def shared_queues(ctx, s):
    """Per-rank copies that every rank changes in the same sync round stay equal."""
    space = s.space
    r0 = s.rank(space.r0)

    def same(h):
        rv = s.rank(h)
        parts = [eq(rv.relq_n, r0.relq_n), eq(rv.relq_sum, r0.relq_sum), eq(rv.mismatch, r0.mismatch),
                 eq(rv.closed, r0.closed)]
        return and_(*parts)

    return [Every(same)]


STRENGTHENING: Dict[str, Strengthening] = {
    x.name: x
    for x in [
        Strengthening("tree_owner", _every(tree_owner),
                      "every cached page belongs to a live node whose page chain contains it"),
        Strengthening("tree_chain", _every(tree_chain),
                      "a live node is a chain from its start page down to its end page, and owns all of it"),
        Strengthening("tree_closed", _every(tree_closed),
                      "cached pages are closed under parents: the tree hangs off the root"),
        Strengthening("tree_paths", _every(tree_paths),
                      "only a node's end page can have a child outside the node (nodes are unbranched runs)"),
        Strengthening("node_fields", _every(node_fields),
                      "tier states are in range; a device copy is LOADING exactly while load_back_pending is set, "
                      "its host copy is resident then, and a host copy is being written only under write-through "
                      "with the device copy resident"),
        Strengthening("device_closed", _every(device_closed),
                      "a node with a device copy has device copies on its whole path to the root"),
        Strengthening("write_queue", _every(write_queue),
                      "D->H copies cover whole nodes, pairwise disjoint, and every page under one is in a node "
                      "whose host copy is WRITING"),
        Strengthening("load_queue", _every(load_queue),
                      "H->D copies cover whole LOADING nodes, pairwise disjoint, each anchored at a live node; "
                      "every page of a LOADING node is under one"),
        Strengthening("backup_queue", _every(backup_queue),
                      "H->L3 backups (until drained) cover whole host-resident nodes, at most one per page"),
        Strengthening("storage_acks", _every(storage_acks),
                      "a writer's ack reports exactly what it stored (a prefix of the op), a single-writer "
                      "follower's ack is the SKIP sentinel"),
        Strengthening("prefetch_queue", _every(prefetch_queue),
                      "a prefetch reserves exactly the request's missing tail, below a live host-resident "
                      "anchor, at most one per request"),
        Strengthening("release_queue", _every(release_queue),
                      "host_mem_release_queue entries hold at least one page each"),
        Strengthening("lock_accounting", _every(lock_accounting),
                      "lock_ref = the node's own write lock (write-through staging) + the load-backs in flight "
                      "and the running requests' locks below or at it; a running request locks a live node on "
                      "its own path"),
        Strengthening("href_accounting", _every(href_accounting),
                      "host_ref_counter = the storage backups covering the node + the prefetches anchored at it"),
        Strengthening("durable_cached", _every(durable_cached),
                      "durable marks exist only for pages in the tree (revoked when a node leaves)"),
        Strengthening("registry", _every(registry),
                      "duplicate registry and reclaimed-victim list hold distinct nodes, only where the "
                      "feature (and the digest) is on"),
        Strengthening("release_plan", _every(release_plan),
                      "a release plan lists nodes in ascending key order (so distinct), is empty once mirror release fail-closed and when "
                      "the feature is off"),
        Strengthening("flags", flags, "hung/halted are one of the spec's sync points"),
        Strengthening("shared_queues", shared_queues,
                      "the release queue, the mismatch count and the fail-closed flag are the same on every "
                      "rank (each is changed only by sync rounds, identically)"),
    ]
}
