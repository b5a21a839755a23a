"""Spec actions over the page sort (proofs.paged): one rank's step, for forests of any size.

Each encoding takes the unbounded context ``u`` and a rank view and returns the view
after the step, as EPR updates (a field becomes a lambda over the old fields). What
couples a rank to its peers (whether some replica takes the write-back path, whether the
agreed host allocation succeeds) and what the spec decides with counters the page sort
does not hold (how many pages evict_host frees before it stops) are free choices,
constrained by what the spec guarantees about them. So each encoding *over-approximates*
the spec's step on one rank: every explicit step is one of its behaviours
(tests/proofs/test_proofs_unbounded.py checks this on reachable states), and a property
proved for all of them holds for the spec. Node removal reads the owner of a page where
the spec walks the node's chain; on well-formed trees (tree_owner, tree_chain) the two
are the same.
"""

from __future__ import annotations

import itertools
from typing import Callable, Dict, NamedTuple

import z3

from ..spec.state import ABSENT, HOST_RESIDENT, RESIDENT, WRITING
from . import epr_counting as count
from . import epr_href, epr_locks, epr_prefetch, epr_registry
from .epr_drain import TARGETS as DRAIN_TARGETS, drain_params, drain_round, flag_facts, prefetch_counts, prefetch_tail
from .epr_properties import UPROPS, b_, can_reclaim_duplicate, holds_device_slot, node_has_page
from .forest import PageSort, SlotSort, forall, fresh_page
from .paged import DRAIN_PAGES, PAGE_FIELDS, QUEUE_PAGES, REGISTRY, SCALAR_FIELDS, SHARED, SLOT_FIELDS, Paged

_ids = itertools.count()


def view_ite(c, a: Paged, b: Paged) -> Paged:
    # a field both branches share stays itself (epr_locks memoises counts per field)
    out = {n: (lambda fa, fb: fa if fa is fb else lambda p: z3.If(c, fa(p), fb(p)))(a.f[n], b.f[n])
           for n in (*PAGE_FIELDS, *SLOT_FIELDS)}
    return Paged({**out, **{n: z3.If(c, a.f[n], b.f[n]) for n in SCALAR_FIELDS}})


# --- device slots (spec/slots.py) ----------------------------------------------------------


def slot_step(u, pre: Paged, post: Paged) -> Paged:
    """The device pool across one step: a page that starts holding a device copy takes a
    free slot (some free slot, distinct per page: spec/slots.py takes the lowest), one
    that stops gives its slot back, every other page keeps its slot (a split moves none;
    under split-slice-off-by-one the step itself moved some, ``_split``). The spec calls
    slots.take and slots.give exactly where a node's device copy appears and goes
    (insert, load_back, evict); tests/proofs/test_proofs_resolution_fields.py checks on
    the slot models that every explicit step is one of this encoding's."""
    held = lambda v, p: holds_device_slot(v, p)
    newly = lambda p: z3.And(z3.Not(held(pre, p)), held(post, p))
    uid = next(_ids)
    new = z3.Function(f"taken_slot!{uid}", PageSort, SlotSort)
    taker = z3.Function(f"taker!{uid}", SlotSort, PageSort)
    holder = z3.Function(f"holder!{uid}", SlotSort, PageSort)
    x = z3.Const(f"x!{uid}", SlotSort)
    u.facts.append(forall(lambda p: z3.Implies(newly(p), z3.And(pre.dfree(new(p)), taker(new(p)) == p))))
    # the pre-state's owner of each owned slot (slot_ownership says there is one)
    u.facts.append(z3.ForAll([x], z3.Implies(z3.Not(pre.dfree(x)), z3.And(
        held(pre, holder(x)), pre.dslot(holder(x)) == x))))
    taken = lambda s: z3.And(newly(taker(s)), new(taker(s)) == s)
    given = lambda s: z3.And(z3.Not(pre.dfree(s)), z3.Not(held(post, holder(s))))
    return post.update(
        dslot=lambda p: z3.If(newly(p), new(p), post.dslot(p)),
        dfree=lambda s: z3.Or(z3.And(pre.dfree(s), z3.Not(taken(s))), given(s)),
    ).named("slots", u.facts)


def choice(name: str) -> Callable:
    """A free predicate over pages (a set the step may pick)."""
    fn = z3.Function(f"{name}!{next(_ids)}", PageSort, z3.BoolSort())
    return fn


# --- tree edits (spec/tree.py) ------------------------------------------------------------


def below(u, v, e, x):
    return z3.And(v.live(x), x != e, u.forest.le(e, x))


def remove_nodes(u, v: Paged, gone: Callable) -> Paged:
    """remove_nodes of every live node x with gone(x): its pages uncached, durable marks
    revoked (the registry is not part of the unbounded view)."""
    def hit(p):
        x = v.own(p)
        return z3.And(v.cached(p), gone(x), v.live(x), node_has_page(u, v, x, p))

    return v.update(
        cached=lambda p: z3.And(v.cached(p), z3.Not(hit(p))),
        durable=lambda p: z3.And(v.durable(p), z3.Not(hit(p))),
    )


def define(u, name: str, formula):
    """A fresh Bool defined equal to a closed formula (keeps quantifiers out of the
    field definitions that mention it)."""
    b = z3.Bool(f"{name}!{next(_ids)}")
    u.facts.append(b == formula)
    return b


