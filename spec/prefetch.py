"""Storage -> host: prefetch_from_storage, the L3->H reads per rank, check_prefetch_progress
(termination agreed with a MAX all-reduce, completed pages with a MIN all-reduce).

Option ``prefetch_at_hit`` (SGLang 0.5.20+): the host slots are taken when the storage hit
query returns (MIN over the ranks' hits), as many as that hit, fewer when the host is
short after evicting; a prefetch is declined while the pages requested by those in flight
reach half the host pool; one read thread per rank finishes the reads in issue order;
a fetched page already in the tree without a host copy takes the fetched one.
"""

from __future__ import annotations

from .action import act
from .host_eviction import allocate_host, evict_host
from .prefetch_end import NOT_DONE, REVOKED, drop_op, flags, new_flags, skips_vote, terminate_vote
from .state import ABSENT, HOST_RESIDENT, Node, matched_prefix, node_len
from . import slots
from .tree import add_node, ensure_boundary, touch, update_node


def _anchor(m, rs, req):
    """(matched pages, anchor node end or -1) when ``req`` can prefetch, else None.

    The fetched pages hang below the last matched node (last_host_node), which must end
    exactly where the match ends and hold a host copy (or be the root)."""
    path = m.pages.request_pages[req]
    k = matched_prefix(m.pages, rs, req)
    if k == len(path):
        return None
    if k == 0:
        return 0, -1
    end = rs.owner[path[k - 1]]
    if end != path[k - 1] or rs.nodes[end].host != HOST_RESIDENT:
        return None
    return k, end


def _source(m, rank: int) -> int:
    return 0 if m.cfg.single_writer else rank


def _held_from(m, s, r: int, path, k: int) -> int:
    """Pages of ``path`` from index ``k`` on that rank ``r``'s store holds, up to the first miss."""
    held, got = s.store[_source(m, r)], 0
    while k + got < len(path) and held >> path[k + got] & 1:
        got += 1
    return got


def _storage_hit(m, s, req: int, k: int) -> int:
    """prefetch_at_hit: the hit query's pages, MIN over the ranks."""
    path = m.pages.request_pages[req]
    return min(_held_from(m, s, r, path, k) for r in range(m.cfg.ranks))


def _occupied(m, rs) -> int:
    """Pages requested by the prefetches in flight (prefetch_tokens_occupied)."""
    return sum(len(m.pages.request_pages[req]) - k for req, _a, k, _n in rs.pq)


def prefetch_params(m, s):
    if not (m.cfg.prefetch and m.cfg.storage):
        return
    for req in range(len(m.pages.request_pages)):
        for fail in m.fail_sets():
            yield act("prefetch_from_storage", req=req, fail=fail) if fail else act(
                "prefetch_from_storage", req=req
            )


def prefetch_guard(m, s, a):
    req = a["req"]
    if any(op[0] == req for rs in s.ranks for op in rs.pq):
        return False
    anchors = [_anchor(m, rs, req) for rs in s.ranks]
    if anchors[0] is None or any(x != anchors[0] for x in anchors):
        return False
    if m.cfg.prefetch_at_hit:
        # prefetch_rate_limited (half the host pool), then a hit below one page is revoked.
        return (_occupied(m, s.ranks[0]) < m.cfg.host_pages // 2
                and _storage_hit(m, s, req, anchors[0][0]) > 0)
    first = m.pages.request_pages[req][anchors[0][0]]
    # Only worth a host reservation when the storage hit query finds the next page.
    return any(s.store[_source(m, r)] >> first & 1 for r in range(m.cfg.ranks))


def held_during_step(m, s, a) -> int:
    """The node a step holds a host reference on only while it runs, else -1: a
    prefetch_from_storage protects its anchor (protect_host) before its fallback
    evict_host and releases it when the allocation fails, so the reclaim inside the step
    cannot take the anchor although it is reclaimable before and after the step."""
    if a.name != "prefetch_from_storage":
        return -1
    got = _anchor(m, s.ranks[0], a["req"])
    return got[1] if got else -1


def prefetch_from_storage(m, s, a):
    """Protect the anchor, reserve host slots for the missing pages, start the reads."""
    req = a["req"]
    k, anchor = _anchor(m, s.ranks[0], req)
    n = len(m.pages.request_pages[req]) - k

    def protect(rs, delta):
        if anchor < 0:
            return rs
        return update_node(rs, anchor, href=rs.nodes[anchor].href + delta)

    # protect_host first: the fallback host eviction must not take the anchor away.
    ranks = [protect(rs, +1) for rs in s.ranks]
    if m.cfg.prefetch_at_hit:
        return s._replace(ranks=tuple(_take_at_hit(m, rs, req, anchor, k, _storage_hit(m, s, req, k), protect)
                                      for rs in ranks))
    ranks, oks = allocate_host(m, ranks, n, frozenset(a.get("fail", ())))
    out = []
    for rs, ok in zip(ranks, oks):
        if ok:
            rs = rs._replace(
                host_free=rs.host_free - n, pq=rs.pq + ((req, anchor, k, n),), pdone=rs.pdone + (NOT_DONE,),
                pflags=new_flags(m, rs),
            )
            if m.cfg.slots:
                rs, got = slots.reserve(m, rs, n)
                rs = rs._replace(pslots=rs.pslots + (got,))
        else:
            rs = protect(rs, -1)
        out.append(rs)
    return s._replace(ranks=tuple(out))


