"""The state of the specification: immutable, hashable tuples (TLA+ VARIABLES).

One ``RankState`` per tensor-parallel rank (each rank holds a replica of the radix tree and
its own pools and queues) and a shared ``State`` holding the ranks, the storage tier and two
flags for the ways a TP group can stop (a hung collective, a detected divergence).

A node is identified by the id of its last page (its "end"); ``owner[p]`` is the end of the
node containing page ``p`` or -1 when ``p`` is not cached. Node attributes live in
``nodes[end]``. The per-node fields mirror HiCache's TreeNode:

    dev   device copy: ABSENT (value is None) / RESIDENT / LOADING (H->D DMA in flight;
          the code already sees value set, so guards that test ``evicted`` see it resident)
    host  host copy: ABSENT (host_value is None) / WRITING (D->H in flight, slots held) /
          RESIDENT
    lock  lock_ref                     href  host_ref_counter (protect_host/release_host)
    hits  hit_count (capped at the write-through threshold)
    lbp   load_back_pending_id is set  rel   the host mirror was released (seed 000)
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

ABSENT, RESIDENT, LOADING = 0, 1, 2  # device states
WRITING = 1  # host state between ABSENT (0) and host RESIDENT (2)
HOST_RESIDENT = 2

DEV_NAMES = ("absent", "resident", "loading")
HOST_NAMES = ("absent", "writing", "resident")


class Node(NamedTuple):
    start: int
    dev: int = RESIDENT
    host: int = ABSENT
    lock: int = 0
    href: int = 0
    hits: int = 0
    lbp: bool = False
    rel: bool = False


class StorageAck(NamedTuple):
    """A finished H->L3 backup on one rank: pages the ack reports, pages really stored.

    ``actual`` is an auxiliary (history) field: the implementation cannot see it, the
    properties can. It equals ``reported`` unless the failed-batch-acked variant is on.
    """

    reported: int
    actual: int


class RankState(NamedTuple):
    owner: Tuple[int, ...]  # page -> end page of its node, -1 if not cached
    nodes: Tuple[Optional[Node], ...]  # end page -> node
    dev_free: int
    host_free: int
    durable: int  # bitmask over pages (the durable LRU keyed by page hash)
    # D->H copies (write_backup): FIFO of (start, end); wdone = finished prefix length.
    wq: Tuple[Tuple[int, int], ...] = ()
    wdone: int = 0
    # H->D copies (load_back): FIFO of (start, end); the anchor is the node ending at end.
    lq: Tuple[Tuple[int, int], ...] = ()
    ldone: int = 0
    # H->L3 backups (write_backup_storage): FIFO of (start, end); sdone = finished acks.
    sq: Tuple[Tuple[int, int], ...] = ()
    sdone: Tuple[StorageAck, ...] = ()
    # L3->H prefetches: (request, anchor end or -1, first page index in request, pages);
    # pdone: per prefetch, -1 while this rank's read runs, else the pages it got.
    pq: Tuple[Tuple[int, int, int, int], ...] = ()
    pdone: Tuple[int, ...] = ()
    # host_mem_release_queue: page counts waiting for the next drain round.
    relq: Tuple[int, ...] = ()
    # Mirror release (seed 000): last round's prepared plan, mismatch count, fail-closed.
    plan: Tuple[int, ...] = ()
    mismatch: int = 0
    closed: bool = False
    # Duplicate reclaim (seed 001): registry in insertion order, and the victims reclaimed
    # since the last ready-count round (what the rolling digest summarises).
    dups: Tuple[int, ...] = ()
    digest: Tuple[int, ...] = ()
    # CP load-back planner only: this rank's local access order (least recent first).
    clock: Tuple[int, ...] = ()
    # victim_order = "lru" only: live node ends, least recently used first, by the
    # replicated logical access clock (``clock`` is then this rank's wall-clock order:
    # the same touches plus its own local ones).
    lru: Tuple[int, ...] = ()
    # Request locks only: (request, end of the node it locked), sorted (replicated).
    running: Tuple[Tuple[int, int], ...] = ()
    # Slot identities only (spec/slots.py): per page its device / host slot (-1: none),
    # each pool's free slots (bitmask), and the host slots of prefetches / release entries.
    dslot: Tuple[int, ...] = ()
    hslot: Tuple[int, ...] = ()
    dfree: int = 0
    hfree: int = 0
    pslots: Tuple[Tuple[int, ...], ...] = ()
    rslots: Tuple[Tuple[int, ...], ...] = ()

    # Durable LRU order and ages (spec/durable.py): (page, drain rounds since marked),
    # least recently marked first; kept only when bounded (durable_capacity) or aged
    # (refresh_rounds).
    dlru: Tuple[Tuple[int, int], ...] = ()
    # Prefetch endings (spec/prefetch_end.py; only with the timeout policy, revoke or read
    # failures): per prefetch, aligned with pq, bits timed out / terminated / revoked / freed.
    pflags: Tuple[int, ...] = ()


# RankState fields the TLA+ twin does not have: only options it refuses (spec/config.py,
# twin="") make them differ from their default, so in every model it checks they are empty.
TWINLESS_FIELDS = frozenset()


class State(NamedTuple):
    ranks: Tuple[RankState, ...]
    store: Tuple[int, ...]  # per rank: bitmask of pages whose shard the store holds
    hung: str = ""  # sync point at which some rank waits for peers that skipped it
    halted: str = ""  # a sync round detected diverged replicas (fail-stop assertion)


def empty_rank(pages: int, device_pages: int, host_pages: int) -> RankState:
    return RankState(
        owner=(-1,) * pages,
        nodes=(None,) * pages,
        dev_free=device_pages,
        host_free=host_pages,
        durable=0,
    )


def initial_state(cfg, pages) -> State:
    rank = empty_rank(pages.count, cfg.device_pages, cfg.host_pages)
    if cfg.slots:
        none = (-1,) * pages.count
        rank = rank._replace(dslot=none, hslot=none, dfree=(1 << cfg.device_pages) - 1,
                             hfree=(1 << cfg.host_pages) - 1)
    return State(ranks=(rank,) * cfg.ranks, store=(0,) * cfg.ranks)


# ---------------------------------------------------------------------------------------
# Tree queries (pure functions of one rank's state and the page universe).


def node_pages(pages, rs: RankState, end: int) -> Tuple[int, ...]:
    return pages.chain(rs.nodes[end].start, end)


def node_len(pages, rs: RankState, end: int) -> int:
    return pages.depth(end) - pages.depth(rs.nodes[end].start) + 1


def parent_node(pages, rs: RankState, end: int) -> int:
    """End of the parent node, or -1 for a child of the root."""
    above = pages.parent[rs.nodes[end].start]
    return rs.owner[above] if above >= 0 else -1


def child_nodes(pages, rs: RankState, end: int) -> Tuple[int, ...]:
    return tuple(rs.owner[c] for c in pages.children[end] if rs.owner[c] >= 0)


def root_child_nodes(pages, rs: RankState) -> Tuple[int, ...]:
    return tuple(rs.owner[c] for c in pages.roots if rs.owner[c] >= 0)


def live_nodes(rs: RankState) -> Tuple[int, ...]:
    return tuple([e for e, n in enumerate(rs.nodes) if n is not None])


def path_to_root(pages, rs: RankState, end: int) -> Tuple[int, ...]:
    out = []
    while end >= 0:
        out.append(end)
        end = parent_node(pages, rs, end)
    return tuple(out)


def subtree(pages, rs: RankState, end: int) -> Tuple[int, ...]:
    """``end`` and all its descendants, parents before children."""
    out, stack = [], [end]
    while stack:
        e = stack.pop()
        out.append(e)
        stack.extend(child_nodes(pages, rs, e))
    return tuple(out)


def nodes_covering(pages, rs: RankState, start: int, end: int) -> Tuple[int, ...]:
    """Ends of the nodes that hold at least one page of the chain start..end (deduplicated)."""
    out = []
    for p in pages.chain(start, end):
        e = rs.owner[p]
        if e >= 0 and e not in out:
            out.append(e)
    return tuple(out)


def all_durable(pages, rs: RankState, end: int) -> bool:
    return all(rs.durable >> p & 1 for p in node_pages(pages, rs, end))


def is_device_leaf(pages, rs: RankState, end: int) -> bool:
    """In evictable_leaves: resident, unlocked, and no child holds a device copy."""
    n = rs.nodes[end]
    if n.dev != RESIDENT or n.lock > 0:
        return False
    return all(rs.nodes[c].dev == ABSENT for c in child_nodes(pages, rs, end))


def is_host_leaf(pages, rs: RankState, end: int) -> bool:
    """In evictable_host_leaves: evicted, unlocked, host-resident, no children left."""
    n = rs.nodes[end]
    return (
        n.dev == ABSENT
        and n.lock == 0
        and n.host == HOST_RESIDENT
        and not child_nodes(pages, rs, end)
    )


def matched_prefix(pages, rs: RankState, req: int) -> int:
    """How many leading pages of request ``req`` are cached (device or host)."""
    m = 0
    for p in pages.request_pages[req]:
        if rs.owner[p] < 0:
            break
        m += 1
    return m


# ---------------------------------------------------------------------------------------
# A faster ``_replace`` for the state tuples (the effects call it hundreds of thousands of
# times a second). Same result and same error for unknown fields as namedtuple's.


def _fast_replace(cls):
    index = {f: i for i, f in enumerate(cls._fields)}
    new = tuple.__new__

    def _replace(self, /, **kwds):
        try:
            if len(kwds) == 1:
                for k, v in kwds.items():
                    i = index[k]
                    return new(cls, self[:i] + (v,) + self[i + 1 :])
            vals = list(self)
            for k, v in kwds.items():
                vals[index[k]] = v
        except KeyError:
            raise ValueError(f"Got unexpected field names: {list(kwds)!r}") from None
        return new(cls, vals)

    return _replace


for _cls in (Node, StorageAck, RankState, State):
    _cls._replace = _fast_replace(_cls)
del _cls
