"""Device -> host: insert (with _inc_hit_count), write_backup, the D->H DMA, writing_check."""

from __future__ import annotations

from .action import act
from .cp_planner import lanes_fit
from .durable import fresh
from .eviction import make_room
from .memo import per_model
from .host_eviction import allocate_host
from .state import (
    ABSENT,
    HOST_RESIDENT,
    Node,
    RESIDENT,
    WRITING,
    all_durable,
    node_len,
    nodes_covering,
    path_to_root,
)
from . import slots
from .sync import digest_round, tracks_digest
from .tree import add_node, lock_path, register_duplicate, set_node, split_node, touch, update_node


# --- insert -------------------------------------------------------------------------


def _same_page(m, cached: int, wanted: int) -> bool:
    """Does the walk take cached page ``cached`` for the request's page ``wanted``? Only
    when they are the same page (SGLang's _key_match_paged floors a token match to whole
    pages). Variant page-ceil-match: a sibling page whose leading token matches counts too
    (the token match is rounded up to the page), which only a page of several tokens allows."""
    if cached == wanted:
        return True
    if not m.cfg.has("page-ceil-match"):
        return False
    pages = m.pages
    return pages.parent[cached] == pages.parent[wanted] and pages.tokens(cached)[0] == pages.tokens(wanted)[0]


def _cached_as(m, rs, wanted: int) -> int:
    """The cached page the walk takes for request page ``wanted`` at a node boundary, -1 if none."""
    if rs.owner[wanted] >= 0:
        return wanted
    if not m.cfg.has("page-ceil-match"):
        return -1
    above = m.pages.parent[wanted]
    siblings = m.pages.children[above] if above >= 0 else m.pages.roots
    return next((c for c in siblings if rs.owner[c] >= 0 and _same_page(m, c, wanted)), -1)


def _walk(m, rs, req):
    """Yield (node end, pages of the request it covers) along the cached part of ``req``,
    telling the caller where a node must be split: (end, k, split_at or None)."""
    path = m.pages.request_pages[req]
    pos = 0
    while pos < len(path):
        at = _cached_as(m, rs, path[pos])
        if at < 0:
            break
        end = rs.owner[at]
        node_pages = m.pages.chain(rs.nodes[end].start, end)
        k = 0
        while k < len(node_pages) and pos + k < len(path) and _same_page(m, node_pages[k], path[pos + k]):
            k += 1
        yield end, k, (node_pages[k - 1] if k < len(node_pages) else None)
        pos += k


@per_model
def insert_device_need(m, rs, req) -> int:
    """Device pages insert(req) allocates: un-evicted nodes plus the new leaf."""
    need = 0
    covered = 0
    for end, k, _split in _walk(m, rs, req):
        if rs.nodes[end].dev == ABSENT:
            need += k
        covered += k
    return need + len(m.pages.request_pages[req]) - covered


def _hit(m, rs, end, to_write):
    """_inc_hit_count: write-through stages a node to host on its threshold-th hit."""
    cfg = m.cfg
    if cfg.write_back:
        return rs
    n = rs.nodes[end]
    hits = min(n.hits + 1, cfg.write_threshold)
    rs = set_node(rs, end, n._replace(hits=hits))
    # Anti-churn (seed 000): a fully durable node is not staged again.
    # Age-gated (refresh_rounds): once its marks are old it is staged again (refresh).
    churn_guard = cfg.mirror_release and all_durable(m.pages, rs, end) and fresh(m, rs, end)
    if n.host == ABSENT and hits >= cfg.write_threshold and not churn_guard:
        to_write.append(end)
    return rs


@per_model
def insert_on_rank(m, rs, req):
    """insert(): walk, split at the divergence point, un-evict, add the new leaf.

    Returns the rank state and the nodes that _inc_hit_count wants written to host.
    """
    path = m.pages.request_pages[req]
    to_write = []
    touched = []
    pos = 0
    for end, k, split_at in list(_walk(m, rs, req)):
        if split_at is not None:
            rs = split_node(m, rs, end, split_at)
            end = split_at
        touched.append(end)
        n = rs.nodes[end]
        if n.dev == ABSENT:
            # The node is evicted: take the new device copy (KV recomputation), a
            # duplicate birth point when its host copy is resident.
            rs = set_node(rs, end, n._replace(dev=RESIDENT))
            rs = rs._replace(dev_free=rs.dev_free - k)
            rs = slots.take(m, rs, "d", m.pages.chain(rs.nodes[end].start, end))
            rs = register_duplicate(m, rs, end)
            if m.cfg.prefetch_at_hit:
                # SGLang counts a hit on every node the insert walks, un-evicted ones too
                # (seen only on a prefetched node, whose count starts at 0: the host copy
                # is there, so the hit stages nothing).
                rs = _hit(m, rs, end, to_write)
        else:
            rs = _hit(m, rs, end, to_write)
        pos += k
    if pos < len(path):
        start, end = path[pos], path[-1]
        rs = add_node(m.pages, rs, start, end, Node(start=start))
        rs = rs._replace(dev_free=rs.dev_free - (len(path) - pos))
        rs = slots.take(m, rs, "d", m.pages.chain(start, end))
        rs = _hit(m, rs, end, to_write)
        touched.append(end)
    return touch(m, rs, touched), tuple(to_write)


