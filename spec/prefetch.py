"""Storage -> host: prefetch_from_storage, the L3->H reads per rank, check_prefetch_progress
(termination agreed with a MAX all-reduce, completed pages with a MIN all-reduce)."""

from __future__ import annotations

from .action import act
from .host_eviction import allocate_host
from .state import ABSENT, HOST_RESIDENT, Node, matched_prefix
from .tree import add_node, ensure_boundary, update_node

NOT_DONE = -1  # pdone entry of a read that has not finished on that rank


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
    first = m.pages.request_pages[req][anchors[0][0]]
    # Only worth a host reservation when the storage hit query finds the next page.
    return any(s.store[_source(m, r)] >> first & 1 for r in range(m.cfg.ranks))


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
    ranks, oks = allocate_host(m, ranks, n, frozenset(a.get("fail", ())))
    out = []
    for rs, ok in zip(ranks, oks):
        if ok:
            rs = rs._replace(
                host_free=rs.host_free - n, pq=rs.pq + ((req, anchor, k, n),), pdone=rs.pdone + (NOT_DONE,)
            )
        else:
            rs = protect(rs, -1)
        out.append(rs)
    return s._replace(ranks=tuple(out))


def prefetch_io_params(m, s):
    for r, rs in enumerate(s.ranks):
        for i in range(len(rs.pq)):
            yield act("prefetch_io", rank=r, op=i)


def prefetch_io_guard(m, s, a):
    r, i = a["rank"], a["op"]
    rs = s.ranks[r]
    return i < len(rs.pq) and rs.pdone[i] == NOT_DONE


def prefetch_io(m, s, a):
    """The rank's prefetch read finishes: it got the leading pages that its store holds
    (the read stops at the first miss)."""
    r, i = a["rank"], a["op"]
    rs = s.ranks[r]
    req, _anchor_end, k, n = rs.pq[i]
    path = m.pages.request_pages[req]
    held = s.store[_source(m, r)]
    got = 0
    while got < n and held >> path[k + got] & 1:
        got += 1
    pdone = list(rs.pdone)
    pdone[i] = got
    ranks = list(s.ranks)
    ranks[r] = rs._replace(pdone=tuple(pdone))
    return s._replace(ranks=tuple(ranks))


def check_prefetch_params(m, s):
    if not s.ranks[0].pq:
        return
    for i in range(len(s.ranks[0].pq)):
        yield act("check_prefetch_progress", op=i)


def check_prefetch_guard(m, s, a):
    i = a["op"]
    # The check runs every scheduler iteration while the prefetch is outstanding; while
    # the vote says some rank cannot terminate it changes nothing (a stuttering step).
    return all(i < len(rs.pq) and rs.pq[i] == s.ranks[0].pq[i] for rs in s.ranks)


def can_terminate(m, rs, i) -> bool:
    """A rank's vote (can_terminate_prefetch): best_effort always; wait_complete once its
    read has finished (the seed's completed_tokens == the pages its hit query found)."""
    return m.cfg.prefetch_stop == "best_effort" or rs.pdone[i] != NOT_DONE


def terminate_vote(m, s, i) -> bool:
    """The MAX all-reduce of (1 - can_terminate): the prefetch terminates only when every
    rank can. While some rank cannot, the check changes nothing (a stuttering step). The
    vote's other half, an operation terminated on some rank (a revoke, the
    timeout policy), is not modelled: no action terminates one rank's operation."""
    return all(can_terminate(m, rs, i) for rs in s.ranks)


def check_prefetch_progress(m, s, a):
    """Terminate (once the MAX vote says every rank can: terminate_vote), agree on the completed prefix (MIN), insert it
    as host-only nodes, free what the tree already had, queue the unused tail for the
    next drain round, release the anchor."""
    i = a["op"]
    cfg = m.cfg
    if not terminate_vote(m, s, i):
        if cfg.has("prefetch-vote-skipped") and any(can_terminate(m, rs, i) for rs in s.ranks):
            # A rank that can terminate enters the completed-pages MIN all-reduce without
            # the MAX vote; a rank that cannot returned: the group hangs.
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
        if have < len(fetched):
            start, end = fetched[have], fetched[-1]
            rs = add_node(m.pages, rs, start, end, Node(start=start, dev=ABSENT, host=HOST_RESIDENT))
        tail = n - completed
        free_now = have + (tail if cfg.has("prefetch-double-free") else 0)
        rs = rs._replace(
            host_free=rs.host_free + free_now,
            relq=rs.relq + ((tail,) if tail else ()),
            pq=rs.pq[:i] + rs.pq[i + 1 :],
            pdone=rs.pdone[:i] + rs.pdone[i + 1 :],
        )
        if anchor >= 0 and rs.nodes[anchor] is not None:
            rs = update_node(rs, anchor, href=rs.nodes[anchor].href - 1)
        ranks.append(rs)
    return s._replace(ranks=tuple(ranks))