# --- evict_host (spec/host_eviction.py), over-approximated ----------------------------------


def evict_host(u, v: Paged, active, dups, leaf) -> Paged:
    """evict_host on one rank when ``active``: duplicate reclaim (write_back + reclaim),
    then LRU host leaves. Which entries are reclaimed before the freed count reaches the
    need is a free choice, with the spec's pass structure kept exact: the first pass
    takes non-leaf duplicates only, and the second pass (any duplicate) runs only if the
    first one took every non-leaf duplicate it could (else the need was met). Reclaiming
    changes host copies only, so ``leaf`` (the pre-state's device leaves) stays exact.
    The LRU loop removes a set of host-only, unreferenced nodes closed under
    descendants (each victim is a leaf when it goes)."""
    cfg = u.cfg
    on = define(u, "reclaim_on", z3.And(active, b_(cfg.wb), b_(cfg.dupr)))
    reclaimable = lambda x: z3.And(dups(x), can_reclaim_duplicate(u, v, x))
    r2 = choice("reclaim2")
    if cfg.has("reclaim-demote-leaf"):  # one pass, leaves not spared
        r1 = lambda x: z3.BoolVal(False)
        u.facts.append(forall(lambda x: z3.Implies(r2(x), z3.And(on, reclaimable(x)))))
    else:
        r1 = choice("reclaim1")
        spare = lambda x: z3.And(reclaimable(x), z3.Not(leaf(x)))
        u.facts.append(forall(lambda x: z3.Implies(r1(x), z3.And(on, spare(x)))))
        took_all = define(u, "pass1_exhausted", forall(lambda y: z3.Implies(spare(y), r1(y))))
        u.facts.append(forall(lambda x: z3.Implies(r2(x), z3.And(on, took_all, reclaimable(x), z3.Not(r1(x))))))
    v = count.moved(u, v, "host_free", +1, count.node_pages(v, lambda x: z3.Or(r1(x), r2(x))), name="reclaimed")
    v = v.set_node(lambda x: z3.Or(r1(x), r2(x)), host=lambda x: z3.IntVal(ABSENT))
    v = v.named("reclaimed", u.facts)
    lru = choice("lru")
    u.facts.append(forall(lambda x: z3.Implies(lru(x), z3.And(
        active, v.live(x), v.dev(x) == ABSENT, v.lock(x) == 0, v.host(x) == HOST_RESIDENT, v.href(x) == 0))))
    u.facts.append(forall(lambda x, y: z3.Implies(z3.And(lru(x), v.live(y), u.forest.lt(x, y)), lru(y)), 2))
    v = count.moved(u, v, "host_free", +1, count.node_pages(v, lru), name="lru")
    return remove_nodes(u, v, lru).named("lru", u.facts)


# --- evict (spec/eviction.py) -------------------------------------------------------------


def demote(v: Paged, e, cond) -> Paged:
    return v.set_node(lambda x: z3.And(cond, x == e), dev=lambda x: z3.IntVal(ABSENT))


def prunable(u, v, e):
    return forall(lambda d: z3.Implies(below(u, v, e, d), z3.And(v.href(d) == 0, v.lock(d) == 0)))


def evict_on_rank(u, v: Paged, e, is_leaf) -> Paged:
    """_evict_on_rank of e, which is a device leaf of this view iff ``is_leaf``."""
    backed = v.host(e) == HOST_RESIDENT
    v = count.moved(u, v, "dev_free", +1, count.node_pages(v, lambda x: z3.And(is_leaf, backed, x == e)), name="demoted")
    v = demote(v, e, z3.And(is_leaf, backed))
    orphan = u.cfg.has("orphan-host-subtree")
    deletable = z3.BoolVal(True) if orphan else define(u, "prunable", prunable(u, v, e))
    gone = define(u, "delete", z3.And(is_leaf, z3.Not(backed), deletable))
    # _delete: e's device pages, and (not orphan-host-subtree) the pruned subtree's host pages
    v = count.moved(u, v, "dev_free", +1, count.node_pages(v, lambda x: z3.And(gone, x == e)), name="deleted")
    if not orphan:
        v = count.moved(u, v, "host_free", +1, count.node_pages(v, lambda x: z3.And(gone, below(u, v, e, x))),
                        name="pruned")
    return remove_nodes(u, v, lambda x: z3.And(gone, z3.Or(x == e, below(u, v, e, x))))


def evict_params(u) -> Dict:
    """The evicted node, and the choices that couple this rank to the others: the
    write-back path taken (some replica must stage the leaf first), the agreed
    allocation's outcome, whether this rank ran evict_host for it."""
    wp, ok, hev = (z3.Bool(f"{n}!{next(_ids)}") for n in ("write_path", "alloc_ok", "host_evict"))
    u.facts += [z3.Implies(wp, b_(u.cfg.wb)), z3.Implies(hev, wp)]
    return {"node": fresh_page("node"), "write_path": wp, "ok": ok, "host_evict": hev}