def write_backup(m, ranks, per_rank_nodes, failing=frozenset()):
    """write_backup for each node that some rank wants staged (same order on all ranks).

    Allocation is agreed across ranks (see allocate_host); where it fails the write is
    rejected (hicache_write_rejected_tokens_total{reason="host_alloc_failed"}).
    Option backup_chain: the nodes are the request's path top-down, each staged after its
    unbacked ancestors; once a rank rejects one, its later (descendant) nodes are not
    staged. Option backup_path_lock: the write locks the node's whole path to the root.
    """
    cfg = m.cfg
    ranks = list(ranks)
    agree = not cfg.has("partial-backup-leak")
    stopped = [False] * len(ranks)
    for i in range(max(len(x) for x in per_rank_nodes)):
        wanted = [x[i] if i < len(x) and not stopped[r] else None for r, x in enumerate(per_rank_nodes)]
        if all(e is None for e in wanted):
            break
        end = next(e for e in wanted if e is not None)
        if agree and any(e != end for e in wanted):
            oks = [False] * len(ranks)  # replicas disagree on what to stage: nobody does
        else:
            # each rank asks for its own node's length (replicas that diverged may hold
            # nodes of different lengths under one key); the outcome is agreed
            need = tuple(0 if e is None else node_len(m.pages, rs, e) for rs, e in zip(ranks, wanted))
            ranks, oks = allocate_host(m, ranks, need, failing, agree, cfg.evict_host_shortfall)
        for r, rs in enumerate(ranks):
            e = wanted[r]  # == end where the outcome is agreed; partial-backup-leak: its own
            if e is None:
                continue
            if not oks[r]:
                stopped[r] = cfg.backup_chain
                continue
            n = rs.nodes[e]
            rs = rs._replace(host_free=rs.host_free - node_len(m.pages, rs, e), wq=rs.wq + ((n.start, e),))
            rs = slots.take(m, rs, "h", m.pages.chain(n.start, e))
            if cfg.backup_path_lock:
                ranks[r] = lock_path(m, set_node(rs, e, n._replace(host=WRITING)), e, +1)
            else:
                ranks[r] = set_node(rs, e, n._replace(host=WRITING, lock=n.lock + 1))
    return tuple(ranks)


def insert_params(m, s):
    fails = m.fail_sets()
    for req in range(len(m.pages.request_pages)):
        for fail in fails:
            yield act("insert", req=req, fail=fail) if fail else act("insert", req=req)


def insert_guard(m, s, a):
    if _fits(m, s.ranks, a["req"]):
        return True
    # insert_evicts: an insert that lacks room evicts first; the step is one when that
    # eviction changes something, even if the insert still does not fit after it.
    return m.cfg.insert_evicts and _make_room(m, s, a) != s.ranks


def _fits(m, ranks, req) -> bool:
    return all(insert_device_need(m, rs, req) <= rs.dev_free and _lanes_fit(m, rs, req) for rs in ranks)


def _make_room(m, s, a):
    """insert_evicts: the scheduler's evict(num_tokens) before the allocation, on every
    rank short of device pages, while the request holds the last node its walk reaches
    (lock_ref on its path). Returns the rank states."""
    req = a["req"]
    needs = [insert_device_need(m, rs, req) for rs in s.ranks]
    if all(n <= rs.dev_free for n, rs in zip(needs, s.ranks)):
        return s.ranks  # room on the pool (a CP lane may still lack it: no eviction)
    hold = [([end for end, _k, _at in _walk(m, rs, req)] or [-1])[-1] for rs in s.ranks]
    return tuple(make_room(m, s.ranks, needs, hold, frozenset(a.get("fail", ()))))


