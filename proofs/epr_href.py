"""href_accounting over the page sort: a node's host_ref_counter as a count of pages.

href_accounting (proofs/strengthen.py) says a live node's host_ref_counter is the number
of H->L3 backups in sq (acked or not, until the drain round drops them) covering it plus
the number of prefetches in pq anchored at it. Here the backups and prefetches are named
by pages (``FIELDS``, per-page fields of proofs.paged):

- ``scov``: the page is on the chain of some entry of sq. The entries are pairwise
  disjoint and cover whole nodes (backup_queue, proved for any number of pages), so a
  node is covered by one backup or none: the count is ``[scov(x)]``.
- ``pfq``: a prefetch of the request ending at the page is in pq (one per request:
  prefetch_queue), ``phas`` whether it has an anchor and ``panc`` the anchor's end
  page; the count at node x is ``x -> #{q : pfq(q), phas(q), panc(q) = x}``
  (proofs.epr_counting.size_fn), constrained by instances valid for every finite set:
  a set with a member has size >= 1, one element added or removed moves the size by
  one, a disjoint part taken away by that part's size.

The page-sorted form (``href_accounting``) adds that a node that is not a live
host-resident node has no prefetch anchored at it (prefetch_queue: anchors are live and
host resident): stronger than the bounded form, so proving it proves that.

A step's effect on the fields (``step``): every backup the spec starts (writing_check's
commits, evict's write-back path, the staging of make_room's victims) puts its pages
under a copy in flight (``sfly``) as it joins sq, and only the drain round drops
entries of sq, acked ones (not in flight), whole nodes: so ``scov`` after a step is
``scov`` or ``sfly`` after it, less the drained nodes' pages. pq changes in
prefetch_from_storage (the request's prefetch joins where the allocation succeeded),
check_prefetch_progress (the checked one leaves) and the drain round (some prefetches
retire). The facts that constrain the step's choices for this (which request,
which backups drain, the references after the drain, a split's upper half's
host_ref_counter) are kept apart (``facts``) and enter only these obligations, so the
other obligations of a step do not change.

Hypotheses (``href_pages``, consequences of the audit's invariants backup_queue and
prefetch_queue, as proofs.epr_properties.queue_pages is): a page under a backup is
cached in a host-resident node, all of whose pages are covered; a page in flight is in
sq; a prefetch's anchor is a live host-resident node strictly above its request.
"""

from __future__ import annotations

import itertools
from typing import Callable

import z3

from ..spec.state import HOST_RESIDENT
from .epr_counting import size_fn
from .forest import PageSort, forall, fresh_page
from .paged import Paged

_ids = itertools.count()
FIELDS = ("scov", "pfq", "panc", "phas")
# the steps under which href_accounting is proved here (every other step is a frame
# obligation of it, proofs.epr_frame)
ACTIONS = ("init", "insert", "writing_check", "evict", "load_back", "loading_check", "drain_storage_control_queues",
           "prefetch_from_storage", "check_prefetch_progress", "lock_request", "unlock_request")
DRAIN = "drain_storage_control_queues"


def facts(u) -> list:
    return u.__dict__.setdefault("href_facts", [])


def _fact(u, *fs) -> None:
    facts(u).extend(fs)


def _anchored_at(v: Paged) -> Callable:
    return lambda x, q: z3.And(v.pfq(q), v.phas(q), v.panc(q) == x)


def anchors(u, v: Paged):
    """x -> the prefetches anchored at x (one size function per view's fields)."""
    memo = u.__dict__.setdefault("href_sizes", {})
    key = (id(v.pfq), id(v.phas), id(v.panc))
    hit = memo.get(key)
    if hit is None:
        at = _anchored_at(v)
        n = size_fn(u, at, "anchored_at", lambda u, f: _fact(u, f))
        _fact(u, forall(lambda x, q: z3.Implies(at(x, q), n(x) >= 1), 2))
        hit = memo[key] = (n, v)
    return hit[0]


