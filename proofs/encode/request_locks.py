"""spec/request_locks.py: lock_request (match_prefix + inc_lock_ref on the device
match's last node) and unlock_request (dec_lock_ref on the node it named).

``run`` is per page: for the request ending at page q, the end page of the node its lock
names (-1: not running), order-free where the spec keeps a sorted list of pairs."""

from __future__ import annotations

from ...spec.state import ABSENT
from ..sym import and_, eq, implies, ne, sel, sum_, ite, upd
from .prefetch import path_page
from .tree import ensure_boundary, live, lock_path


def device_match(ctx, rv, q):
    """Leading pages of the request ending at q cached with a device copy."""
    uni = ctx.uni
    return sum_([
        ite(and_(uni.anc_sym(p, q), *(implies(uni.anc[a][p], and_(rv.own[a] >= 0, ne(sel(rv.dev, rv.own[a]), ABSENT)))
                                      for a in range(p + 1))), 1, 0)
        for p in range(ctx.k)
    ])


def lock_request_params(ctx, s):
    return {"req": ctx.request_param()}


def lock_request_guard(ctx, s, a):
    q = a["req"]
    return and_(ctx.cfg.request_locks,
                s.space.all(lambda h: and_(eq(sel(s.rank(h).run, q), -1), device_match(ctx, s.rank(h), q) > 0)))


def lock_request(ctx, s, a):
    """Split where the device match ends, lock that node's path, remember the node."""
    q = a["req"]

    def on_rank(h, rv):
        last = path_page(ctx, q, device_match(ctx, rv, q))
        rv = ensure_boundary(ctx, rv, last)
        rv = lock_path(ctx, rv, last, 1)
        return rv._replace(run=upd(rv.run, q, last))

    return s.map(on_rank)


def unlock_request_params(ctx, s):
    return {"req": ctx.request_param()}


def unlock_request_guard(ctx, s, a):
    q = a["req"]
    return and_(ctx.cfg.request_locks, s.space.all(lambda h: sel(s.rank(h).run, q) >= 0))


def unlock_request(ctx, s, a):
    """dec_lock_ref on the node the lock named (if it is still in the tree)."""
    q = a["req"]

    def on_rank(h, rv):
        end = sel(rv.run, q)
        rv = lock_path(ctx, rv, end, -1, live(rv, end))
        return rv._replace(run=upd(rv.run, q, -1))

    return s.map(on_rank)
