"""prefetch_queue over the page sort: the prefetches in flight for any number of pages.

prefetch_queue (proofs/strengthen.py) says each entry (req, anchor, k, n, done, flags)
of pq reserves exactly the request's missing tail below a live host-resident anchor:
k >= 0 pages matched, ending at the anchor (none when k = 0), n >= 1 missing, k + n
the request's length, done NOT_DONE or 0..n, flags as prefetch_flags says, one entry
per request, none without prefetch and storage.

A prefetch is named by the last page of its request (proofs.epr_href: ``pfq``,
``phas``, ``panc``), and its counts by the pages they count, as epr_queues holds an
ack's: k is the depth of the anchor (the pages at or above it), n the pages of the
request's path strictly below it, so "k = depth(anchor), k + n = depth(req), n >= 1"
is "the anchor is a strict ancestor of the request" (the spec writes k and n only
when the prefetch joins pq, from the anchor's match: spec/prefetch.py). done
(``FIELDS``): ``pdn`` (done != NOT_DONE), ``pzero`` (done = 0), else ``pdl``, the last
done page, on the missing segment (a count 1..n is exactly such a page: prefetch_io
writes min(n, held)); the flags one Boolean each (TIMED_OUT, REVOKED, TERMINATED,
FREED). One entry per request is the representation (a set of requests):
prefetch_from_storage's guard adds a request only where none of its prefetches is in
pq (stated by epr_href).

The anchor clause is what the tree steps must keep: an anchor holds a host reference
(href_accounting, proved for any pages by proofs.epr_href, whose invariants and facts
are hypotheses here), so no eviction, reclaim or release takes its host copy or the
node. The other clauses change only where the prefetch steps write them (``step``).
"""

from __future__ import annotations

import itertools

import z3

from ..spec.state import HOST_RESIDENT
from . import epr_href
from .epr_properties import b_
from .forest import forall, fresh_page
from .paged import Paged

_ids = itertools.count()
FIELDS = ("pdn", "pzero", "pdl", "pto", "prev", "pterm", "pfre")
# the steps under which prefetch_queue is proved here, for any number of pages
ACTIONS = ("init", "insert", "writing_check", "evict", "load_back", "loading_check", "drain_storage_control_queues",
           "prefetch_from_storage", "prefetch_io", "check_prefetch_progress", "prefetch_timeout",
           "prefetch_read_fails", "prefetch_revoke", "lock_request", "unlock_request")
TARGETS = ("prefetch_queue",)


def prefetch_queue(u, v: Paged):
    cfg, f = u.cfg, u.forest
    freed_ok = (lambda q: v.prev(q)) if cfg.has("revoke-frees-in-flight") else (lambda q: z3.BoolVal(False))
    return forall(lambda q: z3.Implies(v.pfq(q), z3.And(
        b_(cfg.prefetch), b_(cfg.storage),
        z3.Implies(v.phas(q), z3.And(f.lt(v.panc(q), q), v.live(v.panc(q)), v.host(v.panc(q)) == HOST_RESIDENT)),
        z3.Implies(z3.And(v.pdn(q), z3.Not(v.pzero(q))),
                   z3.And(f.le(v.pdl(q), q), z3.Implies(v.phas(q), f.lt(v.panc(q), v.pdl(q))))),
        z3.Implies(v.pto(q), b_(cfg.timeout)),
        z3.Implies(v.prev(q), z3.And(b_(cfg.revoke), v.pterm(q))),
        z3.Implies(z3.And(v.pterm(q), z3.Not(v.prev(q))), z3.And(b_(cfg.read_fail), v.pdn(q), v.pzero(q))),
        z3.Implies(v.pfre(q), freed_ok(q)))))


def _one(u, pre: Paged, a, name: str, guard, mine):
    """The prefetch a step acts on (some request in pq satisfying its guard, where the
    step acts on this rank; named ``a["prefetch_op"]``)."""
    q = a["prefetch_op"] = fresh_page(name)
    epr_href._fact(u, z3.Implies(mine, z3.And(pre.pfq(q), guard(q))))
    return q


def step(u, name: str, pre: Paged, post: Paged, a) -> Paged:
    """``FIELDS`` after step ``name``: set where the prefetch steps write them (the
    spec's guards as facts kept apart with epr_href's), carried elsewhere."""
    cfg = u.cfg

    # prefetch_io, prefetch_timeout, prefetch_read_fails act on one rank (``mine``: this
    # one; the others' views stay); prefetch_from_storage and prefetch_revoke on all
    mine = z3.BoolVal(True) if name in ("prefetch_from_storage", "prefetch_revoke") else z3.Bool(
        f"{name}.this_rank!{next(_ids)}")

    def setf(q, **vals):
        return post.update(**{n: (lambda old, val: lambda p: z3.If(z3.And(mine, p == q), val, old(p)))(post.f[n], val)
                              for n, val in vals.items()})

    if name == "prefetch_from_storage" and "prefetch_req" in a:
        q = a["prefetch_req"]  # joins pq (where the allocation succeeded): done NOT_DONE, no flags
        epr_href._fact(u, b_(cfg.prefetch), b_(cfg.storage))  # (the step exists only with both)
        false = z3.BoolVal(False)
        return setf(q, pdn=false, pto=false, prev=false, pterm=false, pfre=false)
    if name == "prefetch_io":  # the rank's read finishes with min(n, held) pages
        q = _one(u, pre, a, "read", lambda q: z3.Not(pre.pdn(q)), mine)
        d, zero = fresh_page("read_last"), z3.Bool(f"read_none!{next(_ids)}")
        epr_href._fact(u, z3.Implies(z3.And(mine, z3.Not(zero)), z3.And(u.forest.le(d, q), z3.Implies(
            pre.phas(q), u.forest.lt(pre.panc(q), d)))))
        return setf(q, pdn=z3.BoolVal(True), pzero=zero, pdl=d)
    if name == "prefetch_timeout":  # its timer fires (prefetch_stop = timeout)
        q = _one(u, pre, a, "timed_out", lambda q: z3.And(z3.Not(pre.pto(q)), z3.Not(pre.prev(q))), mine)
        epr_href._fact(u, z3.Implies(mine, b_(cfg.timeout)))
        return setf(q, pto=z3.BoolVal(True))
    if name == "prefetch_read_fails":  # a batch fails: terminated, nothing usable
        q = _one(u, pre, a, "failed_read", lambda q: z3.Not(pre.pdn(q)), mine)
        epr_href._fact(u, z3.Implies(mine, b_(cfg.read_fail)))
        true = z3.BoolVal(True)
        return setf(q, pdn=true, pzero=true, pterm=true)
    if name == "prefetch_revoke":  # terminated and revoked (revoke-frees-in-flight: slots freed now)
        q = _one(u, pre, a, "revoked", lambda q: z3.Not(pre.prev(q)), mine)
        epr_href._fact(u, b_(cfg.revoke))
        true = z3.BoolVal(True)
        freed = true if cfg.has("revoke-frees-in-flight") else pre.pfre(q)
        return setf(q, prev=true, pterm=true, pfre=freed)
    return post


def covered(target: str, action: str) -> bool:
    return target in TARGETS and action in ACTIONS


def hypotheses(su) -> list:
    """epr_href's (its invariant, href_pages and the step's facts) and prefetch_queue at
    the pre-state (not at init)."""
    inv = [prefetch_queue(su.u, su.pre)] if su.params["action"] != "init" else []
    return inv + epr_href.hypotheses(su)


def goal(su, target: str):
    return prefetch_queue(su.u, su.post)
