"""Units for survivors of the seed-12 mutation sample (session 14, kU2).

- a CP load-back (one lane) short of a single page with two device pages free: the
  planner must be asked for the shortfall (chain minus free pages; a shortfall computed
  any other way that comes out 0 here, as ``3 >> 2`` does, skips the planner and the
  load is refused);
- the twin of lru-evicts-locked-parent with the pushed parent still loading (its H->D
  copy in flight): the bug pops a locked parent, but only a device-resident one; a
  loading node is no device leaf, so it keeps its device slots.
"""

from __future__ import annotations

from tiercheck.spec.load_path import nodes_to_load
from tiercheck.spec.state import LOADING, RESIDENT, child_nodes, live_nodes, node_len

from .situations import Situation


def _load_short_of_one_of_three(m, s, a, t) -> bool:
    """A load_back taken with 0 < free < chain pages < 2 ** free (three pages, two free):
    the chain lacks one page, so the planner must make that room."""
    if a.name != "load_back" or t == s:
        return False
    rs = s.ranks[0]
    need = sum(node_len(m.pages, rs, x) for x in nodes_to_load(m, rs, a["node"]))
    return 0 < rs.dev_free < need < 1 << rs.dev_free


def _evicts_child_of_loading(m, s, a, t) -> bool:
    """An insert whose eviction takes a device leaf hanging below a node whose load is
    still in flight (the leaf was inserted below it meanwhile)."""
    if a.name != "insert":
        return False
    rs, rt = s.ranks[0], t.ranks[0]

    def gone(c) -> bool:
        return c >= len(rt.nodes) or rt.nodes[c] is None or rt.nodes[c].dev != RESIDENT

    return any(rs.nodes[e].dev == LOADING and any(rs.nodes[c].dev == RESIDENT and gone(c)
                                                   for c in child_nodes(m.pages, rs, e))
               for e in live_nodes(rs))


SITUATIONS = (
    # cp_lanes 1 (the pool is one lane): (1, 2, 3) is backed up and evicted, (4,) and (5,)
    # leave two device pages free; loading (1, 2, 3) back lacks one, which the planner
    # frees by demoting (4,) (backed up; (5,) is still being written, so locked). No
    # load_back_evicts: nothing else makes room.
    Situation("a CP load-back short of one page of three, two pages free", "cp-planner-2r", (),
              _load_short_of_one_of_three,
              overrides=(("requests", ((1, 2, 3), (4,), (5,))), ("device_pages", 4), ("host_pages", 6))),
)

# With the bug on both sides (the mutation suite's twin replay): (1,) is evicted and
# loaded back, (1, 2) is inserted below it while the copy is in flight, and (3, 4) evicts
# 1/2 for room; the bug pushes (1,) and pops it whatever its lock, but (1,) is loading,
# not resident: it stays, and the insert, one page short, only evicts.
TWIN_SITUATIONS = (
    Situation("an insert evicting the child of a node still loading", "variants/lru-evicts-locked-parent", (),
              _evicts_child_of_loading),
)
