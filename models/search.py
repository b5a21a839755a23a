"""Breadth-first search over packed states, level by level.

Per state the search keeps its packed key (a bijective encoding, see
tiercheck.models.codec), its parent's index and the position of the action that reached
it: about 100 bytes a state, so 10^7 states fit in about 1-2 GiB. Full states are rebuilt
by decoding keys; traces are rebuilt by re-executing the recorded action positions from
the initial state (tiercheck.models.replay).

States are numbered in discovery order and expanded in that order (FIFO), so every trace
to a state is a shortest one. Expansion is pure (tiercheck.models.expand) and may run in
worker processes; the merge below consumes the records strictly in index order, which
makes the numbering, the counts and every counterexample independent of the number of
workers.
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from tiercheck.models.expand import Expander


@dataclass
class Hit:
    """Where a property broke: state ``index``; for a transition property also the step."""

    prop: str
    message: str
    index: int
    pos: Optional[int] = None  # action position of the offending step
    succ_key: object = None  # its successor's key (canonical under symmetry)


@dataclass
class SearchStats:
    distinct: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    complete: bool = True
    stop_reason: str = ""
    coverage: Dict[str, List[int]] = field(default_factory=dict)  # name -> [enabled, taken]


class Search:
    def __init__(
        self,
        model,
        props,
        codec,
        expander: Expander,
        need_graph: bool = False,
        max_states: Optional[int] = None,
        time_limit: Optional[float] = None,
        on_progress: Optional[Callable] = None,
        max_hits: int = 1,
        pool=None,
        progress_every: float = 2.0,
    ):
        self.m = model
        self.props = props
        self.codec = codec
        self.expander = expander
        self.need_graph = need_graph
        self.max_states = max_states
        self.time_limit = time_limit
        self.on_progress = on_progress
        self.max_hits = max_hits
        self.pool = pool
        self.progress_every = progress_every
        # Per state, by index.
        self.keys: list = []
        self.parent = array("l")
        self.via = array("H")  # action position in model.actions(parent)
        self.level_start: List[int] = []
        self.index: dict = {}  # key -> index
        # The explored graph (non-stuttering steps), kept when liveness/progress need it.
        self.src, self.dst, self.kind = array("l"), array("l"), bytearray()
        self.frees = bytearray()  # per state: some evict step frees a device page
        self.expanded = bytearray()  # per state: 1 if expanded (inside the constraint)
        self.stutters: Dict[int, bytes] = {}  # state -> action-name ids of stuttering steps
        self.hits: Dict[str, List[Hit]] = {}
        self.stats = SearchStats()

    # ------------------------------------------------------------------------------

    def _add(self, key, parent: int, pos: int) -> int:
        i = len(self.keys)
        self.keys.append(key)
        self.index[key] = i
        self.parent.append(parent)
        self.via.append(pos)
        return i

    def run(self) -> SearchStats:
        m, st = self.m, self.stats
        names = m.action_names()
        cov = [[0, 0] for _ in names]
        open_props = {p.name for p in self.props}
        self.open_props = open_props
        for s in m.init_states():
            k = self.codec.encode(s)
            if k not in self.index:
                self._add(k, -1, 0)
        t0 = time.monotonic()
        last = t0
        lo = 0
        stopped = False
        need_graph = self.need_graph
        resolve = self.pool.resolve if self.pool is not None else None
        while lo < len(self.keys) and not stopped:
            hi = len(self.keys)
            self.level_start.append(lo)
            records = self._records(lo, hi, open_props)
            i = lo - 1
            for i, rec in records:
                for name, msg in rec.viols:
                    self._hit(name, msg, i)
                if not rec.expanded:
                    self.frees.append(0)
                    self.expanded.append(0)
                    continue
                self.expanded.append(1)
                for stp in rec.steps:
                    c = cov[stp.name]
                    c[0] += 1
                    st.transitions += 1
                    if stp.stutter:
                        if need_graph:
                            self.stutters[i] = self.stutters.get(i, b"") + bytes((stp.name,))
                        continue
                    c[1] += 1
                    key = stp.key
                    if resolve is not None and type(key) is not int:
                        key = resolve(key)
                    for name, msg in stp.viols:
                        self._hit(name, msg, i, stp.pos, key)
                    j = self.index.get(key)
                    if j is None:
                        j = self._add(key, i, stp.pos)
                    if need_graph:
                        self.src.append(i)
                        self.dst.append(j)
                        self.kind.append(stp.name)
                self.frees.append(1 if rec.frees else 0)
                if not open_props:
                    st.complete, st.stop_reason = False, "every property already violated"
                    stopped = True
                    break
                if self.max_states and len(self.keys) >= self.max_states:
                    st.complete, st.stop_reason = False, f"--max-states {self.max_states} reached"
                    stopped = True
                    break
                now = time.monotonic()
                if self.time_limit and now - t0 > self.time_limit:
                    st.complete, st.stop_reason = False, f"--time-limit {self.time_limit:g}s reached"
                    stopped = True
                    break
                if self.on_progress and now - last >= self.progress_every:
                    last = now
                    queue = len(self.keys) - i - 1
                    self.on_progress(len(self.keys), st.transitions, queue, len(self.level_start) - 1, now - t0)
            if stopped and hasattr(records, "close"):
                records.close()  # stop the workers' remaining chunks of this level
            lo = hi if not stopped else i + 1
        st.distinct = len(self.keys)
        self.next_unexpanded = lo
        # BFS discovers states by depth: the last one is among the deepest.
        st.depth = self.depth_of(len(self.keys) - 1) if self.keys else 0
        if lo < len(self.keys):
            st.complete = False
        st.seconds = time.monotonic() - t0
        st.coverage = {n: cov[k] for k, n in enumerate(names) if cov[k][0]}
        return st

    def _records(self, lo, hi, open_props):
        if self.pool is not None:
            return self.pool.expand_level(self.keys, lo, hi, open_props)
        return self._serial(lo, hi, open_props)

    def _serial(self, lo, hi, open_props):
        expand = self.expander.expand
        keys = self.keys
        for i in range(lo, hi):
            yield i, expand(keys[i], open_props)

    def _hit(self, prop, msg, i, pos=None, succ_key=None):
        if prop not in self.open_props:
            return
        lst = self.hits.setdefault(prop, [])
        lst.append(Hit(prop, msg, i, pos, succ_key))
        if len(lst) >= self.max_hits:
            self.open_props.discard(prop)

    # ------------------------------------------------------------------------------

    def depth_of(self, i: int) -> int:
        d = 0
        while self.parent[i] >= 0:
            i = self.parent[i]
            d += 1
        return d

    def path_to(self, i: int) -> List[int]:
        out = []
        while i >= 0:
            out.append(i)
            i = self.parent[i]
        out.reverse()
        return out