def evict(u, v: Paged, a) -> Paged:
    """evict of node e on one rank. Host eviction removes host-only nodes and drops host
    copies only, so e is a device leaf after it iff it was before and is still live."""
    e, wp, leaf = a["node"], a["write_path"], a["leaf"]
    is_leaf = define(u, "leaf_e", z3.And(v.live(e), leaf(e)))
    mark = count.mark(u)
    plain = evict_on_rank(u, v, e, is_leaf).named("plain", u.facts)
    count.branch(u, mark, z3.Not(wp))
    mark = count.mark(u)
    needs_write = define(u, "needs_write", z3.And(is_leaf, v.host(e) == ABSENT))
    alloc = evict_host(u, v, a["host_evict"], a["dups"], leaf)
    other = evict_on_rank(u, alloc, e, z3.And(z3.Not(needs_write), alloc.live(e), leaf(e)))
    do = define(u, "write", z3.And(needs_write, a["ok"]))
    a["backup_queued"] = z3.And(wp, do, b_(u.cfg.storage))  # e's H->L3 backup joins sq (proofs.epr_queues)
    storage = z3.If(b_(u.cfg.storage), 1, 0)
    other = count.moved(u, other, "host_free", -1, count.node_pages(other, lambda x: z3.And(do, x == e)),
                        count.peer_amount(u, do, "evict_need"), name="staged")
    count.fits(u, other, "host_free")
    written = other.set_node(lambda x: z3.And(do, x == e), host=lambda x: z3.IntVal(HOST_RESIDENT),
                             href=lambda x: other.href(x) + storage)
    # ... and its storage backup queued (in flight)
    written = enqueue(written, "sfly", lambda p: z3.And(do, b_(u.cfg.storage), other.cached(p), other.own(p) == e))
    written = count.moved(u, written, "dev_free", +1, count.node_pages(written, lambda x: z3.And(do, x == e)),
                          name="demoted")
    written = demote(written, e, do).named("written", u.facts)
    count.branch(u, mark, wp)
    return view_ite(wp, written, plain).named("evicted", u.facts)


# --- insert (spec/write_path.py) -----------------------------------------------------------


def insert_params(u) -> Dict:
    """The request (named by its last page: any page may end one), and whether this
    rank's host allocation for the staged writes ran evict_host."""
    return {"req": fresh_page("req"), "host_evict": z3.Bool(f"host_evict!{next(_ids)}")}


def _split(u, v: Paged, c, cond=True) -> Paged:
    """_split_node of the node x owning page c at c, when x extends below c: the upper
    half start(x)..c becomes node c with x's fields (host_ref_counter: the backups
    covering c, some count >= 0; the split-* variants drop it / the load-back mark), the
    lower half keeps end x and starts at the page below c toward x."""
    f, cfg = u.forest, u.cfg
    x = v.own(c)
    split = define(u, "split", z3.And(b_(cond), v.cached(c), x != c))
    lower, fact = f.least_on_path(x, lambda p: f.lt(c, p), "lower_start")
    u.facts.append(fact)
    href = z3.Int(f"split_href!{next(_ids)}")
    u.facts.append(href == 0 if cfg.has("split-during-backup") else href >= 0)
    upper = dict(dev=v.dev(x), host=v.host(x), lock=v.lock(x), href=href, hits=v.hits(x), rel=v.rel(x),
                 lbp=z3.BoolVal(False) if cfg.has("split-drops-pending-mark") else v.lbp(x))
    old_start = v.start(x)
    at_c = lambda e: z3.And(split, e == c)
    new = {n: (lambda old, val: lambda e: z3.If(at_c(e), val, old(e)))(v.f[n], val) for n, val in upper.items()}
    new["start"] = lambda e: z3.If(at_c(e), old_start, z3.If(z3.And(split, e == x), lower, v.start(e)))
    new["own"] = lambda p: z3.If(z3.And(split, f.in_chain(old_start, c, p)), c, v.own(p))
    if cfg.has("split-slice-off-by-one"):  # the lower half's device slots, one page early
        above = _parent(u)
        shift = lambda p: z3.And(split, v.dev(x) != ABSENT, f.in_chain(lower, x, p))
        new["dslot"] = lambda p: z3.If(shift(p), v.dslot(above(p)), v.dslot(p))
    out = v.update(**new).named("split", u.facts)
    epr_locks.same_counts(u, out, c, x)
    epr_href.split(u, v, split, c, href)
    return out


def _parent(u):
    """The parent page of every page that has one (a function: in a finite forest the
    strict ancestors of a page form a chain with a deepest member)."""
    f = u.forest
    par = z3.Function(f"parent!{next(_ids)}", PageSort, PageSort)
    u.facts.append(forall(lambda p, a: z3.Implies(f.lt(a, p), z3.And(
        f.lt(par(p), p), forall(lambda z: z3.Implies(f.lt(z, p), f.le(z, par(p)))))), 2))
    return par


def _ceil_match(u, v: Paged, q, t, tail):
    """Variant page-ceil-match (page_size > 1): the walk takes a cached sibling of the
    request's first uncached page t that begins with the same token (``u.lead``) for t
    (the node holding it is split there); the request's pages below t then hang below
    t, which stays uncached, and a request ending at t adds no node. Returns (taken,
    sibling, the new leaf's start); without the variant (None, None, t)."""
    if not u.cfg.has("page-ceil-match"):
        return None, None, t
    f = u.forest
    sib = fresh_page("ceil_sibling")
    below, fact = f.least_on_path(q, lambda p: f.lt(t, p), "below_ceil")
    u.facts.append(fact)
    siblings = forall(lambda x: f.lt(x, sib) == f.lt(x, t))
    taken = define(u, "ceil", z3.And(b_(u.cfg.paged), tail, sib != t, v.cached(sib), u.lead(sib, t), siblings))
    return taken, sib, z3.If(taken, below, t)


