"""Random CP device trees for the planner tests: a plain description, a builder, a strategy.

A description is pure data so the same replicated state can be built twice (two "ranks")
with different per-rank clocks, and a failing case prints as something replayable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
from hypothesis import strategies as st

from tiercheck.impl.cp import CpNode, default_device


@dataclass(frozen=True)
class NodeSpec:
    parent: int  # index into the node list + 1; 0 is the root
    pages: Tuple[int, ...]  # logical page ids (0 = the reserved padding page)
    tail: int  # tokens of the last page present (partial page when < page_size)
    evicted: bool
    locked: bool
    backuped: bool
    access_seq: int


@dataclass(frozen=True)
class TreeSpec:
    cp: int
    page_size: int
    nodes: Tuple[NodeSpec, ...]
    deficits: Tuple[int, ...]


def token_locs(pages: Sequence[int], page_size: int, tail: int, device) -> torch.Tensor:
    locs = [p * page_size + off for p in pages for off in range(page_size)]
    if pages:
        locs = locs[: len(locs) - (page_size - tail)]
    return torch.tensor(locs, dtype=torch.int64, device=device)


def build(spec: TreeSpec, clocks: Optional[Sequence[float]] = None, device=None):
    """Build the tree; ``clocks`` gives each node's per-rank last_access_time."""
    device = device or default_device()
    root = CpNode(0, torch.empty(0, dtype=torch.int64, device=device), lock_ref=1)
    nodes: List[CpNode] = [root]
    for i, ns in enumerate(spec.nodes):
        value = None if ns.evicted else token_locs(ns.pages, spec.page_size, ns.tail, device)
        node = CpNode(i + 1, value, lock_ref=int(ns.locked), backuped=ns.backuped,
                      access_seq=ns.access_seq,
                      last_access_time=0.0 if clocks is None else clocks[i])
        nodes[ns.parent].add_child(node)
        nodes.append(node)
    return root, nodes


@st.composite
def tree_specs(draw, max_nodes: int = 14, max_cp: int = 8) -> TreeSpec:
    cp = draw(st.integers(1, max_cp))
    page_size = draw(st.integers(1, 4))
    count = draw(st.integers(1, max_nodes))
    nodes: List[NodeSpec] = []
    for i in range(count):
        parent = draw(st.integers(0, i))
        # Device residency is prefix-closed: below an evicted node everything is evicted.
        parent_evicted = parent > 0 and nodes[parent - 1].evicted
        evicted = parent_evicted or draw(st.integers(0, 3)) == 0
        if draw(st.booleans()):
            pages = tuple(draw(st.lists(st.integers(0, 3 * cp + 2), min_size=0, max_size=6)))
        else:  # all pages on one owner lane: makes zero-gain leaves under useful ancestors
            lane = draw(st.integers(0, cp - 1))
            pages = tuple(lane + 1 + cp * k for k in draw(st.lists(st.integers(0, 3), max_size=4)))
        nodes.append(NodeSpec(
            parent=parent, pages=pages,
            tail=draw(st.integers(1, page_size)),
            evicted=evicted,
            locked=draw(st.integers(0, 5)) == 0,
            backuped=draw(st.booleans()),
            access_seq=draw(st.integers(0, 6)),  # ties happen: the id must decide
        ))
    deficits = tuple(draw(st.lists(st.integers(-2, 9), min_size=cp, max_size=cp)))
    return TreeSpec(cp, page_size, tuple(nodes), deficits)
