"""The explored state graph as the progress and liveness checks read it.

Those checks (tiercheck.models.progress, tiercheck.models.liveness) need the edges, the
states' depths and, per state, a few answers that come from the state itself: which
obligations it opens, which it meets, which fair steps it has. A graph answers them in
batches, so the states may live in this process (``SearchGraph``, the one-process
search) or on the partitions of a cluster (tiercheck.models.cluster ``ClusterGraph``):
the per-state work below is the same function in both places.

A graph has: ``n`` states; the edges ``src``, ``dst`` (int64) and ``kind`` (action name
ids, uint8), one per non-stuttering step, ordered by source state then action position;
``depth`` and ``expanded`` per state; and the methods ``obligations``, ``met``,
``fair_steps``, ``rebuild`` and ``step_to``.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Tuple

import numpy as np

from tiercheck.models import graph_algo, replay
from tiercheck.models.liveness import fair_unit
from tiercheck.spec.model import ACTION_SPECS

# --- per-state work (one copy, run where the states are) ---------------------------------


def opened_by(m, prop, states: Iterable) -> List[Tuple[int, tuple]]:
    """(index, obligation keys) of the states in ``states`` ((index, state) pairs) that
    open an obligation of ``prop`` (a progress or a liveness property), in their order."""
    fn = prop.fn
    opens = fn.obligations if prop.kind == "progress" else fn.opens
    out = []
    for i, s in states:
        keys = tuple(opens(m, s))
        if keys:
            out.append((i, keys))
    return out


def met_by(m, prop, keys, states: Iterable) -> Dict[object, List[int]]:
    """Per obligation key, the indices of the states in ``states`` ((index, state, frees)
    triples) that meet it."""
    met = prop.fn.met
    out: Dict[object, List[int]] = {key: [] for key in keys}
    if not out:
        return out
    for i, s, frees in states:
        for key, lst in out.items():
            if met(m, s, key, frees):
                lst.append(i)
    return out


def fair_steps_of(m, s) -> list:
    """(action position, fair unit, successor) of each step of ``s`` that changes it and
    belongs to a weak-fairness unit (tiercheck.models.liveness.fair_unit), in action
    order."""
    out = []
    for pos, a in enumerate(m.actions(s)):
        u = fair_unit(a)
        if u is None:
            continue
        t = ACTION_SPECS[a.name].effect(m, s, a)
        if t != s:
            out.append((pos, u, t))
    return out


def by_state(pairs) -> Dict[object, List[int]]:
    """{key: [index, ...]} from (index, keys) pairs sorted by index: keys in the order
    the states first open them, as the one-process checks number obligations."""
    out: Dict[object, List[int]] = {}
    for i, keys in pairs:
        for key in keys:
            out.setdefault(key, []).append(i)
    return out


def masks(n: int, met: Dict[object, List[int]]) -> Dict[object, np.ndarray]:
    out = {}
    for key, idx in met.items():
        arr = np.zeros(n, dtype=bool)
        arr[np.asarray(idx, dtype=np.int64)] = True
        out[key] = arr
    return out


def depths(level_start: List[int], n: int) -> np.ndarray:
    """Per state, its breadth-first level (states are numbered level by level)."""
    starts = np.asarray(list(level_start) + [n], dtype=np.int64)
    return np.searchsorted(starts, np.arange(n), side="right") - 1


# --- the one-process search's graph -------------------------------------------------------


class SearchGraph:
    """A finished one-process search (tiercheck.models.search, graph kept) as a graph."""

    def __init__(self, m, search):
        self.m, self.search = m, search
        self.n = len(search.keys)
        self.src, self.dst, self.kind = graph_algo.edges(search)
        self.depth = depths(search.level_start, self.n)
        self.expanded = np.frombuffer(bytes(search.expanded), dtype=np.uint8).astype(bool)

    def _states(self, indices=None):
        decode, keys = self.search.codec.decode, self.search.keys
        for i in range(self.n) if indices is None else indices:
            yield i, decode(keys[i])

    def obligations(self, prop) -> Dict[object, List[int]]:
        return by_state(opened_by(self.m, prop, self._states()))

    def met(self, prop, keys) -> Dict[object, np.ndarray]:
        frees = self.search.frees
        return masks(self.n, met_by(self.m, prop, keys, ((i, s, frees[i]) for i, s in self._states())))

    def fair_steps(self, indices) -> Dict[int, list]:
        """{state: [(fair unit, successor index), ...]} for ``indices``."""
        index, encode = self.search.index, self.search.codec.encode
        return {
            i: [(u, index.get(encode(t))) for _pos, u, t in fair_steps_of(self.m, s)]
            for i, s in self._states(indices)
        }

    def rebuild(self, i: int):
        return replay.rebuild(self.m, self.search, i)

    def step_to(self, s, i: int, j: int):
        """The first action of state ``i`` (concrete ``s``) whose successor is state ``j``."""
        target, encode = self.search.keys[j], self.search.codec.encode
        for a in self.m.actions(s):
            t = ACTION_SPECS[a.name].effect(self.m, s, a)
            if t != s and encode(t) == target:
                return a, t
        raise RuntimeError("liveness: no step between consecutive lasso states")