def insert(u, v: Paged, a) -> Paged:
    """insert(req) on one rank: walk the cached part of the request path (a prefix, by
    tree_closed) down to its deepest page c, split the node owning c at c, un-evict or
    hit every walked node, add the uncached tail as one new node ending at the request's
    last page; then write_backup stages some of the nodes _inc_hit_count picked
    (write-through only: host absent, device resident) after an evict_host."""
    f, cfg = u.forest, u.cfg
    q = a["req"]
    walked = lambda p: z3.And(f.le(p, q), v.cached(p))
    c, fact = f.greatest_on_path(q, walked, "walked_to")
    u.facts.append(fact)
    has_c = define(u, "walk", walked(c))
    a["walked_to"] = (c, has_c)  # (proofs.epr_queue_sched)
    t, fact = f.least_on_path(q, lambda p: z3.Not(v.cached(p)), "tail_start")
    u.facts.append(fact)
    tail = define(u, "tail", z3.Not(v.cached(q)))
    ceil, sib, start = _ceil_match(u, v, q, t, tail)
    if ceil is None:
        v1 = _split(u, v, c)
    else:  # the walk goes on through sib: the split is at sib, not at c
        v1 = _split(u, _split(u, v, c, z3.Not(ceil)), sib, ceil)
        tail = define(u, "tail", z3.And(tail, z3.Not(z3.And(ceil, t == q))))
    on_path = lambda y: z3.Or(z3.And(has_c, v1.live(y), f.le(y, c)),
                              z3.And(ceil if ceil is not None else False, y == sib))
    wt = z3.Not(b_(cfg.wb))
    thr = z3.If(b_(cfg.sel), 2, 1)
    bump = lambda h: z3.If(h + 1 <= thr, h + 1, thr)
    # the device pages taken: the un-evicted walked nodes' and the new leaf's (below)
    v1 = count.moved(u, v1, "dev_free", -1, count.node_pages(v1, lambda y: z3.And(on_path(y), v1.dev(y) == ABSENT)),
                     name="unevicted")
    v2 = v1.update(
        dev=lambda y: z3.If(z3.And(on_path(y), v1.dev(y) == ABSENT), z3.IntVal(RESIDENT), v1.dev(y)),
        hits=lambda y: z3.If(z3.And(on_path(y), v1.dev(y) != ABSENT, wt), bump(v1.hits(y)), v1.hits(y)),
    ).named("walked", u.facts)
    new = lambda p: z3.And(tail, f.in_chain(start, q, p))
    v2 = count.moved(u, v2, "dev_free", -1, new, name="new_leaf")
    count.fits(u, v2, "dev_free")  # insert's guard
    leaf_vals = dict(start=start, dev=z3.IntVal(RESIDENT), host=z3.IntVal(ABSENT), lock=z3.IntVal(0),
                     href=z3.IntVal(0), hits=z3.If(wt, bump(z3.IntVal(0)), 0), lbp=z3.BoolVal(False),
                     rel=z3.BoolVal(False))
    at_q = lambda e: z3.And(tail, e == q)
    fields = {n: (lambda old, val: lambda e: z3.If(at_q(e), val, old(e)))(v2.f[n], val) for n, val in leaf_vals.items()}
    fields["cached"] = lambda p: z3.Or(v2.cached(p), new(p))
    fields["own"] = lambda p: z3.If(new(p), q, v2.own(p))
    v3 = v2.update(**fields).named("inserted", u.facts)
    epr_locks.no_counts(u, v3, q)
    v4 = evict_host(u, v3, z3.And(a["host_evict"], wt), a["dups"], a["leaf"])
    staged = choice("staged")
    if u.cfg.has("partial-backup-leak"):  # a rank may stage a node its peer picked
        u.facts.append(forall(lambda y: z3.Implies(staged(y), z3.And(wt, v4.live(y)))))
    else:
        u.facts.append(forall(lambda y: z3.Implies(staged(y), z3.And(
            wt, v4.live(y), v4.host(y) == ABSENT, v4.dev(y) == RESIDENT))))
    v4 = count.moved(u, v4, "host_free", -1, count.node_pages(v4, staged),
                     count.peer_amount(u, True, "staged_need"), name="staged")
    count.fits(u, v4, "host_free")
    a["staged"], a["staged_view"] = staged, v4  # (proofs.epr_queue_sched: their D->H copies)
    out = v4.set_node(staged, host=lambda y: z3.IntVal(WRITING), lock=lambda y: v4.lock(y) + 1)
    # each staged node's D->H copy is queued, in flight
    return enqueue(out, "wfly", lambda p: z3.And(v4.cached(p), staged(v4.own(p)))).named("staged", u.facts)


# --- load_back (spec/load_path.py), prefetch_from_storage (spec/prefetch.py) ---------------


def node_param(u) -> Dict:
    return {"node": fresh_page("node")}


def prefetch_params(u) -> Dict:
    """The anchor (the node ending where the request's cached match ends, host
    resident on every rank by the guard; none for a match of 0 pages), whether the
    agreed allocation succeeded, whether this rank ran evict_host."""
    out = {"anchor": fresh_page("anchor"), "has_anchor": z3.Bool(f"has_anchor!{next(_ids)}"),
           "ok": z3.Bool(f"alloc_ok!{next(_ids)}"), "host_evict": z3.Bool(f"host_evict!{next(_ids)}")}
    # prefetch.held_during_step: the anchor, protected only while the step runs
    out["held"] = lambda x: z3.And(out["has_anchor"], x == out["anchor"])
    return out


