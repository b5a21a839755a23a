"""spec/durable.py: seed 000's bounded durable LRU (durable_capacity) and its anti-churn
age gate (refresh_rounds).

The LRU's order and its ages are not part of the encoded state: each use sees, per rank,
a free order (one stamp per page, larger = marked more recently) and free ages, which
over-approximates every order and age the spec can hold; on concrete states
(proofs.agreement) they are the state's own (``ctx.dlru_of``). The marks are state
(``durable``), and which marks a drain round's capacity eviction drops follows the spec
exactly given the order: once a round marks a page, only the ``durable_capacity`` most
recently marked pages keep their marks."""

from __future__ import annotations

from ..sym import and_, eq, implies, ite, lt, not_, or_, sum_
from .tree import node_has_page


def lru_view(ctx, record=True):
    """Per rank handle h: (stamps, ages), one term per page. A view the step's effect reads
    is recorded for its CTI (dlru_into_state); a guard's own view is not (``record``)."""
    if ctx.dlru_of is not None:
        return ctx.dlru_of
    tag = ctx.int("dlru")  # a fresh order per use
    stamps = [ctx.rank_int(f"{tag}.stamp{p}") for p in range(ctx.k)]
    ages = [ctx.rank_int(f"{tag}.age{p}") for p in range(ctx.k)]
    view = lambda h: ([f(h) for f in stamps], [f(h) for f in ages])
    if record:
        ctx.__dict__.setdefault("_dlru_views", []).append(view)
    return view


def dlru_into_state(ctx, value, reps, state):
    """A CTI's pre-state with the durable LRU its step saw (``value``: a term's value in
    the z3 model; ``reps``: a rank handle per rank of ``state``): each rank's marked pages,
    least recently marked first by the free stamps, with the free ages (capped at
    refresh_rounds, 0 without the gate), so the explicit spec replays the same capacity
    eviction. Left alone when the step used no LRU view or more than one."""
    views = ctx.__dict__.get("_dlru_views", ())
    if len(views) != 1 or ctx.dlru_of is not None:
        return state
    cap = value(ctx.cfg.refresh_rounds)
    ranks = []
    for h, rs in zip(reps, state.ranks):
        stamps, ages = ([value(x) for x in xs] for xs in views[0](h))
        marked = sorted((p for p in range(len(stamps)) if rs.durable >> p & 1), key=lambda p: (stamps[p], p))
        ranks.append(rs._replace(dlru=tuple((p, min(max(ages[p], 0), cap)) for p in marked)))
    return state._replace(ranks=tuple(ranks))


def fresh(ctx, rv, end, ages):
    """durable.fresh: every mark of the node is younger than refresh_rounds (always,
    without the gate); a page without a mark counts as old."""
    cap = ctx.cfg.refresh_rounds
    return or_(eq(cap, 0), and_(*(implies(node_has_page(ctx, rv, end, p), ages[p] < cap) for p in range(ctx.k))))


def ageing(ctx, s):
    """durable.ageing on some rank: a mark younger than the gate (an idle drain round
    still ages it). Ages are free here, the state's own on concrete states."""
    cap = ctx.cfg.refresh_rounds
    view = lru_view(ctx, record=False)

    def on_rank(h):
        rv = s.rank(h)
        ages = view(h)[1]
        return or_(*(and_(rv.durable[p], lt(ages[p], cap)) for p in range(ctx.k)))

    return and_(lt(0, cap), s.space.any(on_rank))


def capped(ctx, durable, new, order, stamps):
    """The marks after a round marked ``new`` (page p's last mark in that round at
    position ``order[p]``): over capacity, the least recently marked lose theirs."""
    cap = ctx.cfg.durable_capacity
    k = ctx.k
    marked = [or_(durable[p], new[p]) for p in range(k)]

    def newer(q, p):
        return or_(and_(new[q], not_(new[p])), and_(new[q], new[p], order[q] > order[p]),
                   and_(not_(new[q]), not_(new[p]), stamps[q] > stamps[p]))

    any_new = or_(*new)
    out = []
    for p in range(k):
        above = sum_([ite(and_(marked[q], newer(q, p)), 1, 0) for q in range(k) if q != p])
        out.append(and_(marked[p], or_(eq(cap, 0), not_(any_new), above < cap)))
    return tuple(out)
