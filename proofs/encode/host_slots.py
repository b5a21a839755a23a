"""spec/slots.py, host pool: which host slot each page, prefetch and release entry holds.

Only under ``ProofConfig.slots`` (the spec's ``slots``); otherwise every function here
returns the rank view unchanged and the fields keep Python literals, so the other
obligations pay nothing. Slots never decide a step (spec/slots.py: the counters stay
as they are), so the obligations proved with ``slots`` off hold with it on.

Fields of the rank view (proofs/state.py RV):
- ``hslot``: per page its host slot (-1: none), as spec ``hslot``;
- ``hfree``: the free set, an array Int -> Bool (spec ``hfree`` bit x = ``hfree[x]``);
- ``rset``: the slots the release queue holds, an array (spec ``rslots``, flattened:
  the drain round frees whole entries, first to last, and ``relq`` keeps their sizes);
- each ``pq`` entry carries its reserved slots as components ``PSLOTS`` .. ``PSLOTS + k - 1``
  (spec ``pslots``, aligned with ``pq``; -1 past the entry's ``n`` and once freed);
- ``hok``: every slot a step took was a free slot of the pool, not queued for release
  (see ``pick``).

Allocation: the spec takes the lowest free slots in page order. The encoding takes
``pick(A, j)``, an uninterpreted function of the free set A and the index j: a
deterministic choice from the free set, as the spec's is, but any one. A step whose
picks are not distinct free slots of the pool has ``hok`` false in its post-state,
and the obligation is ``hok => slot_ownership``. Such picks do not exist in the spec
(slot_conservation and slot_ownership give as many free slots as the guard's counter
check asked for), so every spec step is one whose picks are the spec's lowest slots.
"""

from __future__ import annotations

import z3

from ...spec.prefetch_end import FREED
from ..sym import and_, const, eq, ite, lt, ne, not_, sel

PSLOTS = 6  # index of an entry's first reserved slot in a pq item (after pdone, pflags)
INT = z3.IntSort()
SET = z3.ArraySort(INT, z3.BoolSort())


_a, _b = z3.Bools("hslot!a hslot!b")
_AND, _OR, _NOT = z3.And(_a, _b).decl(), z3.Or(_a, _b).decl(), z3.Not(_a).decl()


def on(ctx) -> bool:
    return bool(getattr(ctx.cfg, "slots", False))


def empty_set():
    return z3.K(INT, False)


def set_of(slots):
    """A concrete set of slots as an array (agreement, initial states)."""
    out = empty_set()
    for x in slots:
        out = z3.Store(out, x, True)
    return out


def full_set(cap):
    """Every slot of a pool of ``cap`` slots free (the initial state)."""
    x = z3.Int("hslot!x")
    return z3.Lambda([x], z3.And(x >= 0, x < const(cap)))


def _pick(ctx):
    """pick(A, j): the j-th slot taken from free set A. With a fixed pool size (concrete
    models, the counterexample search) the spec's own choice, the j-th lowest free slot
    (-1: none), so that the encoding's steps are exactly the spec's; else a free
    function of A and j."""
    cap = ctx.cfg.host_pages
    if isinstance(cap, int):
        return lambda A, j: _lowest(A, j, cap)
    fn = ctx.__dict__.get("_hpick")
    if fn is None:
        fn = ctx._hpick = z3.Function(f"hpick!{ctx.tag}", SET, INT, INT)
    return fn


def _lowest(A, j, cap: int):
    out = z3.IntVal(-1)
    for x in reversed(range(cap)):
        below = sum(z3.If(z3.Select(A, y), 1, 0) for y in range(x)) if x else z3.IntVal(0)
        out = z3.If(z3.And(z3.Select(A, x), below == j), x, out)
    return out