def prefetch_from_storage(u, v: Paged, a) -> Paged:
    """protect_host on the anchor, the agreed host allocation (evict_host), and the
    anchor released again where it failed."""
    anc, has = a["anchor"], a["has_anchor"]
    u.facts.append(z3.Implies(has, z3.And(v.live(anc), v.host(anc) == HOST_RESIDENT)))
    at = lambda x: z3.And(has, x == anc)
    v = v.set_node(at, href=lambda x: v.href(x) + 1).named("protected", u.facts)
    v = evict_host(u, v, a["host_evict"], a["dups"], a["leaf"])
    v = count.reserve(u, v, a["ok"])
    # allocated: the prefetch joins pq (its anchor anchored); else the anchor is released
    v = enqueue(v, "anchored", lambda x: z3.And(at(x), a["ok"]))
    return v.set_node(lambda x: z3.And(at(x), z3.Not(a["ok"])), href=lambda x: v.href(x) - 1).named(
        "prefetching", u.facts)


def check_prefetch_params(u) -> Dict:
    """The request (its last page), the fetched pages (a segment first..last of its
    path, empty when nothing completed) and the anchor (none when the match was 0
    pages). How the segment sits under the anchor is the prefetch queue's business
    (prefetch_queue, bounded): here it is any segment of the path."""
    names = ("req", "first", "last", "anchor")
    out = {n: fresh_page(n) for n in names}
    out["has_fetch"] = z3.Bool(f"has_fetch!{next(_ids)}")
    out["has_anchor"] = z3.Bool(f"has_anchor!{next(_ids)}")
    f = u.forest
    u.facts.append(z3.Implies(out["has_fetch"], z3.And(f.le(out["first"], out["last"]), f.le(out["last"], out["req"]))))
    return out


def check_prefetch_progress(u, v: Paged, a) -> Paged:
    """check_prefetch_progress on one rank: the fetched pages' cached prefix gets a node
    boundary at its deepest page, the rest becomes one host-only node, the anchor's
    protection is dropped."""
    f = u.forest
    # the checked prefetch (prefetch_queue): its fetched pages start right below its
    # anchor (a live host-resident node it holds a reference on), or at a root
    first, anc = a["first"], a["anchor"]
    u.facts += [z3.Implies(a["has_anchor"], v.anchored(anc)),
                z3.Implies(z3.And(a["has_fetch"], a["has_anchor"]), z3.And(
                    f.lt(anc, first), forall(lambda z: z3.Implies(f.lt(z, first), f.le(z, anc))))),
                z3.Implies(z3.And(a["has_fetch"], z3.Not(a["has_anchor"])), forall(lambda z: z3.Not(f.lt(z, first))))]
    seg = lambda p: z3.And(a["has_fetch"], f.in_chain(a["first"], a["last"], p))
    b, fact = f.greatest_on_path(a["last"], lambda p: z3.And(seg(p), v.cached(p)), "have_to")
    u.facts.append(fact)
    v1 = _split(u, v, b, define(u, "have", z3.And(seg(b), v.cached(b))))
    u0, fact = f.least_on_path(a["last"], lambda p: z3.And(seg(p), z3.Not(v.cached(p))), "fetched_from")
    u.facts.append(fact)
    has_new = define(u, "new_node", z3.And(seg(u0), z3.Not(v.cached(u0))))
    last = a["last"]
    new = lambda p: z3.And(has_new, f.in_chain(u0, last, p))
    vals = dict(start=u0, dev=z3.IntVal(ABSENT), host=z3.IntVal(HOST_RESIDENT), lock=z3.IntVal(0),
                href=z3.IntVal(0), hits=z3.IntVal(0), lbp=z3.BoolVal(False), rel=z3.BoolVal(False))
    at = lambda e: z3.And(has_new, e == last)
    fields = {n: (lambda old, val: lambda e: z3.If(at(e), val, old(e)))(v1.f[n], val) for n, val in vals.items()}
    fields["cached"] = lambda p: z3.Or(v1.cached(p), new(p))
    fields["own"] = lambda p: z3.If(new(p), last, v1.own(p))
    v2 = v1.update(**fields).named("fetched", u.facts)
    epr_locks.no_counts(u, v2, last)
    release = lambda x: z3.And(a["has_anchor"], x == anc, v2.live(x))
    # the entry leaves pq: its anchor stays anchored only if another prefetch shares it
    shared = z3.Bool(f"anchor_shared!{next(_ids)}")
    out = v2.set_node(release, href=lambda x: v2.href(x) - 1)
    out = out.update(anchored=lambda x: z3.If(z3.And(a["has_anchor"], x == anc), shared, v2.anchored(x)))
    out = reads_settle(u, out, a)
    # the vote's hang and the released tail's queue entry (proofs.epr_drain)
    out = havoc_scalars(out, "check", "hung", "relq_n", "relq_sum", "r0_relq_n", "r0_relq_sum")
    tail = prefetch_tail(u, v, out)
    out = prefetch_counts(u, out, lambda p: z3.And(seg(p), v.cached(p)), new, tail)  # the counters
    return out.named("released", u.facts)


