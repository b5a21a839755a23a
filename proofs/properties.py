"""The safety properties of spec/properties.py, one z3 encoding each, by the same name.

Invariants: ``fn(ctx, s) -> parts`` (proofs.formula). Transition properties:
``fn(ctx, s, name, t) -> parts`` where ``name`` is the action taken from s to t. Each
mirrors its Python predicate; where the Python reads an explicit state field the
encoding reads the same field of the rank views.
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple

from ..spec.properties import BY_NAME as SPEC_PROPERTIES
from ..spec.state import ABSENT, HOST_RESIDENT, LOADING, RESIDENT, WRITING
from ..spec.prefetch_end import FREED
from .encode.host_eviction import can_reclaim_duplicate
from .encode.prefetch_end import FLAGS, has
from .encode.sync import digest_check_will_fire
from .encode.tree import all_durable, is_device_leaf, live, node_has_page, node_len
from .formula import Every, Fact
from .state import NOT_DONE, RV
from .sym import and_, eq, implies, ite, lt, le, ne, not_, or_, sel, sum_


class Encoded(NamedTuple):
    name: str
    kind: str  # "invariant" | "transition"
    fn: Callable
    doc: str


# --- 1. no ghost ------------------------------------------------------------------------------


def no_ghost(ctx, s):
    def per_rank(h):
        rv = s.rank(h)
        return and_(*(
            implies(live(rv, e), or_(eq(rv.dev[e], RESIDENT), eq(rv.host[e], HOST_RESIDENT)))
            for e in range(ctx.k)
        ))

    return [Every(per_rank)]


# --- 2. no use-after-free -----------------------------------------------------------------


def _pages_held(ctx, rv: RV, lst, first, dev_ok, host_ok, cond=True):
    """Every page of every in-flight entry (index >= first) is held as the copy needs."""
    parts = []
    for i in range(lst.cap):
        start, end = lst.items[i]
        inflight = and_(cond, lst.valid(i), le(first, i))
        for p in range(ctx.k):
            e = rv.own[p]
            ok = and_(
                e >= 0,
                or_(*(eq(sel(rv.host, e), x) for x in host_ok)),
                or_(*(eq(sel(rv.dev, e), x) for x in dev_ok)) if dev_ok else True,
            )
            parts.append(implies(and_(inflight, ctx.uni.in_chain(start, end, p)), ok))
    return and_(*parts)


def _prefetch_slots_held(rv):
    """No L3->H read in flight into host slots already freed (prefetch_end.read_into_freed)."""
    return and_(*(not_(and_(rv.pq.valid(i), has(it[FLAGS], FREED), eq(it[4], NOT_DONE)))
                  for i, it in enumerate(rv.pq.items)))


def no_use_after_free(ctx, s):
    def per_rank(h):
        rv = s.rank(h)
        reads_for_storage = not_(and_(ctx.cfg.single_writer, not_(s.space.is_r0(h))))
        return and_(
            _prefetch_slots_held(rv),
            _pages_held(ctx, rv, rv.wq, rv.wdone, (RESIDENT,), (WRITING,)),
            _pages_held(ctx, rv, rv.lq, rv.ldone, (LOADING,), (HOST_RESIDENT,)),
            _pages_held(ctx, rv, rv.sq, rv.sdone.n, None, (HOST_RESIDENT,), reads_for_storage),
        )

    return [Every(per_rank)]


# --- 3. slot conservation -----------------------------------------------------------------


def device_held(ctx, rv: RV):
    return sum_([ite(and_(live(rv, e), ne(rv.dev[e], ABSENT)), node_len(ctx, rv, e), 0) for e in range(ctx.k)])


def host_held(ctx, rv: RV):
    nodes = sum_([ite(and_(live(rv, e), ne(rv.host[e], ABSENT)), node_len(ctx, rv, e), 0) for e in range(ctx.k)])
    # a prefetch whose slots were freed early (revoke-frees-in-flight) holds none
    pq = sum_([ite(and_(rv.pq.valid(i), not_(has(rv.pq.items[i][FLAGS], FREED))), rv.pq.items[i][3], 0)
               for i in range(rv.pq.cap)])
    return nodes + pq + rv.relq_sum


def slot_conservation(ctx, s):
    cfg = ctx.cfg

    def per_rank(h):
        rv = s.rank(h)
        return and_(
            rv.dev_free >= 0,
            eq(rv.dev_free + device_held(ctx, rv), cfg.device_pages),
            rv.host_free >= 0,
            eq(rv.host_free + host_held(ctx, rv), cfg.host_pages),
        )

    return [Every(per_rank)]


# --- 4. durable only when acked -------------------------------------------------------------


def durable_only_when_acked(ctx, s, name, t):
    space = s.space
    if name == "drain_storage_control_queues":
        nb = space.min(lambda h: s.rank(h).sdone.n)
    else:
        nb = 0

    def per_rank(h):
        rs, rt = s.rank(h), t.rank(h)
        writer = s.rank(space.r0)
        parts = []
        for p in range(ctx.k):
            new = and_(rt.durable[p], not_(rs.durable[p]))
            allowed = []
            for i in range(ctx.k if name == "drain_storage_control_queues" else 0):
                start, end = rs.sq.items[i]
                actual = ite(ctx.cfg.single_writer, writer.sdone.items[i][1], rs.sdone.items[i][1])
                pos = ctx.uni.depth[p] - ctx.uni.depth_of(start)
                allowed.append(and_(lt(i, nb), ctx.uni.in_chain(start, end, p), pos < actual))
            parts.append(implies(new, or_(*allowed)))
        return and_(*parts)

    return [Every(per_rank)]


# --- 5. release safety ----------------------------------------------------------------------


def release_safety(ctx, s, name, t):
    """As spec release_safety: a duplicate the step itself protected while its reclaim
    ran (``ctx.held``, set by encode.actions.step) does not count as spared."""
    cfg = ctx.cfg
    held = ctx.held

    def per_rank(h):
        rs, rt = s.rank(h), t.rank(h)
        parts = []
        for e in range(ctx.k):
            dropped = and_(
                live(rs, e), live(rt, e),
                eq(rs.host[e], HOST_RESIDENT), eq(rt.host[e], ABSENT), ne(rt.dev[e], ABSENT),
            )
            wt_ok = and_(
                not_(rt.lock[e] > 0),
                eq(rt.dev[e], RESIDENT),
                # durable when released: before the step or after (a drain commits
                # before its acks' marks, which a bounded LRU may evict)
                all_durable(ctx, rt._replace(durable=tuple(or_(a, b) for a, b in zip(rs.durable, rt.durable))), e),
            )
            spared = or_(*(
                and_(
                    rs.dups.valid(j), ne(rs.dups.items[j][0], e), ne(rs.dups.items[j][0], held),
                    live(rt, rs.dups.items[j][0]),
                    can_reclaim_duplicate(ctx, rs, rs.dups.items[j][0]),  # before and after
                    can_reclaim_duplicate(ctx, rt, rs.dups.items[j][0]),
                    not_(_device_leaf_at(ctx, rs, rs.dups.items[j][0])),
                )
                for j in range(rs.dups.cap)
            ))
            # a node the step's own eviction held locked was no device leaf while it ran
            held_e = ctx.evict_held(h, e) if ctx.evict_held else False
            wb_ok = not_(and_(is_device_leaf(ctx, rs, e), not_(held_e), spared))
            ok = and_(
                not_(rt.href[e] > 0),
                not_(rt.lbp[e]),
                ite(cfg.wb, wb_ok, wt_ok),
            )
            parts.append(implies(dropped, ok))
        return and_(*parts)

    return [Every(per_rank)]


def _device_leaf_at(ctx, rv, e):
    return or_(*(and_(eq(e, x), is_device_leaf(ctx, rv, x)) for x in range(ctx.k)))


# --- 8. data integrity: the tree is prefix-closed -----------------------------------------


def prefix_closed(ctx, s):
    """Every live node's start page is a root or its parent page is cached."""
    uni = ctx.uni

    def per_rank(h):
        rv = s.rank(h)
        parts = []
        for e in range(ctx.k):
            above = uni.parent_of(sel(rv.start, e))
            cached = or_(*(and_(eq(above, a), rv.own[a] >= 0) for a in range(ctx.k)))
            parts.append(implies(live(rv, e), or_(eq(above, -1), cached)))
        return and_(*parts)

    return [Every(per_rank)]


