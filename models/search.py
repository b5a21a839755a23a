"""Breadth-first search over packed states, level by level.

Per state the search keeps its packed key (a bijective encoding, see
tiercheck.models.codec), its parent's index and the position of the action that reached
it: measured about 650 bytes a state with the graph kept (models/CHECKER.md), so
10^7 states fit in about 7 GiB. Full states are rebuilt
by decoding keys; traces are rebuilt by re-executing the recorded action positions from
the initial state (tiercheck.models.replay).

States are numbered in discovery order and expanded in that order (FIFO), so every trace
to a state is a shortest one. Expansion is pure (tiercheck.models.expand) and may run in
worker processes; the merge below consumes the records strictly in index order, which
makes the numbering, the counts and every counterexample independent of the number of
workers.
"""

from __future__ import annotations

import gc
import time
from array import array
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from tiercheck.models import budget
from tiercheck.models.expand import Expander


@contextmanager
def paused_gc(on: bool = True):
    """The cyclic garbage collector off for the duration. A search allocates millions of
    tuples, each of which counts towards a collection, and keeps most of them, so full
    collections walk a growing heap (about a tenth of the CPU time at 150,000 states of
    wt-mirror-2r, models/CHECKER.md "Profile"). States, actions and keys are acyclic
    tuples, freed by reference counting alone."""
    was = gc.isenabled()
    if on:
        gc.disable()
    try:
        yield
    finally:
        if on and was:
            gc.enable()


class WorkerDied(Exception):
    """A worker process ended without answering (killed, e.g. by the OOM killer)."""


def _close(records) -> None:
    try:
        if hasattr(records, "close"):
            records.close()
    except (WorkerDied, EOFError, OSError):
        pass


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
        open_names,
        codec,
        expander: Expander,
        need_graph: bool = False,
        max_states: Optional[int] = None,
        time_limit: Optional[float] = None,
        on_progress: Optional[Callable] = None,
        max_hits: int = 1,
        pool=None,
        progress_every: float = 2.0,
        max_memory: Optional[int] = None,
        pause_gc: bool = True,
    ):
        self.m = model
        self.pause_gc = pause_gc
        # Properties still open; the search stops early once every one is violated.
        self.open_names = set(open_names)
        self.init_keys = None  # set by the caller under symmetry (orbit representatives)
        self.codec = codec
        self.expander = expander
        self.need_graph = need_graph
        self.max_states = max_states
        self.time_limit = time_limit
        self.on_progress = on_progress
        self.max_hits = max_hits
        self.pool = pool
        self.progress_every = progress_every
        self.max_memory = max_memory
        # Per state, by index.
        self.keys: list = []
        self.parent = array("i")  # < 2^31 states
        self.via = array("H")  # action position in model.actions(parent)
        self.level_start: List[int] = []
        # key -> index when the graph is kept (edges need the index of known states),
        # else just the set of keys.
        self.index = {} if need_graph else set()
        # The explored graph (non-stuttering steps), kept when liveness/progress need it.
        self.src, self.dst, self.kind = array("i"), array("i"), bytearray()
        self.frees = bytearray()  # per state: some evict step frees a device page
        self.expanded = bytearray()  # per state: 1 if expanded (inside the constraint)
        self.hits: Dict[str, List[Hit]] = {}
        self.stats = SearchStats()

    # ------------------------------------------------------------------------------

    def _add(self, key, parent: int, pos: int) -> int:
        i = len(self.keys)
        self.keys.append(key)
        if self.need_graph:
            self.index[key] = i
        else:
            self.index.add(key)
        self.parent.append(parent)
        self.via.append(pos)
        return i

    def run(self) -> SearchStats:
        with paused_gc(self.pause_gc):
            return self._run()

    def _run(self) -> SearchStats:
        m, st = self.m, self.stats
        names = m.action_names()
        cov = [[0, 0] for _ in names]
        open_props = set(self.open_names)
        self.open_props = open_props
        init = self.init_keys
        if init is None:
            init = [self.codec.encode(s) for s in m.init_states()]
        for k in init:
            if k not in self.index:
                self._add(k, -1, 0)
        t0 = time.monotonic()
        last = t0
        lo = 0
        stopped = False
        need_graph = self.need_graph
        resolve = self.pool.resolve if self.pool is not None else None
        max_states = self.max_states
        memory = budget.Meter(self.max_memory, self.pool)
        i = lo - 1
        records = None
        try:
            while lo < len(self.keys) and not stopped:
                hi = len(self.keys)
                self.level_start.append(lo)
                records = self._records(lo, hi, open_props)
                i = lo - 1
                for i, (viols, expanded, steps, rec_frees) in records:
                    for name, msg in viols:
                        self._hit(name, msg, i)
                    if not expanded:
                        self.frees.append(0)
                        self.expanded.append(0)
                        continue
                    self.expanded.append(1)
                    for pos, name_id, key, stutter, tviols in steps:
                        c = cov[name_id]
                        c[0] += 1
                        st.transitions += 1
                        if stutter:
                            continue
                        c[1] += 1
                        if resolve is not None and type(key) is not int:
                            key = resolve(key)
                        for name, msg in tviols:
                            self._hit(name, msg, i, pos, key)
                        if need_graph:
                            j = self.index.get(key)
                            if j is None:
                                j = self._add(key, i, pos)
                            self.src.append(i)
                            self.dst.append(j)
                            self.kind.append(name_id)
                        elif key not in self.index:
                            self._add(key, i, pos)
                        if max_states and len(self.keys) >= max_states:
                            break  # the bound holds inside one state's successors too
                    self.frees.append(1 if rec_frees else 0)
                    reason = None
                    if not open_props:
                        reason = "every property already violated"
                    elif max_states and len(self.keys) >= max_states:
                        reason = f"--max-states {max_states} reached"
                    now = time.monotonic()
                    if reason is None and self.time_limit and now - t0 > self.time_limit:
                        reason = f"--time-limit {self.time_limit:g}s reached"
                    if reason is None:
                        reason = memory.over(i)
                    if reason is not None:
                        st.complete, st.stop_reason = False, reason
                        stopped = True
                        break
                    if self.on_progress and now - last >= self.progress_every:
                        last = now
                        queue = len(self.keys) - i - 1
                        self.on_progress(len(self.keys), st.transitions, queue, len(self.level_start) - 1, now - t0)
                if stopped:
                    _close(records)  # stop the workers' remaining chunks of this level
                lo = hi if not stopped else i + 1
        except KeyboardInterrupt:
            st.complete, st.stop_reason = False, "interrupted (SIGINT)"
            lo = i + 1
            _close(records)
        except WorkerDied as exc:
            st.complete, st.stop_reason = False, str(exc)
            lo = i + 1
            _close(records)
        # An interrupt may land inside _add: keep only states recorded in full.
        n = min(len(self.keys), len(self.parent), len(self.via))
        del self.keys[n:], self.parent[n:], self.via[n:]
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