def lock_params(u) -> Dict:
    """The request (its last page) and the page its device match ends at (on its path,
    cached with a device copy)."""
    out = {"req": fresh_page("req"), "last": fresh_page("last")}
    u.facts.append(u.forest.le(out["last"], out["req"]))
    return out


def lock_request(u, v: Paged, a) -> Paged:
    """lock_request on one rank: a node boundary at the device match's last page, every
    node on its path locked once more (inc_lock_ref)."""
    last, req = a["last"], a["req"]
    u.facts.append(z3.And(b_(u.cfg.request_locks), v.cached(last), v.dev(v.own(last)) != ABSENT, z3.Not(v.runs(req))))
    v = _split(u, v, last)
    out = count.lock_path(u, v, last, +1).update(
        runs=lambda q: z3.Or(v.runs(q), q == req), rlock=lambda q: z3.If(q == req, last, v.rlock(q)))
    out = out.named("locked", u.facts)
    epr_locks.runs_added(u, v, out, req)
    return out


def unlock_request(u, v: Paged, a) -> Paged:
    """unlock_request: dec_lock_ref on the node the request locked (epr_counting.unlock_params),
    if it is still live."""
    return count.unlock(u, v, a)


def disabled(u) -> Dict:
    """An action enabled only under an option the proofs refuse (proofs.scope): never
    enabled, as in the bounded encoding (proofs/encode/actions.py)."""
    u.facts.append(z3.BoolVal(False))
    return {}


def enqueue(v: Paged, rel: str, pages: Callable) -> Paged:
    """A copy over ``pages`` joins queue relation ``rel`` (paged.QUEUE_PAGES)."""
    old = v.f[rel]
    return v.update(**{rel: lambda p: z3.Or(old(p), pages(p))})


def settle(u, v: Paged, fly: str, done: str) -> Paged:
    """write_dma_done / load_dma_done: a copy in flight finishes (some of ``fly``'s
    pages, a free set, move to ``done``)."""
    x = choice(f"finished_{fly}")
    f, d = v.f[fly], v.f[done]
    return v.update(**{fly: lambda p: z3.And(f(p), z3.Not(x(p))), done: lambda p: z3.Or(d(p), z3.And(f(p), x(p)))})


def write_dma_done(u, v: Paged, a) -> Paged:
    return settle(u, v, "wfly", "wdn").named("dma", u.facts)


def load_dma_done(u, v: Paged, a) -> Paged:
    return settle(u, v, "lfly", "ldn").named("dma", u.facts)


def backup_done(u, v: Paged, a) -> Paged:
    """storage_backup_done: the head backup's ack (its pages, a free set, are no longer
    in flight), the store's shard bits and the acked chains' prefixes (proofs.epr_drain)."""
    x = choice("acked")
    return havoc(v.update(sfly=lambda p: z3.And(v.sfly(p), z3.Not(x(p)))), "store", "store", "sacked", "srep",
                 "sstored").named("acked", u.facts)


def reads_settle(u, v: Paged, a) -> Paged:
    """prefetch_io, prefetch_read_fails, check_prefetch_progress's drop: a read finishes
    or its entry leaves the queue, so a read into freed slots can only stop."""
    out = havoc_scalars(v, "settle", "pfreed")
    u.facts.append(z3.Implies(out.pfreed, v.pfreed))
    return out


def revoke(u, v: Paged, a) -> Paged:
    """prefetch_revoke: flags only; revoke-frees-in-flight frees the host slots while the
    read may still run (a read into freed slots may start)."""
    if u.cfg.has("revoke-frees-in-flight"):
        return count.unreserve(u, havoc_scalars(v, "revoke", "pfreed"))
    return v


def havoc(v: Paged, name: str, *fields) -> Paged:
    """Fields the step changes in ways the unbounded view does not follow: any value."""
    return v.update(**{f: z3.Function(f"{name}.{f}!{next(_ids)}", PageSort, PAGE_FIELDS[f]) for f in fields})


def havoc_scalars(v: Paged, name: str, *fields) -> Paged:
    return v.update(**{f: z3.Const(f"{name}.{f}!{next(_ids)}", SCALAR_FIELDS[f]) for f in fields})


def no_params(u) -> Dict:
    return {}


def initial(u, v: Paged, a) -> Paged:
    """initial_state: nothing cached, no durable marks, an empty store."""
    false = lambda p: z3.BoolVal(False)
    return v.update(cached=false, durable=false, store=false, dfree=lambda x: z3.BoolVal(True), lanch=false, runs=false,
                    **{n: false for n in DRAIN_PAGES},
                    **{q: false for q in QUEUE_PAGES}, pfreed=z3.BoolVal(False),
                    planned=z3.BoolVal(False), plan_wf=z3.BoolVal(True), hung=z3.IntVal(0), halted=z3.IntVal(0),
                    **{n: z3.BoolVal(True) for n in REGISTRY},
                    **{p + n: z3.BoolVal(False) if n == "closed" else z3.IntVal(0)
                       for p in ("", "r0_") for n in SHARED})


def unchanged(u, v: Paged, a) -> Paged:
    """registry_skew, prefetch_timeout, local_access: only the registry order, a timer
    flag or a rank's clock change, none of which the view holds."""
    return v


def store_changes(u, v: Paged, a) -> Paged:
    """store_lose: only the store's shard bits change."""
    return havoc(v, "store", "store")


