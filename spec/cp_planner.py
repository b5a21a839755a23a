"""The load-back eviction planner of context-parallel HiCache (header of seed 004).

When a load-back needs more device room than is free, the planner chooses device victims
among evictable leaves by their contribution to the remaining deficit, ties broken by a
strict total order over rank-replicated state (the node's end page). Every rank plans on
its own replica, so determinism of that order is what keeps CP ranks agreeing.

The spec abstracts owner lanes to one lane (a victim's contribution is its page count,
capped at the remaining deficit): ties, which are what the property is about, survive the
abstraction. The variant ``planner-local-tiebreak`` breaks ties by the rank's local
access clock instead (least recently accessed first), a per-rank value.
"""

from __future__ import annotations

from . import slots
from .action import act
from .state import ABSENT, HOST_RESIDENT, is_host_leaf, live_nodes, node_len
from .tree import remove_nodes, set_node

from .eviction import device_leaves


def plan_victims(m, rs, need: int, protected) -> tuple:
    """Victims (node ends, in order) that free ``need`` device pages, or () if impossible."""
    cfg = m.cfg
    clock = {e: i for i, e in enumerate(rs.clock)}

    def freeable(e):
        if e in protected:
            return False
        n = rs.nodes[e]
        return n.host == HOST_RESIDENT or (not cfg.write_back and not _has_children(m, rs, e))

    remaining, victims = need, []
    candidates = [e for e in device_leaves(m, rs) if freeable(e)]
    while remaining > 0 and candidates:
        def key(e):
            gain = min(node_len(m.pages, rs, e), remaining)
            if cfg.has("planner-local-tiebreak"):
                return (-gain, clock.get(e, -1), e)
            return (-gain, e)

        best = min(candidates, key=key)
        victims.append(best)
        remaining -= node_len(m.pages, rs, best)
        candidates.remove(best)
    return tuple(victims) if remaining <= 0 else ()


def _has_children(m, rs, e) -> bool:
    from .state import child_nodes

    return bool(child_nodes(m.pages, rs, e))


def evict_victims(m, rs, victims):
    """Demote backed victims; delete unbacked write-through leaves (no children)."""
    for e in victims:
        n = rs.nodes[e]
        size = node_len(m.pages, rs, e)
        rs = slots.give(m, rs, "d", m.pages.chain(n.start, e))
        if n.host == HOST_RESIDENT:
            rs = set_node(rs, e, n._replace(dev=ABSENT))
            rs = rs._replace(dev_free=rs.dev_free + size)
        else:
            rs = remove_nodes(m, rs, (e,))._replace(dev_free=rs.dev_free + size)
    return rs


# --- local_access: rank-local activity that moves a node's last_access_time ----------


def _touchable(m, rs):
    """Nodes whose local touch can matter: the CP planner's device victims, or under
    victim_order = "lru" the host leaves evict_host chooses from."""
    if m.cfg.cp_planner:
        return device_leaves(m, rs)
    return tuple(e for e in live_nodes(rs) if is_host_leaf(m.pages, rs, e))


def local_access_params(m, s):
    if not (m.cfg.cp_planner or m.cfg.lru):
        return
    for r, rs in enumerate(s.ranks):
        for e in _touchable(m, rs):  # only eviction candidates' order matters
            yield act("local_access", rank=r, node=e)


def local_access_guard(m, s, a):
    rs = s.ranks[a["rank"]]
    e = a["node"]
    live = [x for x in rs.clock if rs.nodes[x] is not None]
    return rs.nodes[e] is not None and e in _touchable(m, rs) and (not live or live[-1] != e)


def local_access(m, s, a):
    """A rank touches a node on its own (a probe, a metrics walk): its local clock moves;
    nothing replicated changes."""
    r, e = a["rank"], a["node"]
    rs = s.ranks[r]
    clock = tuple(x for x in rs.clock if x != e and rs.nodes[x] is not None) + (e,)
    ranks = list(s.ranks)
    ranks[r] = rs._replace(clock=clock)
    return s._replace(ranks=tuple(ranks))
