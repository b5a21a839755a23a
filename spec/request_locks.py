"""Request-lifetime locks: a running request holds its matched device prefix.

SGLang's scheduler takes ``match_prefix`` for a request it admits (which splits a node
so that one ends where the match ends), ``inc_lock_ref(last_node)`` on the last device
node of the match, and ``dec_lock_ref`` on the same node when the request finishes
(``cache_finished_req``). Locked nodes are neither evicted nor released. Each request runs
at most once at a time (the bound that keeps the model finite); ``running`` records which
node each running request locked, so the unlock names the same node after splits (the
lower half keeps the end).
"""

from __future__ import annotations

from .action import act
from .state import ABSENT
from .tree import ensure_boundary, lock_path


def device_match(m, rs, req) -> int:
    """match_prefix's device part: leading pages of ``req`` cached with a device copy
    (resident, or loading: the code already sees ``value`` set)."""
    k = 0
    for p in m.pages.request_pages[req]:
        e = rs.owner[p]
        if e < 0 or rs.nodes[e].dev == ABSENT:
            break
        k += 1
    return k


def _running(rs, req) -> bool:
    return any(r == req for r, _ in rs.running)


def lock_request_params(m, s):
    if not m.cfg.request_locks:
        return
    for req in range(len(m.pages.request_pages)):
        yield act("lock_request", req=req)


def lock_request_guard(m, s, a):
    req = a["req"]
    return all(not _running(rs, req) and device_match(m, rs, req) > 0 for rs in s.ranks)


def lock_request(m, s, a):
    """match_prefix + inc_lock_ref: split where the device match ends, lock that node's
    path to the root, remember the node."""
    req = a["req"]
    ranks = []
    for rs in s.ranks:
        last = m.pages.request_pages[req][device_match(m, rs, req) - 1]
        rs = ensure_boundary(m, rs, last)
        rs = lock_path(m, rs, last, +1)
        ranks.append(rs._replace(running=tuple(sorted(rs.running + ((req, last),)))))
    return s._replace(ranks=tuple(ranks))


def unlock_request_params(m, s):
    if not m.cfg.request_locks:
        return
    for req in sorted({r for rs in s.ranks for r, _ in rs.running}):
        yield act("unlock_request", req=req)


def unlock_request_guard(m, s, a):
    return all(_running(rs, a["req"]) for rs in s.ranks)


def unlock_request(m, s, a):
    """The request finished: dec_lock_ref on the node its lock named."""
    req = a["req"]
    ranks = []
    for rs in s.ranks:
        end = next(e for r, e in rs.running if r == req)
        if rs.nodes[end] is not None:
            rs = lock_path(m, rs, end, -1)
        ranks.append(rs._replace(running=tuple(x for x in rs.running if x[0] != req)))
    return s._replace(ranks=tuple(ranks))
