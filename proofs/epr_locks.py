"""lock_accounting over the page sort: a node's lock_ref as a count of pages.

lock_accounting (proofs/strengthen.py) says a live node's lock_ref is its write lock
(host WRITING under write-through) plus the H->D copies whose anchor is at or below it
plus the running requests whose lock names a node at or below it. Entries are named by
pages here (a minimal form of the queue entries, enough for counting): an H->D copy by
its anchor, the node its load_back locked the path of (``lanch``: anchors are distinct,
the copies covering disjoint LOADING chains), a running request by its last page
(``runs``, with ``rlock`` the node its lock names: RankState.running). So the counts
are sizes of page sets per node x, ``x -> #{p : lanch(p), x <= p}`` and
``x -> #{q : runs(q), x <= rlock(q)}`` (proofs.epr_counting.size_fn), constrained by
instances valid for every finite set, added where a step needs them:

- a set with a member has size >= 1;
- a split's new node c and the node x it was cut from, one node in a step's branch
  and in the step: equal sets have equal sizes (``same_counts``, ``same_sets``);
- a new node: an empty set has size 0 (``no_counts``);
- a request starts or stops running, a load_back queues its copy, acked loads leave
  the queue: the size of a set with one element added (not in it before) is one more,
  with one removed one less, of a disjoint union the sum (``runs_added``,
  ``runs_removed``, ``loads_added``, ``loads_acked``).
"""

from __future__ import annotations

import itertools
from typing import Callable

import z3

from ..spec.state import WRITING
from .epr_counting import _fact, size_fn
from .forest import forall
from .paged import Paged
from .sym import const

_ids = itertools.count()
# the steps under which lock_accounting is proved for any number of pages (every other
# covered step is a frame obligation of it, proofs.epr_frame)
ACTIONS = ("init", "insert", "load_back", "writing_check", "evict", "loading_check", "drain_storage_control_queues",
           "prefetch_from_storage", "check_prefetch_progress", "lock_request", "unlock_request")


def _loads_at(u, v: Paged) -> Callable:
    return lambda x, p: z3.And(v.lanch(p), u.forest.le(x, p))


def _runs_at(u, v: Paged) -> Callable:
    return lambda x, q: z3.And(v.runs(q), u.forest.le(x, v.rlock(q)))


def _memo(u, key, make):
    memo = u.__dict__.setdefault("lock_sizes", {})
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = (make(), key)
    return hit[0]


def _counted(u, at: Callable, name: str):
    """``size_fn`` of ``at``, and: a set with a member has size >= 1."""
    n = size_fn(u, at, name, _fact)
    _fact(u, forall(lambda x, p: z3.Implies(at(x, p), n(x) >= 1), 2))
    return n


def loads(u, v: Paged):
    """x -> the H->D copies whose anchor is at or below x (an anchor counts at itself)."""
    def make():
        n = _counted(u, _loads_at(u, v), "loads_below")
        _fact(u, forall(lambda p: z3.Implies(v.lanch(p), n(p) >= 1)))
        return n
    return _memo(u, ("loads", id(v.lanch)), make)


def running(u, v: Paged):
    """x -> the running requests whose lock names a node at or below x (a request counts
    at the node it names)."""
    def make():
        n = _counted(u, _runs_at(u, v), "runs_below")
        _fact(u, forall(lambda q: z3.Implies(v.runs(q), n(v.rlock(q)) >= 1)))
        return n
    return _memo(u, ("runs", id(v.runs), id(v.rlock)), make)


def lock_accounting(u, v: Paged):
    """proofs/strengthen.py lock_accounting with the counts as sizes, and what load_queue
    says of the anchors (live nodes): stronger than the bounded form, so proving it
    proves that."""
    writing = lambda x: z3.If(z3.And(v.host(x) == WRITING, z3.Not(const(u.cfg.wb))), 1, 0)
    ld, rn = loads(u, v), running(u, v)
    return z3.And(
        forall(lambda x: z3.Implies(v.live(x), v.lock(x) == writing(x) + ld(x) + rn(x))),
        forall(lambda q: z3.Implies(v.runs(q), z3.And(
            const(u.cfg.request_locks), v.live(v.rlock(q)), u.forest.le(v.rlock(q), q)))),
        # (load_queue: an H->D copy's anchor is a live node, locked by the copy)
        forall(lambda p: z3.Implies(v.lanch(p), v.live(p))))


