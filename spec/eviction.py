"""Device eviction: evict() popping one evictable leaf, _evict_backuped / _evict_regular,
and the write_back path that stages a node to host before demoting it."""

from __future__ import annotations

from .action import act
from .memo import per_model
from .host_eviction import allocate_host, victim_key
from .state import (
    ABSENT,
    HOST_RESIDENT,
    RESIDENT,
    child_nodes,
    is_device_leaf,
    live_nodes,
    node_len,
    parent_node,
    subtree,
)
from . import slots
from .tree import lock_path, register_duplicate, remove_nodes, set_node


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
    if rs.nodes[e] is None or not is_device_leaf(m.pages, rs, e):
        return rs  # this replica does not see a leaf here (diverged); nothing to do
    return _evict_leaf(m, rs, e)


def evict(m, s, a):
    e = a["node"]
    ranks = evict_nodes(m, s.ranks, [e] * len(s.ranks), frozenset(a.get("fail", ())))
    return s._replace(ranks=tuple(ranks))


def _leaf_on(m, rs, e, forced) -> bool:
    """``e`` is evicted as a device leaf on this rank: an evictable leaf, or (``forced``)
    a resident node without device children whatever its lock (lru-evicts-locked-parent)."""
    if rs.nodes[e] is None:
        return False
    if forced:
        return rs.nodes[e].dev == RESIDENT and all(
            rs.nodes[c].dev == ABSENT for c in child_nodes(m.pages, rs, e))
    return is_device_leaf(m.pages, rs, e)


def evict_nodes(m, ranks, victims, failing=frozenset(), forced=None):
    """One device eviction on every rank: rank ``r`` evicts leaf ``victims[r]`` (the
    ``evict`` action names the same node everywhere; the LRU loop picks per rank).
    ``forced[r]``: the victim is evicted although it is locked. Returns the rank states."""
    cfg = m.cfg
    ranks = list(ranks)
    forced = forced or [False] * len(ranks)
    leaf = [v is not None and _leaf_on(m, rs, v, f) for rs, v, f in zip(ranks, victims, forced)]
    needs_write = [lf and rs.nodes[v].host == ABSENT for lf, rs, v in zip(leaf, ranks, victims)]
    if not (cfg.write_back and any(needs_write)):
        return [_evict_one(m, rs, v, f) for rs, v, f in zip(ranks, victims, forced)]
    # write_back: write_backup(node, write_back=True), the blocking writing_check, then
    # demote. A write that cannot get host slots leaves the node on the device.
    # The host room asked for: the lowest writing rank's node length on every rank, agreed
    # by one MIN of (rank, pages) (replicas agree on it unless they diverged); each writing
    # rank then takes and charges its own node's pages. partial-backup-leak: each rank
    # asks for its own, alone.
    agree = not cfg.has("partial-backup-leak")
    if agree:
        holder = needs_write.index(True)
        need = node_len(m.pages, ranks[holder], victims[holder])
    else:
        need = tuple(node_len(m.pages, rs, v) if nw else 0 for rs, v, nw in zip(ranks, victims, needs_write))
    ranks, oks = allocate_host(m, ranks, need, failing, agree, cfg.evict_host_shortfall)
    for r, rs in enumerate(ranks):
        e = victims[r]
        if not needs_write[r]:
            ranks[r] = _evict_one(m, rs, e, forced[r])
            continue
        if not oks[r]:
            if cfg.wb_drop_unbacked and _droppable(m, rs, e):
                ranks[r] = _delete(m, rs, e)  # drop_subtree_no_host
            continue
        n = rs.nodes[e]
        rs = rs._replace(host_free=rs.host_free - node_len(m.pages, rs, e))
        rs = slots.take(m, rs, "h", m.pages.chain(n.start, e))
        rs = set_node(rs, e, n._replace(host=HOST_RESIDENT, href=n.href + int(cfg.storage)))
        rs = register_duplicate(m, rs, e)  # backup ack: a duplicate birth point
        if cfg.storage:
            rs = rs._replace(sq=rs.sq + ((n.start, e),))
        ranks[r] = _demote(m, rs, e)
    return ranks


def _evict_one(m, rs, e, forced):
    if e is None:
        return rs
    if forced:
        return _evict_leaf(m, rs, e) if _leaf_on(m, rs, e, True) else rs
    return _evict_on_rank(m, rs, e)


def _evict_leaf(m, rs, e):
    """_evict_on_rank of a node the caller found to be a leaf (locked or not)."""
    if rs.nodes[e].host == HOST_RESIDENT:
        return _demote(m, rs, e)
    if m.cfg.has("orphan-host-subtree") or _prunable(m, rs, e):
        return _delete(m, rs, e)
    return rs  # a busy host-only descendant keeps the node for now


def evict_lru(m, ranks, wants, failing=frozenset()):
    """evict(num_tokens) (seed 004 HiRadixCache.evict, called by the scheduler before an
    allocation and by load_back's retry): per rank, pop evictable device leaves in victim
    order until ``wants[r]`` device pages are freed or no leaf is left; a victim that frees
    nothing (busy host-only descendants, a rejected write-back) is skipped. After each
    victim its parent joins the candidates once no child holds a device copy (the heap
    push); the seed pops it only if unlocked, variant lru-evicts-locked-parent does not
    check. Returns the rank states."""
    ranks = list(ranks)
    freed = [0] * len(ranks)
    stuck = [set() for _ in ranks]
    pushed = [set() for _ in ranks]
    unchecked = m.cfg.has("lru-evicts-locked-parent")
    while True:
        victims, forced = [], []
        for r, rs in enumerate(ranks):
            cands = [] if freed[r] >= wants[r] else [
                e for e in live_nodes(rs) if e not in stuck[r]
                and (is_device_leaf(m.pages, rs, e) or (e in pushed[r] and _leaf_on(m, rs, e, True)))]
            v = min(cands, key=victim_key(m, rs)) if cands else None
            victims.append(v)
            forced.append(v is not None and not is_device_leaf(m.pages, rs, v))
        if all(v is None for v in victims):
            return ranks
        before = ranks
        ranks = evict_nodes(m, ranks, victims, failing, forced)
        for r, v in enumerate(victims):
            if v is None:
                continue
            got = ranks[r].dev_free - before[r].dev_free
            freed[r] += got
            if not got:
                stuck[r].add(v)
            elif unchecked:
                up = parent_node(m.pages, before[r], v)
                if up >= 0 and ranks[r].nodes[up] is not None:
                    pushed[r].add(up)


def make_room(m, ranks, needs, hold, failing=frozenset()):
    """The eviction an insert (``insert_evicts``) or a load_back (``load_back_evicts``)
    does when rank ``r`` lacks ``needs[r]`` device pages: ``hold[r]`` (a node end, or -1)
    and its path stay locked meanwhile, then evict_lru frees the shortfall."""
    ranks = [lock_path(m, rs, h, +1) if h >= 0 else rs for rs, h in zip(ranks, hold)]
    ranks = evict_lru(m, ranks, [max(0, n - rs.dev_free) for rs, n in zip(ranks, needs)], failing)
    return [lock_path(m, rs, h, -1) if h >= 0 and rs.nodes[h] is not None else rs
            for rs, h in zip(ranks, hold)]
