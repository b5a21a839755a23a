"""spec/prefetch_end.py: how a prefetch ends. The stop-policy vote (MAX of
[1 - can_terminate, terminated]), a rank's timer firing (prefetch_timeout), a rank's read
failing midway (prefetch_read_fails), the scheduler's revoke (prefetch_revoke) and the
drain round retiring it (retire_revoked).

``pflags`` is the sixth component of a ``pq`` entry, per rank, an integer with the spec's
bits (0 where the config tracks none); ``has`` tests a bit of a term or a literal.
"""

from __future__ import annotations

from ...spec.prefetch_end import FREED, NOT_DONE, REVOKED, TERMINATED, TIMED_OUT
from ..sym import SymList, and_, eq, ite, ne, not_, or_
from .tree import live
from .write_path import rank_param, rank_view

FLAGS = 5  # index of pflags in a pq entry


def has(f, bit: int):
    if isinstance(f, int):
        return bool(f & bit)
    return eq((f / bit) % 2, 1)


def with_bit(f, bit: int):
    return ite(has(f, bit), f, f + bit)


def flags_at(rv, i):
    return rv.pq.at(i)[FLAGS]


def set_flags(rv, i, bits, cond=True, **entry):
    """Entry i of the rank's pq with ``bits`` set in its pflags (and the entry components
    ``entry`` names, by position: pdone)."""
    items = []
    for j, it in enumerate(rv.pq.items):
        f = it[FLAGS]
        for b in bits:
            f = with_bit(f, b)
        done = entry.get("pdone", it[4])
        items.append(ite(and_(cond, eq(i, j)), it[:4] + (done, f) + it[6:], it))
    return rv._replace(pq=SymList(rv.pq.cap, rv.pq.n, items, rv.pq.overflow))


# --- the vote ------------------------------------------------------------------------------


def completed(rv, i):
    """The read finished with every page the hit query found (a failed read did not)."""
    return and_(ne(rv.pq.at(i)[4], NOT_DONE), not_(has(flags_at(rv, i), TERMINATED)))


def can_terminate(ctx, rv, i):
    """A rank's stop-policy vote: best_effort at once, wait_complete once its read
    completed, timeout once completed or its timer fired."""
    cfg = ctx.cfg
    return or_(and_(not_(cfg.wait_complete), not_(cfg.timeout)), completed(rv, i),
               and_(cfg.timeout, has(flags_at(rv, i), TIMED_OUT)))


def terminate_vote(ctx, s, i):
    """The MAX all-reduce: every rank can terminate, or the operation is terminated on
    some rank (variant terminated-half-dropped: the vote carries can_terminate only)."""
    space = s.space
    every = space.all(lambda h: can_terminate(ctx, s.rank(h), i))
    if ctx.cfg.has("terminated-half-dropped"):
        return every
    return or_(every, space.any(lambda h: has(flags_at(s.rank(h), i), TERMINATED)))


def skips_vote(ctx, s, i):
    """A rank that votes on its own goes ahead while the vote says go on:
    prefetch-vote-skipped (a rank that can terminate), timeout-local-vote (a rank whose
    timer fired)."""
    space, cfg = s.space, ctx.cfg
    out = []
    if cfg.has("prefetch-vote-skipped"):
        out.append(space.any(lambda h: can_terminate(ctx, s.rank(h), i)))
    if cfg.has("timeout-local-vote"):
        out.append(space.any(lambda h: has(flags_at(s.rank(h), i), TIMED_OUT)))
    return or_(*out)


def _op_param(ctx):
    i = ctx.int("op")
    ctx.side.append(and_(i >= 0, i < ctx.k))
    return i


# --- prefetch_timeout ------------------------------------------------------------------------


def timeout_params(ctx, s):
    return {"rank": rank_param(ctx), "op": _op_param(ctx)}


def timeout_guard(ctx, s, a):
    rv = rank_view(s, a["rank"])
    i = a["op"]
    f = flags_at(rv, i)
    return and_(ctx.cfg.timeout, i < rv.pq.n, not_(has(f, TIMED_OUT)), not_(has(f, REVOKED)),
                not_(completed(rv, i)))