def _committed(u, v: Paged, done_rel: str, name: str):
    """The nodes a sync round commits: some of those whose pages are all on finished
    copies (the first MIN-over-ranks entries; entries cover whole nodes), and the
    relation ``done_rel`` without their pages."""
    done = choice(name)
    rel = v.f[done_rel]
    u.facts.append(forall(lambda x: z3.Implies(done(x), z3.And(
        v.live(x), forall(lambda p: z3.Implies(node_has_page(u, v, x, p), rel(p)))))))
    return done, lambda p: z3.And(rel(p), z3.Not(z3.And(v.cached(p), done(v.own(p)))))


def writing_check(u, v: Paged, a) -> Paged:
    """writing_check (or its halt/hang): the nodes covering the committed D->H copies
    get their host copy, drop their write lock and (storage) hold a backup in flight."""
    done, left = _committed(u, v, "wdn", "committed")
    a["committed"] = done  # (proofs.epr_queues: the nodes of the committed entries)
    # commit_writes: the write lock dropped under write-through (split-write-lock-leak:
    # only on the node the copy was registered with, so maybe not), a host reference
    # for the storage backup
    kept = choice("lock_leaked") if u.cfg.has("split-write-lock-leak") else (lambda x: z3.BoolVal(False))
    unlock = lambda x: z3.If(z3.And(z3.Not(b_(u.cfg.wb)), z3.Not(kept(x))), 1, 0)
    out = v.set_node(done, host=lambda x: z3.IntVal(HOST_RESIDENT), lock=lambda x: v.lock(x) - unlock(x),
                     href=lambda x: v.href(x) + z3.If(b_(u.cfg.storage), 1, 0))
    out = enqueue(out.update(wdn=left), "sfly", lambda p: z3.And(b_(u.cfg.storage), v.cached(p), done(v.own(p))))
    return havoc_scalars(out, "commit", "hung", "halted").named("written", u.facts)


def loading_check(u, v: Paged, a) -> Paged:
    """loading_check (or its halt): the nodes covering the acked H->D copies become
    device resident with the load-back mark cleared; each acked copy unlocks its anchor's
    path (epr_counting.unlock_loads)."""
    done, left = _committed(u, v, "ldn", "loaded")
    a["loaded"] = done  # (proofs.epr_queues: the nodes of the committed entries)
    out = count.unlock_loads(u, v.set_node(done, dev=lambda x: z3.IntVal(RESIDENT), lbp=lambda x: z3.BoolVal(False)),
                             done)
    return havoc_scalars(out.update(ldn=left), "loaded", "halted").named("loaded", u.facts)


ALL = ("no_ghost", "no_use_after_free", "counter_sanity", "prefix_closed", "slot_ownership", "locked_never_evicted", "release_safety", "tree_owner", "tree_chain",
       "tree_closed", "tree_paths", "node_fields", "device_closed", "durable_cached",
       # what only the drain round (and, for the digest, the other sync rounds) does
       "release_after_consensus", "mismatch_fail_closes", "fail_closed_is_final", "reclaim_digest_checked",
       "durable_only_when_acked",
       # hung/halted: written by the sync rounds only
       "no_collective_hang", "flags",
       # the plan (the drain round) and the release queue (also check_prefetch_progress)
       "release_plan", "release_queue", "shared_queues",
       # the duplicate registry (not REGISTRY_WRITERS)
       "registry")
OFF_SYNC = ("release_after_consensus", "mismatch_fail_closes", "fail_closed_is_final", "durable_only_when_acked",
            "release_plan", "release_queue", "shared_queues")
WRITES_REGISTRY = tuple(t for t in ALL if t != "registry")
SHAPE = ("tree_owner", "tree_chain", "tree_closed", "tree_paths", "prefix_closed", "slot_ownership", "durable_cached", "locked_never_evicted",
         "release_safety")


# the anchor is a live node end right above the fetched pages, its protection still held
# (the ``anchored`` relation and queue_pages); the vote's hang, the release queue and the
# registry are written by the step (not followed)
PREFETCH_CHECK = tuple(t for t in ALL if t not in ("no_collective_hang", "flags", "release_queue", "shared_queues",
                                                  "registry"))


def _sched(name: str) -> Callable:
    def run(u, v, a):
        from . import epr_sched_evict

        return getattr(epr_sched_evict, name)(u, v, a)
    return run


class UAction(NamedTuple):
    name: str
    params: Callable  # (u) -> dict
    effect: Callable  # (u, view, params) -> view
    targets: tuple  # the properties this over-approximation decides (others need more state)