# --- 6. rank agreement ----------------------------------------------------------------------


def replica_same(ctx, a: RV, b: RV):
    """replica(a) == replica(b): tree, tier states, pools, queues, fail-closed flag."""
    parts = [eq(a.own[p], b.own[p]) for p in range(ctx.k)] + [eq(a.run[p], b.run[p]) for p in range(ctx.k)]
    for e in range(ctx.k):
        la, lb = live(a, e), live(b, e)
        fields = and_(*(eq(getattr(a, f)[e], getattr(b, f)[e])
                        for f in ("start", "dev", "host", "lock", "href", "hits", "lbp", "rel")))
        parts.append(eq(la, lb))
        parts.append(implies(and_(la, lb), fields))
    parts += [eq(a.dev_free, b.dev_free), eq(a.host_free, b.host_free), eq(a.closed, b.closed)]
    parts += [a.wq.same(b.wq), a.lq.same(b.lq), a.sq.same(b.sq)]
    parts.append(eq(a.pq.n, b.pq.n))
    for i in range(a.pq.cap):
        parts.append(implies(a.pq.valid(i), eq(a.pq.items[i][:4], b.pq.items[i][:4])))
    parts += [eq(a.relq_n, b.relq_n), eq(a.relq_sum, b.relq_sum)]
    return and_(*parts)


