"""The owner-lane load-back eviction planner of context-parallel HiCache (seed 004,
``_plan_cp_load_back_owner_lane_evictions``).

Under CP the device pool is striped over ``cp_lanes`` owner lanes. When a load-back needs
more room on some lane than that lane has free, every rank plans device victims on its own
replica, greedily, without mutating the tree:

- a candidate is an unlocked device node whose children are all evicted or already planned
  (a leaf "after the plan"); it starts as the evictable leaves;
- its gain is the sum over lanes of min(its pages on the lane, the lane's remaining deficit);
- a candidate with no gain may earn *ancestor-unlock credit*: the gain of its nearest device
  ancestor (walking past evicted ones) that could be a victim, since evicting the subtree
  below is the way to reach it (``_cp_load_back_ancestor_unlock_contribution``);
- the best candidate is the smallest (-gain, -credit, order, end page): a strict total order
  over rank-replicated state (the seed's ``get_priority`` is the replicated LRU tuple, then
  node.id): the order is the replicated LRU position under ``victim_order = "lru"``, else
  the end page, as for every host-side victim order (host_eviction.victim_key);
- a planned victim *admits* its nearest device ancestor as a candidate once that ancestor
  is a leaf after the plan.

It stops when every lane's deficit is covered (the plan) or no candidate helps (no plan:
the load-back is refused here, where the seed logs the fallback and loads nothing).

Lanes: a page's lane is its position on its token path modulo ``cp_lanes`` (CP stripes a
sequence's pages round-robin over the owners). The seed reads the lane from the device slot
(``(loc // page_size - 1) % cp``); the spec has no slot identities, so the lane is a function
of the page. Lane capacity is ``device_pages`` split evenly (the first lanes take the rest).

The variant ``planner-local-tiebreak`` breaks ties by the rank's local access clock instead
(least recently accessed first), a per-rank value.
"""

from __future__ import annotations

from . import slots
from .action import act
from .state import ABSENT, HOST_RESIDENT, child_nodes, is_host_leaf, live_nodes, node_len, node_pages, parent_node
from .tree import remove_nodes, set_node

from .eviction import device_leaves
from .host_eviction import victim_key


# --- lanes -------------------------------------------------------------------------------


def lane_of(m, p: int) -> int:
    return (m.pages.depth(p) - 1) % m.cfg.cp_lanes


def lane_capacity(cfg) -> tuple:
    q, r = divmod(cfg.device_pages, cfg.cp_lanes)
    return tuple(q + (1 if lane < r else 0) for lane in range(cfg.cp_lanes))


def lane_counts(m, pages) -> tuple:
    """Pages per lane of an iterable of page ids."""
    counts = [0] * m.cfg.cp_lanes
    for p in pages:
        counts[lane_of(m, p)] += 1
    return tuple(counts)


def lane_free(m, rs) -> tuple:
    """Free device pages per lane: capacity minus the pages device copies hold there."""
    used = [0] * m.cfg.cp_lanes
    for e in live_nodes(rs):
        if rs.nodes[e].dev != ABSENT:
            for p in node_pages(m.pages, rs, e):
                used[lane_of(m, p)] += 1
    return tuple(c - u for c, u in zip(lane_capacity(m.cfg), used))


def lane_deficits(m, rs, pages) -> tuple:
    """Per lane, the pages a device allocation of ``pages`` lacks (the seed's exact
    deficit; the free-room watermark is not modelled). One lane: the total shortfall."""
    if m.cfg.cp_lanes == 1:
        return (max(0, len(pages) - rs.dev_free),)
    return tuple(max(0, need - free) for need, free in zip(lane_counts(m, pages), lane_free(m, rs)))


def lanes_fit(m, rs, pages) -> bool:
    """Each lane has room for its share of ``pages`` (trivially true with one lane: the
    callers check the pool total)."""
    return m.cfg.cp_lanes == 1 or not any(lane_deficits(m, rs, pages))


# --- the planner -------------------------------------------------------------------------


def plan_victims(m, rs, deficits: tuple, protected) -> tuple:
    """Victims (node ends, in eviction order) that cover every lane's deficit, or ()."""
    cfg = m.cfg
    clock = {e: i for i, e in enumerate(rs.clock)}
    rank = victim_key(m, rs)  # the replicated LRU position (get_priority), else the end page
    counts = {}

    def lanes(e):
        c = counts.get(e)
        if c is None:
            c = counts[e] = lane_counts(m, node_pages(m.pages, rs, e))
        return c

    def base(e):  # _cp_device_node_is_load_back_victim_base, plus what the spec can free
        n = rs.nodes[e]
        if n.dev == ABSENT or n.lock > 0 or e in protected:
            return False
        # A victim frees its device copy without a host write: demoted when backed up,
        # deleted when write-through and childless (never orphaning host-only children).
        return n.host == HOST_RESIDENT or (not cfg.write_back and not child_nodes(m.pages, rs, e))

    def leaf_after(e, planned):
        return base(e) and all(c in planned or rs.nodes[c].dev == ABSENT
                               for c in child_nodes(m.pages, rs, e))

    def gain(e, remaining):
        return sum(min(c, d) for c, d in zip(lanes(e), remaining))

    def unlock_credit(e, remaining, planned):
        a = parent_node(m.pages, rs, e)
        while a >= 0:
            if a in planned:
                return 0
            if rs.nodes[a].dev == ABSENT:
                a = parent_node(m.pages, rs, a)
                continue
            if not base(a):
                return 0
            g = gain(a, remaining)
            if g > 0:
                return g
            a = parent_node(m.pages, rs, a)
        return 0

    remaining = [max(0, d) for d in deficits]
    pool = {e for e in device_leaves(m, rs) if leaf_after(e, ())}
    planned, victims = set(), []
    while any(remaining):
        best = best_key = None
        for e in pool:
            if not leaf_after(e, planned):
                continue
            g = gain(e, remaining)
            u = 0 if g > 0 else unlock_credit(e, remaining, planned)
            if g <= 0 and u <= 0:
                continue
            order = (clock.get(e, -1), e) if cfg.has("planner-local-tiebreak") else (rank(e), e)
            key = (-g, -u) + order
            if best_key is None or key < best_key:
                best, best_key = e, key
        if best is None:
            break
        victims.append(best)
        planned.add(best)
        pool.discard(best)
        remaining = [max(0, d - c) for d, c in zip(remaining, lanes(best))]
        a = parent_node(m.pages, rs, best)  # ancestor admission
        while a >= 0 and a not in planned:
            if leaf_after(a, planned):
                pool.add(a)
                break
            if rs.nodes[a].dev != ABSENT:
                break
            a = parent_node(m.pages, rs, a)
    return () if any(remaining) else tuple(victims)


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
    rs = s.ranks[a["rank"]]
    clock = tuple(x for x in rs.clock if x != e and rs.nodes[x] is not None) + (e,)
    ranks = list(s.ranks)
    ranks[r] = rs._replace(clock=clock)
    return s._replace(ranks=tuple(ranks))
