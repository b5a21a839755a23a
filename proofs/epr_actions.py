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

from ..spec.state import ABSENT, HOST_RESIDENT
from .epr_properties import b_, can_reclaim_duplicate, node_has_page
from .forest import PageSort, forall, fresh_page
from .paged import PAGE_FIELDS, Paged

_ids = itertools.count()


def view_ite(c, a: Paged, b: Paged) -> Paged:
    return Paged({n: (lambda fa, fb: lambda p: z3.If(c, fa(p), fb(p)))(a.f[n], b.f[n]) for n in PAGE_FIELDS})


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
    v = v.set_node(lambda x: z3.Or(r1(x), r2(x)), host=lambda x: z3.IntVal(ABSENT))
    v = v.named("reclaimed", u.facts)
    lru = choice("lru")
    u.facts.append(forall(lambda x: z3.Implies(lru(x), z3.And(
        active, v.live(x), v.dev(x) == ABSENT, v.lock(x) == 0, v.host(x) == HOST_RESIDENT, v.href(x) == 0))))
    u.facts.append(forall(lambda x, y: z3.Implies(z3.And(lru(x), v.live(y), u.forest.lt(x, y)), lru(y)), 2))
    return remove_nodes(u, v, lru).named("lru", u.facts)


# --- evict (spec/eviction.py) -------------------------------------------------------------


def demote(v: Paged, e, cond) -> Paged:
    return v.set_node(lambda x: z3.And(cond, x == e), dev=lambda x: z3.IntVal(ABSENT))


def prunable(u, v, e):
    return forall(lambda d: z3.Implies(below(u, v, e, d), z3.And(v.href(d) == 0, v.lock(d) == 0)))


def evict_on_rank(u, v: Paged, e, is_leaf) -> Paged:
    """_evict_on_rank of e, which is a device leaf of this view iff ``is_leaf``."""
    backed = v.host(e) == HOST_RESIDENT
    v = demote(v, e, z3.And(is_leaf, backed))
    deletable = z3.BoolVal(True) if u.cfg.has("orphan-host-subtree") else define(u, "prunable", prunable(u, v, e))
    gone = define(u, "delete", z3.And(is_leaf, z3.Not(backed), deletable))
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
    plain = evict_on_rank(u, v, e, is_leaf).named("plain", u.facts)
    needs_write = define(u, "needs_write", z3.And(is_leaf, v.host(e) == ABSENT))
    alloc = evict_host(u, v, a["host_evict"], a["dups"], leaf)
    other = evict_on_rank(u, alloc, e, z3.And(z3.Not(needs_write), alloc.live(e), leaf(e)))
    do = define(u, "write", z3.And(needs_write, a["ok"]))
    storage = z3.If(b_(u.cfg.storage), 1, 0)
    written = other.set_node(lambda x: z3.And(do, x == e), host=lambda x: z3.IntVal(HOST_RESIDENT),
                             href=lambda x: other.href(x) + storage)
    written = demote(written, e, do).named("written", u.facts)
    return view_ite(wp, written, plain).named("evicted", u.facts)


class UAction(NamedTuple):
    name: str
    params: Callable  # (u) -> dict
    effect: Callable  # (u, view, params) -> view


UACTIONS: Dict[str, UAction] = {a.name: a for a in [UAction("evict", evict_params, evict)]}