def _take(ctx, rv, n, cond):
    """``n`` slots (a term <= k) from rv's free set where ``cond``: (rv, slot j for j < k;
    -1 past n). ``hok`` records that they are distinct free slots of the pool, not queued."""
    A = rv.hfree
    cap = ctx.cfg.host_pages
    got = [ite(and_(cond, lt(j, n)), _pick(ctx)(A, j), -1) for j in range(ctx.k)]
    ok = []
    free = A
    for j in range(ctx.k):
        c = and_(cond, lt(j, n))
        x = _pick(ctx)(A, j)
        ok.append(z3.Implies(const(c), z3.And(x >= 0, x < const(cap), z3.Select(A, x), z3.Not(z3.Select(rv.rset, x)))))
        for i in range(j):
            ok.append(z3.Implies(const(c), _pick(ctx)(A, i) != x))
        free = ite(c, z3.Store(free, x, False), free)
    return rv._replace(hfree=free, hok=and_(rv.hok, *ok)), got


def _free(ctx, rv, slot, cond):
    """Slot ``slot`` back to the free set where ``cond`` (and it names a slot)."""
    return rv._replace(hfree=ite(and_(cond, slot >= 0), z3.Store(rv.hfree, slot, True), rv.hfree))


# --- nodes (slots.take / slots.give) ---------------------------------------------------------


def take_node(ctx, rv, end, cond):
    """slots.take(pool "h", chain(start, end)): the node's pages, in path order, take
    the first free slots."""
    if not on(ctx):
        return rv
    from .tree import node_has_page, node_len

    start = sel(rv.start, end)
    rv2, got = _take(ctx, rv, node_len(ctx, rv, end), cond)
    depth = ctx.uni.depth_of
    hslot = tuple(
        ite(and_(cond, node_has_page(ctx, rv, end, p)), sel(got, depth(p) - depth(start)), rv.hslot[p])
        for p in range(ctx.k)
    )
    return rv2._replace(hslot=hslot)


def give_node(ctx, rv, end, cond):
    """slots.give(pool "h", chain(start, end)): the node's pages free their slots."""
    if not on(ctx):
        return rv
    from .tree import node_has_page

    hslot = list(rv.hslot)
    for p in range(ctx.k):
        c = and_(cond, node_has_page(ctx, rv, end, p))
        rv = _free(ctx, rv, rv.hslot[p], c)
        hslot[p] = ite(c, -1, rv.hslot[p])
    return rv._replace(hslot=tuple(hslot))


# --- prefetches (slots.reserve / adopt / release) and the release queue ------------------------


def reserve(ctx, rv, n, cond):
    """slots.reserve: (rv, the entry's slot components, k of them)."""
    if not on(ctx):
        return rv, ()
    return _take(ctx, rv, n, cond)


def entry_slots(rv, item):
    return item[PSLOTS:]


def finish_prefetch(ctx, rv, item, pages_at, have, completed, tail, cond=True):
    """check_prefetch_progress on one rank: the fetched pages not in the tree adopt
    their reserved slots (``pages_at(j)``: the page at fetched position j, a condition
    per page), the first ``have`` slots are freed, the tail [completed, n) goes to the
    release queue (prefetch-double-free: also freed at once)."""
    if not on(ctx):
        return rv
    held = entry_slots(rv, item)
    n = item[3]
    hslot = list(rv.hslot)
    for p in range(ctx.k):
        for j in range(ctx.k):
            c = and_(cond, pages_at(j, p), not_(lt(j, have)), lt(j, completed))
            hslot[p] = ite(c, held[j], hslot[p])
    rv = rv._replace(hslot=tuple(hslot))
    double = ctx.cfg.has("prefetch-double-free")
    rset = rv.rset
    for j in range(ctx.k):
        queued = and_(cond, ne(tail, 0), not_(lt(j, completed)), lt(j, n))
        rv = _free(ctx, rv, held[j], and_(cond, lt(j, have)))
        if double:
            rv = _free(ctx, rv, held[j], queued)
        rset = ite(and_(queued, held[j] >= 0), z3.Store(rset, held[j], True), rset)
    return rv._replace(rset=rset)