def _take_at_hit(m, rs, req, anchor, k, hit, protect):
    """allocate_storage_hit: the hit's pages, else evict_host(hit) and take the hit or
    what is free (partial); nothing free: the prefetch is revoked (evictions stay)."""
    if rs.host_free < hit:
        rs = evict_host(m, rs, hit)
    n = min(hit, rs.host_free)
    if n < 1:
        return protect(rs, -1)
    return rs._replace(host_free=rs.host_free - n, pq=rs.pq + ((req, anchor, k, n),), pdone=rs.pdone + (NOT_DONE,),
                       pflags=new_flags(m, rs))


def prefetch_io_params(m, s):
    for r, rs in enumerate(s.ranks):
        for i in range(len(rs.pq)):
            yield act("prefetch_io", rank=r, op=i)


def prefetch_io_guard(m, s, a):
    r, i = a["rank"], a["op"]
    rs = s.ranks[r]
    if m.cfg.prefetch_at_hit and NOT_DONE in rs.pdone[:i]:
        return False  # one read thread: an earlier read finishes first
    return i < len(rs.pq) and rs.pdone[i] == NOT_DONE


def prefetch_io(m, s, a):
    """The rank's prefetch read finishes: it got the leading pages that its store holds
    (the read stops at the first miss)."""
    r, i = a["rank"], a["op"]
    rs = s.ranks[r]
    req, _anchor_end, k, n = rs.pq[i]
    got = min(n, _held_from(m, s, r, m.pages.request_pages[req], k))
    pdone = list(rs.pdone)
    pdone[i] = got
    ranks = list(s.ranks)
    ranks[r] = rs._replace(pdone=tuple(pdone))
    return s._replace(ranks=tuple(ranks))


def _refill(m, rs, pages):
    """prefetch_at_hit (insert_host under write_through): a fetched node the tree holds
    without a host copy takes the fetched slots as its host copy; the slots of nodes with
    one are freed. Returns (rank state, pages freed)."""
    freed, p = 0, 0
    while p < len(pages):
        end = rs.owner[pages[p]]
        node = rs.nodes[end]
        size = node_len(m.pages, rs, end)
        if node.host == ABSENT:
            rs = update_node(rs, end, host=HOST_RESIDENT)
        else:
            freed += size
        p += size
    return rs, freed


def check_prefetch_params(m, s):
    if not s.ranks[0].pq:
        return
    for i in range(len(s.ranks[0].pq)):
        yield act("check_prefetch_progress", op=i)


def check_prefetch_guard(m, s, a):
    i = a["op"]
    # The check runs every scheduler iteration while the prefetch is outstanding; while
    # the vote says some rank cannot terminate it changes nothing (a stuttering step).
    # A revoked prefetch is no longer checked: the drain round retires it.
    return (all(i < len(rs.pq) and rs.pq[i] == s.ranks[0].pq[i] for rs in s.ranks)
            and not flags(s.ranks[0], i) & REVOKED)


def check_prefetch_progress(m, s, a):
    """Terminate (once the MAX vote says so: prefetch_end.terminate_vote), agree on the completed prefix (MIN), insert it
    as host-only nodes, free what the tree already had, queue the unused tail for the
    next drain round, release the anchor."""
    i = a["op"]
    cfg = m.cfg
    if not terminate_vote(m, s, i):
        if skips_vote(m, s, i):
            # A rank that terminates on its own enters the completed-pages MIN all-reduce
            # without the MAX vote; a rank that cannot returned: the group hangs.
            return s._replace(hung="check_prefetch_progress")
        return s
    # A read terminated before it finished has brought nothing usable.
    completed = min(max(rs.pdone[i], 0) for rs in s.ranks)
    ranks = []
    for rs in s.ranks:
        req, anchor, k, n = rs.pq[i]
        path = m.pages.request_pages[req]
        fetched = path[k : k + completed]
        have = 0
        while have < len(fetched) and rs.owner[fetched[have]] >= 0:
            have += 1
        if have:
            rs = ensure_boundary(m, rs, fetched[have - 1])
        freed = have
        if cfg.prefetch_at_hit:
            rs, freed = _refill(m, rs, fetched[:have])
        if have < len(fetched):
            start, end = fetched[have], fetched[-1]
            rs = add_node(m.pages, rs, start, end, Node(start=start, dev=ABSENT, host=HOST_RESIDENT))
            rs = touch(m, rs, (end,))
        tail = n - completed
        free_now = freed + (tail if cfg.has("prefetch-double-free") else 0)
        if cfg.slots:
            held = rs.pslots[i]
            rs = slots.adopt(m, rs, fetched[have:], held[have:completed])
            rs = slots.release(m, rs, held[:have] + (held[completed:] if cfg.has("prefetch-double-free") else ()))
            rs = rs._replace(rslots=rs.rslots + ((held[completed:],) if tail else ()))
        rs = drop_op(rs, i)._replace(
            host_free=rs.host_free + free_now,
            relq=rs.relq + ((tail,) if tail else ()),
        )
        if anchor >= 0 and rs.nodes[anchor] is not None:
            rs = update_node(rs, anchor, href=rs.nodes[anchor].href - 1)
        ranks.append(rs)
    return s._replace(ranks=tuple(ranks))