def href_accounting(u, v: Paged):
    n = anchors(u, v)
    res = lambda x: z3.And(v.live(x), v.host(x) == HOST_RESIDENT)
    return forall(lambda x: z3.And(
        z3.Implies(v.live(x), v.href(x) == z3.If(v.scov(x), 1, 0) + n(x)),
        z3.Implies(z3.Not(res(x)), n(x) == 0)))


def href_pages(u, v: Paged):
    """The hypotheses (module docstring)."""
    f = u.forest
    return z3.And(
        forall(lambda p: z3.Implies(v.scov(p), z3.And(v.cached(p), v.host(v.own(p)) == HOST_RESIDENT))),
        forall(lambda p, q: z3.Implies(z3.And(v.scov(p), v.cached(q), v.own(q) == v.own(p)), v.scov(q)), 2),
        forall(lambda p: z3.Implies(v.sfly(p), v.scov(p))),
        forall(lambda q: z3.Implies(z3.And(v.pfq(q), v.phas(q)), z3.And(
            v.live(v.panc(q)), v.host(v.panc(q)) == HOST_RESIDENT, f.lt(v.panc(q), q)))))


# --- the steps ---------------------------------------------------------------------------


def split(u, v: Paged, cond, c, href) -> None:
    """epr_actions._split at page c (where ``cond``) of view v: the upper half's
    host_ref_counter is the number of backups covering c (spec tree.split_node; 0 under
    split-during-backup, which epr_actions sets)."""
    if not u.cfg.has("split-during-backup"):  # (a backup the step itself started is in flight: sfly)
        _fact(u, z3.Implies(cond, href == z3.If(z3.Or(v.scov(c), v.sfly(c)), 1, 0)))


def _added(u, pre: Paged, post: Paged, req) -> None:
    """The prefetch of ``req`` joins pq (it was not there)."""
    n0, at0, n1, at1 = anchors(u, pre), _anchored_at(pre), anchors(u, post), _anchored_at(post)
    _fact(u, forall(lambda x: z3.Implies(
        z3.And(z3.Not(at0(x, req)), forall(lambda q: at1(x, q) == z3.Or(at0(x, q), z3.And(q == req, at1(x, req))))),
        n1(x) == n0(x) + z3.If(at1(x, req), 1, 0))))


def _removed(u, pre: Paged, post: Paged, gone: Callable, k=None):
    """The prefetches with ``gone(q)`` leave pq: the anchored count at x loses their
    number there (``k``; by default a size, > 0 where one of them is anchored)."""
    n0, at0, n1, at1 = anchors(u, pre), _anchored_at(pre), anchors(u, post), _anchored_at(post)
    part = lambda x, q: z3.And(gone(q), at0(x, q))
    if k is None:
        k = size_fn(u, part, "retired_at", lambda u, f: _fact(u, f))
        _fact(u, forall(lambda x, q: z3.Implies(part(x, q), k(x) >= 1), 2))
    _fact(u, forall(lambda x: z3.Implies(
        forall(lambda q: z3.And(at0(x, q) == z3.Or(at1(x, q), part(x, q)), z3.Not(z3.And(at1(x, q), part(x, q))))),
        n0(x) == n1(x) + k(x))))
    return k


def _named(u, v: Paged) -> Paged:
    """``FIELDS`` as fresh functions, each defined by one universal equation (the rest of
    the view as it is: naming it here would change the other obligations' formulas)."""
    from .paged import PAGE_FIELDS, _is_name

    out = {}
    for n in FIELDS:
        if not _is_name(v.f[n]):
            fn = z3.Function(f"href.{n}!{next(_ids)}", PageSort, PAGE_FIELDS[n])
            u.facts.append(forall(lambda p, fn=fn, old=v.f[n]: fn(p) == old(p)))
            out[n] = fn
    return v.update(**out)


