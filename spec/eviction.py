"""Device eviction: evict() popping one evictable leaf, _evict_backuped / _evict_regular,
and the write_back path that stages a node to host before demoting it."""

from __future__ import annotations

from .action import act
from .memo import per_model
from .host_eviction import allocate_host
from .state import (
    ABSENT,
    HOST_RESIDENT,
    is_device_leaf,
    live_nodes,
    node_len,
    subtree,
)
from . import slots
from .tree import register_duplicate, remove_nodes, set_node


def evict_params(m, s):
    fails = m.fail_sets() if m.cfg.write_back else ((),)
    leaves = sorted({e for rs in s.ranks for e in device_leaves(m, rs)})
    for e in leaves:
        for fail in fails:
            yield act("evict", node=e, fail=fail) if fail else act("evict", node=e)


@per_model
def device_leaves(m, rs):
    return tuple(e for e in live_nodes(rs) if is_device_leaf(m.pages, rs, e))


def evict_guard(m, s, a):
    e = a["node"]
    return any(rs.nodes[e] is not None and is_device_leaf(m.pages, rs, e) for rs in s.ranks)


def _demote(m, rs, e):
    """_evict_backuped: free the device copy; the host copy stays (node is evicted)."""
    n = rs.nodes[e]
    rs = rs._replace(dev_free=rs.dev_free + node_len(m.pages, rs, e))
    rs = slots.give(m, rs, "d", m.pages.chain(n.start, e))
    return set_node(rs, e, n._replace(dev=ABSENT))


def _prunable(m, rs, e) -> bool:
    """Every node below ``e`` is host-only and free of references (seed 000's pruning)."""
    return all(
        rs.nodes[d].href == 0 and rs.nodes[d].lock == 0 for d in subtree(m.pages, rs, e)[1:]
    )


def _droppable(m, rs, e) -> bool:
    """Option wb_drop_unbacked: nothing in ``e``'s subtree is locked, host-referenced or
    load-back pending (its descendants are host-only: ``e`` is a device leaf)."""
    return all(
        rs.nodes[d].lock == 0 and rs.nodes[d].href == 0 and not rs.nodes[d].lbp
        for d in subtree(m.pages, rs, e)
    )


def _delete(m, rs, e):
    """_evict_regular of a node with no host copy: free its device copy and delete it.

    Children it may still have were demoted (host-only): in the fixed protocol the
    host-only subtree is pruned with it, its host slots freed and its durable marks
    revoked (the data is in storage or recomputable). The orphan variant detaches them.
    """
    below = subtree(m.pages, rs, e)[1:]
    freed_host = 0
    rs = slots.give(m, rs, "d", m.pages.chain(rs.nodes[e].start, e))
    if not m.cfg.has("orphan-host-subtree"):
        freed_host = sum(node_len(m.pages, rs, d) for d in below)
        for d in below:
            rs = slots.give(m, rs, "h", m.pages.chain(rs.nodes[d].start, d))
    rs = rs._replace(
        dev_free=rs.dev_free + node_len(m.pages, rs, e),
        host_free=rs.host_free + freed_host,
    )
    return remove_nodes(m, rs, (e,) + below)


@per_model
def _evict_on_rank(m, rs, e):
    """One rank's eviction of leaf ``e`` when no host write is needed; None if it cannot."""
    n = rs.nodes[e]
    if n is None or not is_device_leaf(m.pages, rs, e):
        return rs  # this replica does not see a leaf here (diverged); nothing to do
    if n.host == HOST_RESIDENT:
        return _demote(m, rs, e)
    if m.cfg.has("orphan-host-subtree") or _prunable(m, rs, e):
        return _delete(m, rs, e)
    return rs  # a busy host-only descendant keeps the node for now


def evict(m, s, a):
    e = a["node"]
    cfg = m.cfg
    ranks = list(s.ranks)
    needs_write = [
        rs.nodes[e] is not None
        and is_device_leaf(m.pages, rs, e)
        and rs.nodes[e].host == ABSENT
        for rs in ranks
    ]
    if not (cfg.write_back and any(needs_write)):
        return s._replace(ranks=tuple(_evict_on_rank(m, rs, e) for rs in ranks))
    # write_back: write_backup(node, write_back=True), the blocking writing_check, then
    # demote. A write that cannot get host slots leaves the node on the device.
    holder = needs_write.index(True)
    need = node_len(m.pages, ranks[holder], e)
    agree = not cfg.has("partial-backup-leak")
    ranks, oks = allocate_host(m, ranks, need, frozenset(a.get("fail", ())), agree, cfg.evict_host_shortfall)
    for r, rs in enumerate(ranks):
        if not needs_write[r]:
            ranks[r] = _evict_on_rank(m, rs, e)
            continue
        if not oks[r]:
            if cfg.wb_drop_unbacked and _droppable(m, rs, e):
                ranks[r] = _delete(m, rs, e)  # drop_subtree_no_host
            continue
        n = rs.nodes[e]
        rs = rs._replace(host_free=rs.host_free - need)
        rs = slots.take(m, rs, "h", m.pages.chain(n.start, e))
        rs = set_node(rs, e, n._replace(host=HOST_RESIDENT, href=n.href + int(cfg.storage)))
        rs = register_duplicate(m, rs, e)  # backup ack: a duplicate birth point
        if cfg.storage:
            rs = rs._replace(sq=rs.sq + ((n.start, e),))
        ranks[r] = _demote(m, rs, e)
    return s._replace(ranks=tuple(ranks))