def _sets(u, v: Paged):
    return ((loads(u, v), _loads_at(u, v)), (running(u, v), _runs_at(u, v)))


def same_counts(u, v: Paged, c, x) -> None:
    """A split: node c (the upper half) and x (the node cut): if the pages counted at c
    and at x are the same sets, their counts are equal."""
    for n, at in _sets(u, v):
        _fact(u, z3.Implies(forall(lambda p: at(c, p) == at(x, p)), n(c) == n(x)))


def no_counts(u, v: Paged, q) -> None:
    """A new node q: if nothing is counted at q, its counts are 0."""
    for n, at in _sets(u, v):
        _fact(u, z3.Implies(forall(lambda p: z3.Not(at(q, p))), n(q) == 0))


def same_sets(u, a: Paged, b: Paged) -> None:
    """Two views of one step (a branch's and the step's): at each node, if the pages
    counted are the same sets, their counts are equal."""
    for (na, at_a), (nb, at_b) in zip(_sets(u, a), _sets(u, b)):
        if na is not nb:
            _fact(u, forall(lambda x: z3.Implies(forall(lambda p: at_a(x, p) == at_b(x, p)), na(x) == nb(x))))


def runs_added(u, pre: Paged, post: Paged, req) -> None:
    """lock_request: request ``req`` starts running (it was not)."""
    n0, at0 = running(u, pre), _runs_at(u, pre)
    n1, at1 = running(u, post), _runs_at(u, post)
    _fact(u, forall(lambda x: z3.Implies(
        z3.And(z3.Not(at0(x, req)), forall(lambda q: at1(x, q) == z3.Or(at0(x, q), z3.And(q == req, at1(x, req))))),
        n1(x) == n0(x) + z3.If(at1(x, req), 1, 0))))


def loads_added(u, pre: Paged, post: Paged, anchor) -> None:
    """load_back: its H->D copy, anchored at ``anchor`` (no anchor before), is queued."""
    n0, at0 = loads(u, pre), _loads_at(u, pre)
    n1, at1 = loads(u, post), _loads_at(u, post)
    _fact(u, forall(lambda x: z3.Implies(
        z3.And(z3.Not(at0(x, anchor)),
               forall(lambda p: at1(x, p) == z3.Or(at0(x, p), z3.And(p == anchor, at1(x, anchor))))),
        n1(x) == n0(x) + z3.If(at1(x, anchor), 1, 0))))


def runs_removed(u, pre: Paged, post: Paged, req) -> None:
    """unlock_request: request ``req`` stops running."""
    n0, at0 = running(u, pre), _runs_at(u, pre)
    n1, at1 = running(u, post), _runs_at(u, post)
    _fact(u, forall(lambda x: z3.Implies(
        forall(lambda q: at1(x, q) == z3.And(at0(x, q), q != req)),
        n1(x) == n0(x) - z3.If(at0(x, req), 1, 0))))


def loads_acked(u, pre: Paged, post: Paged, acked: Callable, below) -> None:
    """loading_check: the acked copies (``acked``, counted at x by ``below``) leave the
    queue: the copies counted before are those counted after and the acked ones, apart."""
    n0, at0 = loads(u, pre), _loads_at(u, pre)
    n1, at1 = loads(u, post), _loads_at(u, post)
    gone = lambda x, p: z3.And(acked(p), u.forest.le(x, p))
    _fact(u, forall(lambda x: z3.Implies(
        forall(lambda p: z3.And(at0(x, p) == z3.Or(at1(x, p), gone(x, p)), z3.Not(z3.And(at1(x, p), gone(x, p))))),
        n0(x) == n1(x) + below(x))))