def prefetch_timeout(ctx, s, a):
    return s.only(a["rank"], lambda h, rv: set_flags(rv, a["op"], (TIMED_OUT,)))


# --- prefetch_read_fails ---------------------------------------------------------------------


def read_fails_params(ctx, s):
    return {"rank": rank_param(ctx), "op": _op_param(ctx)}


def read_fails_guard(ctx, s, a):
    rv = rank_view(s, a["rank"])
    i = a["op"]
    return and_(ctx.cfg.read_fail, i < rv.pq.n, eq(rv.pq.at(i)[4], NOT_DONE))


def prefetch_read_fails(ctx, s, a):
    """The rank marks the operation terminated; nothing it read is usable (pdone 0)."""
    return s.only(a["rank"], lambda h, rv: set_flags(rv, a["op"], (TERMINATED,), pdone=0))


# --- prefetch_revoke -------------------------------------------------------------------------


def revoke_params(ctx, s):
    return {"op": _op_param(ctx)}


def revoke_guard(ctx, s, a):
    i = a["op"]
    space = s.space
    rv0 = s.rank(space.r0)
    op0 = rv0.pq.at(i)[:4]

    def same(h):
        pq = s.rank(h).pq
        return and_(i < pq.n, eq(pq.at(i)[:4], op0))

    return and_(ctx.cfg.revoke, i < rv0.pq.n, space.all(same), not_(has(flags_at(rv0, i), REVOKED)))


def free_slots(ctx, rv, j, cond=True):
    """Entry j's host slots go back to the pool, once (FREED)."""
    from .host_slots import free_entry

    go = and_(cond, not_(has(rv.pq.items[j][FLAGS], FREED)))
    rv = rv._replace(host_free=ite(go, rv.host_free + rv.pq.items[j][3], rv.host_free))
    rv, item = free_entry(ctx, rv.pq.items[j], rv, cond)
    items = list(rv.pq.items)
    items[j] = item
    rv = rv._replace(pq=SymList(rv.pq.cap, rv.pq.n, items, rv.pq.overflow))
    return set_flags(rv, j, (FREED,), go)


def prefetch_revoke(ctx, s, a):
    """Every rank terminates the operation; with revoke-frees-in-flight the host slots
    are freed now, while a read may still write into them."""
    i = a["op"]
    early = ctx.cfg.has("revoke-frees-in-flight")

    def on_rank(h, rv):
        rv = set_flags(rv, i, (REVOKED, TERMINATED))
        if early:
            rv = _free_at(ctx, rv, i)
        return rv

    return s.map(on_rank)


def _free_at(ctx, rv, i):
    for j in range(rv.pq.cap):
        rv = free_slots(ctx, rv, j, eq(i, j))
    return rv


# --- the drain round's _drain_revoke -----------------------------------------------------------


def ready(ctx, s, j):
    """Entry j is revoked (rank 0's flags) and every rank's read has settled."""
    space = s.space
    rv0 = s.rank(space.r0)
    return and_(ctx.cfg.revoke, rv0.pq.valid(j), has(rv0.pq.items[j][FLAGS], REVOKED),
                space.all(lambda h: ne(s.rank(h).pq.items[j][4], NOT_DONE)))


def revokes_ready(ctx, s):
    return or_(*(ready(ctx, s, j) for j in range(s.rank(s.space.r0).pq.cap)))


def retire_revoked(ctx, s):
    """Each ready revoke frees its host slots and releases its anchor, then leaves pq
    (highest index first, so the lower ones keep their positions)."""
    cap = s.rank(s.space.r0).pq.cap
    go = [ready(ctx, s, j) for j in range(cap)]

    def on_rank(h, rv):
        for j in reversed(range(cap)):
            rv = free_slots(ctx, rv, j, go[j])
            anc = rv.pq.items[j][1]
            rv = rv.set_fields(anc, and_(go[j], anc >= 0, live(rv, anc)), href=rv.field("href", anc) - 1)
            rv = rv._replace(pq=rv.pq.remove_at(j, go[j]))
        return rv

    return s.map(on_rank)