def step(u, name: str, pre: Paged, post: Paged, a) -> Paged:
    """The fields of ``FIELDS`` after step ``name`` (module docstring)."""
    if name == "init":
        false = lambda p: z3.BoolVal(False)
        out = post.update(scov=false, pfq=false)  # (left as terms: init's view is not named)
        n = anchors(u, out)
        _fact(u, forall(lambda x: n(x) == 0))  # an empty set has size 0
        return out
    # (unchanged where the step starts no backup: no new equation to instantiate)
    scov = pre.scov if post.f["sfly"] is pre.f["sfly"] else (lambda p: z3.Or(pre.scov(p), post.sfly(p)))
    if name == "prefetch_from_storage":
        req = fresh_page("prefetch_req")  # the request: none of its prefetches is in pq (the guard)
        a["prefetch_req"] = req
        _fact(u, z3.Not(pre.pfq(req)), z3.Implies(a["has_anchor"], u.forest.lt(a["anchor"], req)))
        joined = lambda q: z3.And(a["ok"], q == req)
        out = post.update(scov=scov, pfq=lambda q: z3.Or(pre.pfq(q), joined(q)),
                          phas=lambda q: z3.If(joined(q), a["has_anchor"], pre.phas(q)),
                          panc=lambda q: z3.If(joined(q), a["anchor"], pre.panc(q)))
        out = _named(u, out)
        _added(u, pre, out, req)
        return out
    if name == "check_prefetch_progress":
        req, anc = a["req"], a["anchor"]  # the checked prefetch, in pq
        _fact(u, pre.pfq(req), pre.phas(req) == a["has_anchor"], z3.Implies(a["has_anchor"], pre.panc(req) == anc))
        out = _named(u, post.update(scov=scov, pfq=lambda q: z3.And(pre.pfq(q), q != req)))
        # one prefetch: counted 1 at its anchor, 0 elsewhere
        _removed(u, pre, out, lambda q: q == req, lambda x: z3.If(_anchored_at(pre)(x, req), 1, 0))
        return out
    if name == DRAIN:
        return _drain(u, pre, post)
    return post.update(scov=scov)


def _drain(u, pre: Paged, post: Paged) -> Paged:
    """The drain round: the acked backups it drops (a set of nodes, whole entries: their
    pages are covered and not in flight) and the revoked prefetches it retires (some in
    pq) release one host reference each on the nodes they cover / their anchor
    (split-during-backup: the ack releases only the node it was registered with, not
    followed: the references stay free there)."""
    from .epr_actions import choice

    drained, retired = choice("drained_node"), choice("retired")
    acked = lambda x: forall(lambda p: z3.Implies(z3.And(pre.cached(p), pre.own(p) == x),
                                                 z3.And(pre.scov(p), z3.Not(pre.sfly(p)))))
    _fact(u, forall(lambda x: z3.Implies(drained(x), z3.And(pre.live(x), acked(x)))),
          forall(lambda q: z3.Implies(retired(q), pre.pfq(q))))
    out = post.update(scov=lambda p: z3.And(pre.scov(p), z3.Not(z3.And(pre.cached(p), drained(pre.own(p))))),
                      pfq=lambda q: z3.And(pre.pfq(q), z3.Not(retired(q))))
    out = _named(u, out)
    k = _removed(u, pre, out, retired)
    if not u.cfg.has("split-during-backup"):
        _fact(u, forall(lambda x: z3.Implies(pre.live(x), out.href(x) == pre.href(x) - z3.If(drained(x), 1, 0) - k(x))))
    return out


# --- obligations ------------------------------------------------------------------------

TARGETS = ("href_accounting",)


def covered(target: str, action: str) -> bool:
    return target in TARGETS and action in ACTIONS


def hypotheses(su) -> list:
    """The pre-state's href_accounting and href_pages (not at init), and the steps'
    facts kept apart for these obligations."""
    u, pre = su.u, su.pre
    inv = [href_accounting(u, pre), href_pages(u, pre)] if su.params["action"] != "init" else []
    anchors(u, su.post)  # the goal's count (its facts with the others)
    return inv + facts(u)


def goal(su, target: str):
    return href_accounting(su.u, su.post)