UACTIONS: Dict[str, UAction] = {a.name: a for a in [
    UAction("init", no_params, initial, tuple(t for t in ALL if UPROPS[t].kind == "invariant")),
    UAction("evict", evict_params, evict, WRITES_REGISTRY),
    # with the step's own eviction (insert_evicts, load_back_evicts, the CP planner's
    # victims): proofs/epr_sched_evict.py
    UAction("insert", insert_params, _sched("insert"), WRITES_REGISTRY),
    UAction("load_back", node_param, _sched("load_back"), WRITES_REGISTRY),
    UAction("prefetch_from_storage", prefetch_params, prefetch_from_storage, WRITES_REGISTRY),
    UAction("check_prefetch_progress", check_prefetch_params, check_prefetch_progress, PREFETCH_CHECK),
    # victim_order = "lru": a rank's own touch moves its clock only (not in the view)
    UAction("local_access", no_params, unchanged, ALL),
    # request locks: a split where the device match ends, the path locked once more (or unlocked)
    UAction("lock_request", lock_params, lock_request, ALL),
    UAction("unlock_request", count.unlock_params, unlock_request, ALL),
    UAction("write_dma_done", no_params, write_dma_done, ALL),
    UAction("load_dma_done", no_params, load_dma_done, ALL),
    UAction("prefetch_io", no_params, reads_settle, ALL),
    UAction("registry_skew", no_params, unchanged, ALL),
    # how a prefetch ends (spec/prefetch_end.py): only its queue entry's flags and done
    # count change; the revoke's retirement is the drain round's (drain_round)
    UAction("prefetch_timeout", no_params, unchanged, ALL),
    UAction("prefetch_read_fails", no_params, reads_settle, ALL),
    UAction("prefetch_revoke", no_params, revoke, ALL),
    UAction("storage_backup_done", no_params, backup_done, ALL),
    UAction("store_lose", no_params, store_changes, ALL),
    # lock decrements need lock_accounting (queue contents) for counter_sanity
    # what the tree, the device copies, the released mirrors and the references' bounds
    # decide (the plan round, the marks, the release queue, the counters: proofs.epr_drain)
    UAction("drain_storage_control_queues", drain_params, drain_round,
            ("tree_owner", "tree_chain", "tree_closed", "tree_paths", "prefix_closed", "slot_ownership",
             "device_closed", "no_ghost", "node_fields", "durable_cached", "locked_never_evicted",
             "no_collective_hang",  # the drain round halts, never hangs
             "no_use_after_free", "counter_sanity", "release_safety")),
    UAction("writing_check", no_params, writing_check,
            SHAPE + ("no_ghost", "no_use_after_free", "counter_sanity", "node_fields", "device_closed") + OFF_SYNC),
    # the loaded nodes are those of finished H->D copies (LOADING: queue_pages), so
    # device_closed holds too
    UAction("loading_check", no_params, loading_check,  # halts, never hangs
            SHAPE + ("no_ghost", "no_use_after_free", "counter_sanity", "node_fields", "device_closed",
                     "no_collective_hang") + OFF_SYNC),
]}


# The steps that write the registry or the victim list (spec: evict_host, remove_nodes,
# register_duplicate, the sync rounds' digest reset; registry_skew only reorders it,
# which keeps both registry scalars): after them the registry scalars are free.
REGISTRY_WRITERS = ("insert", "evict", "prefetch_from_storage", "check_prefetch_progress", "writing_check",
                    "loading_check", "drain_storage_control_queues")


def effect(u, name: str, pre: Paged, params) -> Paged:
    """The step's view, the device pool included (slot_step) where ``u.slots``. No step
    leaves a hung or halted state (proofs/encode/actions.py's guard)."""
    if name != "init":
        u.facts += [pre.hung == 0, pre.halted == 0]
    count.begin(u)
    post = UACTIONS[name].effect(u, pre, params)
    # counted from the view a step's own eviction left (proofs.epr_counting_evict), if any
    post = count.settle(u, name, params.get("count_base", pre), post)
    flag_facts(u, name, pre, post)
    if name in epr_registry.ACTIONS:  # the registry scalars from the pre-state's (proofs.epr_registry)
        post = epr_registry.step(u, name, pre, post)
    elif name in REGISTRY_WRITERS:
        post = havoc_scalars(post, "registry", *REGISTRY)
    post = epr_href.step(u, name, pre, post, params)  # backups and prefetches by page (proofs.epr_href)
    post = epr_prefetch.step(u, name, pre, post, params)  # the prefetches' done counts and flags
    # a step that evicts first slot-steps the eviction itself (epr_sched_evict._slotted)
    return slot_step(u, params.get("slot_base", pre), post) if u.slots and name != "init" else post


# slot_conservation where the counters are followed (proofs.epr_counting)
for _name in count.COUNTED:
    UACTIONS[_name] = UACTIONS[_name]._replace(targets=UACTIONS[_name].targets + ("slot_conservation",))
# the sync rounds' collective outcomes (proofs.epr_drain)
for _name, _targets in DRAIN_TARGETS.items():
    UACTIONS[_name] = UACTIONS[_name]._replace(targets=UACTIONS[_name].targets + _targets)
# lock_accounting where the lock counts are followed (proofs.epr_locks)
for _name in epr_locks.ACTIONS:
    UACTIONS[_name] = UACTIONS[_name]._replace(targets=UACTIONS[_name].targets + ("lock_accounting",))
# registry where the registry scalars are followed (proofs.epr_registry)
for _name in epr_registry.ACTIONS:
    if "registry" not in UACTIONS[_name].targets:
        UACTIONS[_name] = UACTIONS[_name]._replace(targets=UACTIONS[_name].targets + ("registry",))
# href_accounting where backups and prefetches are followed by page (proofs.epr_href)
for _name in epr_href.ACTIONS:
    UACTIONS[_name] = UACTIONS[_name]._replace(targets=UACTIONS[_name].targets + ("href_accounting",))
# prefetch_queue where the prefetches are followed by page (proofs.epr_prefetch)
for _name in epr_prefetch.ACTIONS:
    UACTIONS[_name] = UACTIONS[_name]._replace(targets=UACTIONS[_name].targets + ("prefetch_queue",))
