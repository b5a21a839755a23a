"""The explored graph of a cluster run, as progress and liveness read it
(tiercheck.models.state_graph): the edges gathered on the driver, the states left on
their partitions (tiercheck.models.partition), which answer per-state questions in
batches."""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from tiercheck.models import replay, state_graph
from tiercheck.models.partition import state_of
from tiercheck.spec.state import State


def each(parts, method: str, *args) -> list:
    """Every partition's answer to ``method(*args)``."""
    return parts.call(method, [args] * len(parts.parts))


def by_owner(parts, owner, method: str, indices) -> dict:
    """The answers ({index: ...}) of the partitions holding states ``indices``."""
    idx = np.asarray(indices, dtype=np.int64)
    who = np.frombuffer(bytes(owner), dtype=np.uint8)[idx] if len(idx) else np.zeros(0, np.uint8)
    out: dict = {}
    for d in parts.call(method, [(idx[who == q].tolist(),) for q in range(len(parts.parts))]):
        out.update(d)
    return out


def states_of(parts, owner, indices) -> Dict[int, State]:
    return {i: state_of(w) for i, w in by_owner(parts, owner, "states", indices).items()}


class ClusterGraph:
    """The explored graph of a cluster run, as progress and liveness read it
    (tiercheck.models.state_graph): the edges gathered on the driver, the states left on
    their partitions, which answer the per-state questions in batches."""

    def __init__(self, m, parts, tr, level_start, owner: bytearray, unexpanded):
        self.m, self.parts, self.tr = m, parts, tr
        self.n = n = len(tr.parent)
        self.owner = owner
        self.depth = state_graph.depths(level_start, n)
        self.expanded = np.ones(n, dtype=bool)
        self.expanded[np.asarray(unexpanded, dtype=np.int64)] = False
        shares = each(parts, "edges")
        src, dst, pos, kind = (
            np.concatenate([np.frombuffer(e[f], dtype=t) for e in shares])
            for f, t in enumerate((np.int32, np.int32, np.uint16, np.uint8))
        )
        # The one-process search's edge order: by source state, then action position.
        order = np.lexsort((pos, src))
        self.src, self.dst = src[order].astype(np.int64), dst[order].astype(np.int64)
        self.pos, self.kind = pos[order], kind[order]
        self.first = np.searchsorted(self.src, np.arange(n + 1))  # edges of state i

    def obligations(self, prop):
        return state_graph.by_state(sorted(pair for lst in each(self.parts, "obligations", prop.name) for pair in lst))

    def met(self, prop, keys):
        merged: Dict[object, List[int]] = {key: [] for key in keys}
        for d in each(self.parts, "met", prop.name, list(keys)):
            for key, idx in d.items():
                merged[key].extend(idx)
        return state_graph.masks(self.n, merged)

    def _targets(self, i: int) -> Dict[int, int]:
        a, b = self.first[i], self.first[i + 1]
        return dict(zip(self.pos[a:b].tolist(), self.dst[a:b].tolist()))

    def fair_steps(self, indices):
        out = {}
        for i, steps in by_owner(self.parts, self.owner, "fair_steps", indices).items():
            to = self._targets(i)
            out[i] = [(u, to.get(pos)) for pos, u in steps]
        return out

    def rebuild(self, i: int):
        if i not in self.tr.keys:
            self.tr.keys.update(states_of(self.parts, self.owner, [i]))
        return replay.rebuild(self.m, self.tr, i)

    def step_to(self, s, i: int, j: int):
        """The first action of state ``i`` (concrete ``s``) that steps to state ``j``: the
        lowest action position among the edges i -> j."""
        pos = min(p for p, d in self._targets(i).items() if d == j)
        a = self.m.actions(s)[pos]
        return a, self.m.next_state(s, a)