def _lanes_fit(m, rs, req) -> bool:
    """CP owner lanes (cp_lanes > 1): each lane has room for the pages the insert takes."""
    if m.cfg.cp_lanes == 1:
        return True
    taken = [p for p in m.pages.request_pages[req]
             if rs.owner[p] < 0 or rs.nodes[rs.owner[p]].dev == ABSENT]
    return lanes_fit(m, rs, taken)


def held_while_evicting(m, rs, req) -> frozenset:
    """insert_evicts: the nodes an insert of ``req`` holds locked while it evicts on this
    rank (its walk's last node and that node's path), empty when it has room."""
    if insert_device_need(m, rs, req) <= rs.dev_free:
        return frozenset()
    ends = [end for end, _k, _at in _walk(m, rs, req)]
    return frozenset(path_to_root(m.pages, rs, ends[-1])) if ends else frozenset()


def insert(m, s, a):
    if m.cfg.insert_evicts and not _fits(m, s.ranks, a["req"]):
        s = s._replace(ranks=_make_room(m, s, a))
        if not _fits(m, s.ranks, a["req"]):
            return s  # DeviceFullError after the eviction: the request waits
    results = [insert_on_rank(m, rs, a["req"]) for rs in s.ranks]
    ranks = tuple(rs for rs, _ in results)
    wanted = [w for _, w in results]
    if any(wanted):
        ranks = write_backup(m, ranks, wanted, frozenset(a.get("fail", ())))
    return s._replace(ranks=ranks)


# --- the D->H copy finishing on one rank ----------------------------------------------


def write_dma_done_params(m, s):
    for r in range(m.cfg.ranks):
        yield act("write_dma_done", rank=r)


def write_dma_done_guard(m, s, a):
    rs = s.ranks[a["rank"]]
    return rs.wdone < len(rs.wq)


def write_dma_done(m, s, a):
    r = a["rank"]
    rs = s.ranks[r]
    return _with_rank(s, r, rs._replace(wdone=rs.wdone + 1))


# --- writing_check ----------------------------------------------------------------------


def writing_check_params(m, s):
    yield act("writing_check")


def writing_check_guard(m, s, a):
    if tracks_digest(m.cfg) and any(rs.digest for rs in s.ranks):
        return True  # the fused ready-count round runs every iteration, carrying the digest
    # The round runs every scheduler iteration while ongoing_write_through is non-empty
    # (replicated, so every rank enters it); with nothing finished somewhere, MIN is 0
    # and the round changes nothing (a stuttering step).
    return any(rs.wq for rs in s.ranks)


def writing_check(m, s, a):
    cfg = m.cfg
    if (
        cfg.has("early-return-collective")
        and any(rs.wdone == 0 for rs in s.ranks)
        and any(rs.wdone > 0 for rs in s.ranks)
    ):
        # Ranks with nothing finished returned before the all-reduce; the others wait in
        # it forever. (When every rank returns early, nobody waits: no hang.)
        return s._replace(hung="writing_check")
    s, halt = digest_round(m, s, "writing_check")
    if halt:
        return s._replace(halted=halt)
    n = min(rs.wdone for rs in s.ranks)
    return s._replace(ranks=tuple(commit_writes(m, rs, n) for rs in s.ranks))


@per_model
def commit_writes(m, rs, n):
    """Commit the first ``n`` D->H copies: host resident, write lock dropped, storage
    backup started (write_backup_storage: protect_host + H->L3 op; option
    storage_per_node: one op per node the copy covers, split halves included)."""
    cfg = m.cfg
    path_lock = cfg.backup_path_lock and not cfg.write_back
    for start, end in rs.wq[:n]:
        covering = nodes_covering(m.pages, rs, start, end)
        for e in covering:
            node = rs.nodes[e]
            # split-write-lock-leak: the ack unlocks only the node it was registered with,
            # so the half a split cut off above it keeps the lock it copied.
            leak = cfg.has("split-write-lock-leak") and e != end
            rs = update_node(
                rs,
                e,
                host=HOST_RESIDENT,
                lock=node.lock - (0 if cfg.write_back or path_lock or leak else 1),
                href=node.href + (1 if cfg.storage else 0),
            )
            rs = register_duplicate(m, rs, e)
        if path_lock:
            rs = lock_path(m, rs, end, -1)
        if cfg.storage:
            ops = tuple((rs.nodes[e].start, e) for e in covering) if cfg.storage_per_node else ((start, end),)
            rs = rs._replace(sq=rs.sq + ops)
    return rs._replace(wq=rs.wq[n:], wdone=rs.wdone - n)


def _with_rank(s, r, rs):
    ranks = list(s.ranks)
    ranks[r] = rs
    return s._replace(ranks=tuple(ranks))