def rank_excuse(ctx, s):
    """When replicas may differ: halted, hung, one rank, or a digest check bound to fire."""
    return or_(ne(s.halted, 0), ne(s.hung, 0), not_(s.space.multi), digest_check_will_fire(ctx, s))


def rank_agreement(ctx, s):
    space = s.space
    r0 = s.rank(space.r0)
    excused = rank_excuse(ctx, s)
    return [Every(lambda h: or_(excused, replica_same(ctx, s.rank(h), r0)))]


# --- 7. counter sanity, locked never evicted ------------------------------------------------


def counter_sanity(ctx, s):
    def per_rank(h):
        rv = s.rank(h)
        return and_(*(implies(live(rv, e), and_(rv.lock[e] >= 0, rv.href[e] >= 0)) for e in range(ctx.k)))

    return [Every(per_rank)]


def locked_never_evicted(ctx, s, name, t):
    def per_rank(h):
        rs, rt = s.rank(h), t.rank(h)
        return and_(*(
            implies(
                and_(live(rs, e), rs.lock[e] > 0, eq(rs.dev[e], RESIDENT)),
                and_(live(rt, e), ne(rt.dev[e], ABSENT)),
            )
            for e in range(ctx.k)
        ))

    return [Every(per_rank)]


# --- planner determinism (seed 004's CP load-back planner) --------------------------------


def planner_determinism(ctx, s, name, t):
    """A load_back from identical replicas drops the same device copies on every rank.
    In the symbolic pre-state the replicas are identical exactly in the "agree" case
    (proofs.obligations.setup; the "diverged" one asserts some rank differs, where the
    property says nothing); on concrete states it is computed."""
    if name != "load_back":
        return []
    space = s.space
    if space.symbolic and not space.closed:
        if not ctx.replicas_agree:
            return []
        same = True
    else:
        r0 = s.rank(space.r0)
        same = space.all(lambda h: replica_same(ctx, s.rank(h), r0))

    def dropped(h, e):
        rs, rt = s.rank(h), t.rank(h)
        return and_(live(rs, e), eq(rs.dev[e], RESIDENT), or_(not_(live(rt, e)), eq(rt.dev[e], ABSENT)))

    cond = and_(ctx.cfg.cp, same)
    return [Every(lambda h: implies(cond, and_(*(eq(dropped(h, e), dropped(space.r0, e)) for e in range(ctx.k)))))]


# --- beyond the list ----------------------------------------------------------------------


def no_collective_hang(ctx, s):
    return [Fact(eq(s.hung, 0))]


PROPERTIES: Dict[str, Encoded] = {
    p.name: p
    for p in [
        Encoded("no_ghost", "invariant", no_ghost, SPEC_PROPERTIES["no_ghost"].doc),
        Encoded("no_use_after_free", "invariant", no_use_after_free, SPEC_PROPERTIES["no_use_after_free"].doc),
        Encoded("slot_conservation", "invariant", slot_conservation, SPEC_PROPERTIES["slot_conservation"].doc),
        Encoded("durable_only_when_acked", "transition", durable_only_when_acked, SPEC_PROPERTIES["durable_only_when_acked"].doc),
        Encoded("release_safety", "transition", release_safety, SPEC_PROPERTIES["release_safety"].doc),
        Encoded("rank_agreement", "invariant", rank_agreement, SPEC_PROPERTIES["rank_agreement"].doc),
        Encoded("counter_sanity", "invariant", counter_sanity, SPEC_PROPERTIES["counter_sanity"].doc),
        Encoded("locked_never_evicted", "transition", locked_never_evicted, SPEC_PROPERTIES["locked_never_evicted"].doc),
        Encoded("no_collective_hang", "invariant", no_collective_hang, SPEC_PROPERTIES["no_collective_hang"].doc),
        Encoded("prefix_closed", "invariant", prefix_closed, SPEC_PROPERTIES["prefix_closed"].doc),
        Encoded("planner_determinism", "transition", planner_determinism, SPEC_PROPERTIES["planner_determinism"].doc),
    ]
}



def coverage_gaps():
    """Disagreements with the spec's property records (``proofs``: encoded here): a
    property that says it is encoded and is not, an encoding the record does not claim,
    an encoding of another kind."""
    from .epr_properties import UPROPS

    claimed = {n for n, p in SPEC_PROPERTIES.items() if p.proofs}
    out = [f"spec property {n!r} has no encoding" for n in sorted(claimed - set(PROPERTIES) - set(UPROPS))]
    out += [f"encoding {n!r}: the spec's record does not say proofs=True" for n in sorted(set(PROPERTIES) - claimed)]
    out += [f"{n}: kind {PROPERTIES[n].kind} != spec {SPEC_PROPERTIES[n].kind}"
            for n in PROPERTIES if n in SPEC_PROPERTIES and PROPERTIES[n].kind != SPEC_PROPERTIES[n].kind]
    return out