def free_entry(ctx, item, rv, cond):
    """prefetch_end._free_slots: the entry's slots freed (its components become -1).
    Returns (rv, the new item)."""
    if not on(ctx):
        return rv, item
    from .prefetch_end import has

    held = entry_slots(rv, item)
    go = and_(cond, not_(has(item[PSLOTS - 1], FREED)))
    for j, x in enumerate(held):
        rv = _free(ctx, rv, x, and_(go, lt(j, item[3])))
    return rv, item[:PSLOTS] + tuple(ite(go, -1, x) for x in held)


def drain_release(ctx, rv, whole):
    """The drain round frees the release queue's first MIN entries: all of them when the
    MIN is this rank's count (``whole``), else some entries (a subset of the slots)."""
    if not on(ctx):
        return rv
    part = ctx.__dict__.get("_rpart")
    if part is None:
        part = ctx._rpart = z3.Function(f"relq_part_slots!{ctx.tag}", SET, SET)
    # array maps (decidable with store, select and constant arrays), not lambdas
    go = ite(whole, rv.rset, z3.Map(_AND, rv.rset, part(rv.rset)))
    return rv._replace(hfree=z3.Map(_OR, rv.hfree, go), rset=z3.Map(_AND, rv.rset, z3.Map(_NOT, go)))


def same_slots(a, b, k: int):
    """Equal host-slot fields (spec hslot, hfree, rslots as a set; pslots are pq's)."""
    if isinstance(a.hfree, bool) and isinstance(b.hfree, bool):
        return True
    parts = [eq(a.hslot[p], b.hslot[p]) for p in range(k)]
    parts += [a.hfree == b.hfree, a.rset == b.rset]
    return and_(*parts)


def off_fields(k: int) -> dict:
    """The fields' values with slots off: literals, never named or solved."""
    return {"hslot": (-1,) * k, "hfree": False, "rset": False, "hok": True}


# --- counterexamples (proofs/cti.py): model values back to the spec's fields -----------------


def model_members(model, arr, pool: int):
    """The slots of [0, pool) in a set term, under a z3 model."""
    return [x for x in range(pool) if z3.is_true(model.eval(z3.Select(arr, x), model_completion=True))]


def to_spec_fields(vals, relq) -> dict:
    """RankState host-slot fields from a rank's model values (``rv_values`` with a pool):
    pslots from each pq entry's first n components (none once FREED), rslots split
    like ``relq`` (its sizes), in slot order."""
    pslots = []
    for it in vals["pq"]:
        n, flags = it[3], it[PSLOTS - 1]
        pslots.append(() if flags & FREED else tuple(it[PSLOTS:PSLOTS + n]))
    members, rslots, at = list(vals["rset"]), [], 0
    for size in relq:
        rslots.append(tuple(members[at:at + size]))
        at += size
    return {"hslot": tuple(vals["hslot"]), "hfree": sum(1 << x for x in vals["hfree"]),
            "pslots": tuple(pslots), "rslots": tuple(rslots)}


def device_packed(m, rs):
    """A device half for a counterexample's state (the bounded encoding has no device
    slots): the device-held pages, in page order, on the lowest slots."""
    from ...spec.state import ABSENT as NONE, live_nodes

    dslot = [-1] * m.pages.count
    nxt = 0
    for e in sorted(live_nodes(rs)):
        if rs.nodes[e].dev == NONE:
            continue
        for p in m.pages.chain(rs.nodes[e].start, e):
            dslot[p] = nxt
            nxt += 1
    free = sum(1 << x for x in range(nxt, m.cfg.device_pages))
    return rs._replace(dslot=tuple(dslot), dfree=free)


def with_device_half(m, pre, a, post):
    """(pre, post) of a counterexample with device slots: the pre-state's packed
    (``device_packed``), the post-state's those of the spec's own successor, when
    it steps (the bounded encoding decides nothing about them)."""
    pre = pre._replace(ranks=tuple(device_packed(m, rs) for rs in pre.ranks))
    try:
        t = m.next_state(pre, a)
    except Exception:  # the replay reports it (cti.replay)
        t = None
    if t is not None:
        post = post._replace(ranks=tuple(r._replace(dslot=x.dslot, dfree=x.dfree) for r, x in zip(post.ranks, t.ranks)))
    return pre, post
