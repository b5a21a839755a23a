"""Random trees stated twice: as a rank state of the spec (spec/cp_planner.py reads it) and
as the device-node tree the implementation's planner (tiercheck.impl.cp) reads.

The mapping is the refinement of the CP binding (impl/hicache/cp_load.py): node id and
replicated access order = the spec's end page (its victim order); a page's owner lane is
its path position mod cp (the spec's ``lane_of``), handed to the planner as the logical
page ``1 + lane + cp * page``; nodes the spec may not choose (locked, or not freeable
without a host write) are pinned with lock_ref 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import torch
from hypothesis import strategies as st

from tiercheck.impl.cp import CpNode
from tiercheck.spec.config import Config
from tiercheck.spec.model import Model
from tiercheck.spec.state import ABSENT, HOST_RESIDENT, RESIDENT, Node, empty_rank


@dataclass(frozen=True)
class Shape:
    cp: int
    write_back: bool
    parents: Tuple[int, ...]  # per node: parent index + 1 (0: the root)
    lengths: Tuple[int, ...]
    evicted: Tuple[bool, ...]
    locked: Tuple[bool, ...]
    backed: Tuple[bool, ...]
    deficits: Tuple[int, ...]


@st.composite
def shapes(draw, max_nodes: int = 8, max_cp: int = 4) -> Shape:
    cp = draw(st.integers(1, max_cp))
    n = draw(st.integers(1, max_nodes))
    parents, evicted = [], []
    for i in range(n):
        p = draw(st.integers(0, i))
        parents.append(p)
        # device residency is prefix-closed
        evicted.append((p > 0 and evicted[p - 1]) or draw(st.integers(0, 3)) == 0)
    return Shape(
        cp=cp, write_back=draw(st.booleans()), parents=tuple(parents),
        lengths=tuple(draw(st.integers(1, 3)) for _ in range(n)), evicted=tuple(evicted),
        locked=tuple(draw(st.integers(0, 4)) == 0 for _ in range(n)),
        backed=tuple(e or draw(st.booleans()) for e in evicted),  # evicted nodes are host copies
        deficits=tuple(draw(st.integers(0, 4)) for _ in range(cp)),
    )


def spec_state(shape: Shape):
    """(model, rank state, per node: its end page)."""
    paths, token = [], 0
    for i, p in enumerate(shape.parents):
        above = paths[p - 1] if p else ()
        own = tuple(range(token, token + shape.lengths[i]))
        token += shape.lengths[i]
        paths.append(above + own)
    cfg = Config(requests=tuple(paths), cp_planner=True, cp_lanes=shape.cp,
                 device_pages=max(shape.cp, token), host_pages=token,
                 policy="write_back" if shape.write_back else "write_through")
    m = Model(cfg)
    rs = empty_rank(m.pages.count, cfg.device_pages, cfg.host_pages)
    owner, nodes, ends = list(rs.owner), list(rs.nodes), []
    for i, path in enumerate(paths):
        own = [m.pages.index[path[:k]] for k in range(len(path) - shape.lengths[i] + 1, len(path) + 1)]
        end = own[-1]
        ends.append(end)
        for q in own:
            owner[q] = end
        nodes[end] = Node(start=own[0], dev=ABSENT if shape.evicted[i] else RESIDENT,
                          host=HOST_RESIDENT if shape.backed[i] else 0, lock=int(shape.locked[i]))
    return m, rs._replace(owner=tuple(owner), nodes=tuple(nodes)), tuple(ends)


def impl_tree(shape: Shape, m, rs, ends) -> CpNode:
    """The same tree as the implementation's planner reads it (cp_load's view)."""
    from tiercheck.spec.cp_planner import lane_of
    from tiercheck.spec.state import child_nodes, node_pages

    root = CpNode(-1)
    views = []
    for i, e in enumerate(ends):
        n = rs.nodes[e]
        value = None
        if n.dev != ABSENT:
            value = torch.tensor([1 + lane_of(m, q) + shape.cp * q for q in node_pages(m.pages, rs, e)],
                                 dtype=torch.int64)
        freeable = n.host == HOST_RESIDENT or (not shape.write_back and not child_nodes(m.pages, rs, e))
        view = CpNode(e, value, lock_ref=int(n.lock > 0 or not freeable), backuped=n.host == HOST_RESIDENT,
                      access_seq=e)
        (views[shape.parents[i] - 1] if shape.parents[i] else root).add_child(view)
        views.append(view)
    return root
