"""Structural edits of one rank's radix tree: set, add, split, remove, lock paths.

These are the building blocks of the actions, not actions themselves. All are pure:
they take a RankState and return a new one.
"""

from __future__ import annotations

from . import slots
from .durable import revoke
from .state import (
    ABSENT,
    HOST_RESIDENT,
    Node,
    RankState,
    child_nodes,
    node_len,
    node_pages,
    parent_node,
    path_to_root,
)


def set_node(rs: RankState, end: int, node) -> RankState:
    nodes = list(rs.nodes)
    nodes[end] = node
    return rs._replace(nodes=tuple(nodes))


def update_node(rs: RankState, end: int, **fields) -> RankState:
    return set_node(rs, end, rs.nodes[end]._replace(**fields))


def add_node(pages, rs: RankState, start: int, end: int, node: Node) -> RankState:
    owner = list(rs.owner)
    for p in pages.chain(start, end):
        owner[p] = end
    nodes = list(rs.nodes)
    nodes[end] = node._replace(start=start)
    return rs._replace(owner=tuple(owner), nodes=tuple(nodes))


def touch(m, rs: RankState, ends) -> RankState:
    """victim_order = "lru": the nodes a replicated step accessed become the most recent,
    in access order, in the replicated order and in the rank's wall-clock order."""
    if not m.cfg.lru or not ends:
        return rs
    ends = tuple(ends)

    def moved(order):
        return tuple(e for e in order if e not in ends) + ends

    return rs._replace(lru=moved(rs.lru), clock=moved(rs.clock))


def _copy_stamp(order, end: int, at: int):
    """The split's upper half ``at`` copies ``end``'s access stamp: a tie that the
    token path breaks (the upper half's path is a prefix), so it sits just before it."""
    i = order.index(end)
    return order[:i] + (at,) + order[i:]


def split_node(m, rs: RankState, end: int, at: int) -> RankState:
    """_split_node: cut node ``end`` after page ``at``; the new upper half ends at ``at``.

    The lower half keeps its end page (it is the same TreeNode object as before, ``child``
    in the code); the new half inherits lock_ref, hit_count and, in the fixed protocol,
    host_ref_counter and load_back_pending_id, because in-flight operations cover its pages
    too. A duplicate born by the split is registered (seed 001 birth point).
    """
    cfg, pages = m.cfg, m.pages
    old = rs.nodes[end]
    lower_start = next(p for p in pages.chain(old.start, end) if pages.parent[p] == at)
    # host_ref_counter mixes two holds: in-flight storage backups, which read every page
    # of the node, and a prefetch anchor, which pins the node it was taken on (the lower
    # half keeps that identity). The upper half gets only the backups' holds.
    backups = sum(1 for s, e in rs.sq if at in pages.chain(s, e))
    upper = old._replace(
        href=0 if cfg.has("split-during-backup") else backups,
        lbp=False if cfg.has("split-drops-pending-mark") else old.lbp,
    )
    rs = add_node(pages, rs, old.start, at, upper)
    rs = set_node(rs, end, old._replace(start=lower_start))
    if cfg.has("split-slice-off-by-one") and old.dev != ABSENT:
        rs = slots.split_slots(m, rs, pages.chain(lower_start, end), at)
    if cfg.lru:
        rs = rs._replace(lru=_copy_stamp(rs.lru, end, at), clock=_copy_stamp(rs.clock, end, at))
    return register_duplicate(m, rs, at)


def ensure_boundary(m, rs: RankState, page: int) -> RankState:
    """Split the node holding ``page`` so that ``page`` ends a node (no-op if it does)."""
    end = rs.owner[page]
    if end >= 0 and end != page:
        rs = split_node(m, rs, end, page)
    return rs


def remove_nodes(m, rs: RankState, ends) -> RankState:
    """Take nodes out of the tree: durable marks revoked, registry entries cleaned.

    Pools are the caller's business (a deletion frees what the node held; the orphan
    variant deliberately does not).
    """
    pages = m.pages
    owner = list(rs.owner)
    nodes = list(rs.nodes)
    durable = rs.durable
    for e in ends:
        for p in pages.chain(nodes[e].start, e):
            owner[p] = -1
            durable &= ~(1 << p)
        nodes[e] = None
    dups = tuple(d for d in rs.dups if d not in ends)
    if rs.dlru:
        rs = revoke(rs, [p for p, o in enumerate(rs.owner) if o >= 0 and owner[p] < 0])
    rs = rs._replace(owner=tuple(owner), nodes=tuple(nodes), durable=durable, dups=dups)
    if m.cfg.lru:
        rs = rs._replace(lru=tuple(e for e in rs.lru if e not in ends),
                         clock=tuple(e for e in rs.clock if e not in ends))
    return rs


def lock_path(m, rs: RankState, end: int, delta: int) -> RankState:
    """inc_lock_ref / dec_lock_ref: every node from ``end`` up to the root."""
    for e in path_to_root(m.pages, rs, end):
        rs = update_node(rs, e, lock=rs.nodes[e].lock + delta)
    return rs


def is_duplicate(rs: RankState, end: int) -> bool:
    """A settled full host duplicate: the code's ``not evicted`` and a resident host copy."""
    n = rs.nodes[end]
    return n is not None and n.dev != ABSENT and n.host == HOST_RESIDENT


def register_duplicate(m, rs: RankState, end: int) -> RankState:
    """_update_duplicate_tracking at a birth point (write_back + duplicate reclaim only).

    An ordered dict: re-registering an existing key keeps its position.
    """
    cfg = m.cfg
    if not (cfg.write_back and cfg.duplicate_reclaim):
        return rs
    if end in rs.dups or not is_duplicate(rs, end):
        return rs
    if cfg.settled_duplicates and rs.nodes[end].lbp:
        return rs  # still read by a load-back: it joins the registry at the load's ack
    return rs._replace(dups=rs.dups + (end,))


def free_node_host(m, rs: RankState, end: int) -> RankState:
    """Drop a node's host copy (the node stays in the tree)."""
    n = rs.nodes[end]
    rs = rs._replace(host_free=rs.host_free + node_len(m.pages, rs, end))
    rs = slots.give(m, rs, "h", m.pages.chain(n.start, end))
    return set_node(rs, end, n._replace(host=ABSENT))


def node_summary(m, rs: RankState, end: int):
    """(pages, parent, children) of a node, for messages and viewers."""
    return (
        node_pages(m.pages, rs, end),
        parent_node(m.pages, rs, end),
        child_nodes(m.pages, rs, end),
    )
