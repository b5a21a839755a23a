"""Exhaustive breadth-first model checking of a spec Model.

Breadth-first order makes every counterexample a shortest one. Invariants are evaluated on
each distinct state, transition properties on each step, progress properties on the whole
explored graph once exploration is complete (they need every successor).
"""

from __future__ import annotations

import time
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional



@dataclass
class Violation:
    prop: str
    message: str
    path: List[int]  # state indices from an initial state to the last state of the trace
    actions: list  # actions between consecutive states of ``path``
    final_action: object = None  # the offending step of a transition property
    final_state: object = None


@dataclass
class Result:
    distinct: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    complete: bool = True
    stop_reason: str = ""
    verdicts: Dict[str, str] = field(default_factory=dict)  # name -> holds|violated|unknown
    violations: Dict[str, Violation] = field(default_factory=dict)
    coverage: Dict[str, List[int]] = field(default_factory=dict)  # action -> [enabled, taken]


class Checker:
    def __init__(
        self,
        model,
        properties: List[str],
        max_states: Optional[int] = None,
        time_limit: Optional[float] = None,
        on_progress: Optional[Callable] = None,
    ):
        self.model = model
        self.props = [model.property(n) for n in properties]
        self.max_states = max_states
        self.time_limit = time_limit
        self.on_progress = on_progress
        self.states: list = []
        self.parent = array("q")
        self.via: list = []
        self.depth_of = array("i")

    # -- exploration ------------------------------------------------------------------

    def run(self) -> Result:
        m = self.model
        res = Result()
        invariants = [p for p in self.props if p.kind == "invariant"]
        transitions = [p for p in self.props if p.kind == "transition"]
        progress = [p for p in self.props if p.kind == "progress"]
        need_graph = bool(progress)
        index: Dict = {}
        queue: deque = deque()
        for s in m.init_states():
            if s not in index:
                index[s] = self._add(s, -1, None, 0)
                queue.append(index[s])
        # The explored graph, kept only when progress properties need it.
        self.src, self.dst, self.kind = array("i"), array("i"), bytearray()
        self.frees = bytearray()  # per state: some evict() successor frees a device page
        action_ids = {name: k for k, name in enumerate(m.action_names())}
        open_props = {p.name for p in self.props}
        t0 = time.monotonic()
        last_report = t0
        while queue:
            i = queue.popleft()
            s = self.states[i]
            for p in invariants:
                if p.name in open_props:
                    msg = p.fn(m, s)
                    if msg:
                        res.violations[p.name] = self._violation(p.name, msg, i)
                        open_props.discard(p.name)
            frees = 0
            if not m.constraint(s):
                if need_graph:
                    self.frees.append(0)
                continue
            for a, t in m.successors(s):
                cov = res.coverage.setdefault(a.name, [0, 0])
                cov[0] += 1
                res.transitions += 1
                if t == s:
                    continue  # stuttering step
                cov[1] += 1
                for p in transitions:
                    if p.name in open_props:
                        msg = p.fn(m, s, a, t)
                        if msg:
                            res.violations[p.name] = self._violation(p.name, msg, i, a, t)
                            open_props.discard(p.name)
                j = index.get(t)
                if j is None:
                    j = index[t] = self._add(t, i, a, self.depth_of[i] + 1)
                    queue.append(j)
                if need_graph:
                    if a.name == "evict" and t.ranks[0].dev_free > s.ranks[0].dev_free:
                        frees = 1
                    self.src.append(i)
                    self.dst.append(j)
                    self.kind.append(action_ids[a.name])
            if need_graph:
                self.frees.append(frees)
            if not open_props:
                res.stop_reason = "every property already violated"
                res.complete = False
                break
            if self.max_states and len(self.states) >= self.max_states:
                res.complete, res.stop_reason = False, f"--max-states {self.max_states} reached"
                break
            now = time.monotonic()
            if self.time_limit and now - t0 > self.time_limit:
                res.complete, res.stop_reason = False, f"--time-limit {self.time_limit:g}s reached"
                break
            if self.on_progress and now - last_report >= 2.0:
                last_report = now
                self.on_progress(len(self.states), res.transitions, len(queue), self.depth_of[i], now - t0)
        res.distinct = len(self.states)
        res.depth = max(self.depth_of) if len(self.depth_of) else 0
        if queue:
            res.complete = False
        if res.complete:
            for p in progress:
                if p.name in open_props:
                    v = self._progress(p)
                    if v:
                        res.violations[p.name] = v
        for p in self.props:
            if p.name in res.violations:
                res.verdicts[p.name] = "violated"
            elif p.kind == "progress" and not res.complete:
                res.verdicts[p.name] = "unknown"
            else:
                res.verdicts[p.name] = "holds" if res.complete else "holds so far"
        res.seconds = time.monotonic() - t0
        return res

    def _add(self, s, parent: int, action, depth: int) -> int:
        self.states.append(s)
        self.parent.append(parent)
        self.via.append(action)
        self.depth_of.append(depth)
        return len(self.states) - 1

    # -- counterexamples ----------------------------------------------------------------

    def path_to(self, i: int):
        path, actions = [], []
        while i >= 0:
            path.append(i)
            if self.via[i] is not None:
                actions.append(self.via[i])
            i = self.parent[i]
        path.reverse()
        actions.reverse()
        return path, actions

    def _violation(self, prop, msg, i, action=None, t=None) -> Violation:
        path, actions = self.path_to(i)
        return Violation(prop, msg, path, actions, action, t)

    # -- progress on the graph ----------------------------------------------------------

    def _progress(self, prop) -> Optional[Violation]:
        """From every state with an open obligation, a path of allowed steps must reach a
        state that meets it; report the shallowest state from which none does."""
        m, spec = self.model, prop.fn
        n = len(self.states)
        allowed = bytes(
            1 if spec.step(m.action_kind(name), name) else 0 for name in m.action_names()
        )
        # Reverse adjacency (CSR) of the allowed edges.
        start = array("i", [0]) * (n + 1)
        for j, k in zip(self.dst, self.kind):
            if allowed[k]:
                start[j + 1] += 1
        for v in range(n):
            start[v + 1] += start[v]
        rev = array("i", [0]) * start[n]
        fill = array("i", start)
        for i, j, k in zip(self.src, self.dst, self.kind):
            if allowed[k]:
                rev[fill[j]] = i
                fill[j] += 1
        pending: Dict = {}
        for i, s in enumerate(self.states):
            for key in spec.obligations(m, s):
                pending.setdefault(key, []).append(i)
        best = None
        for key, holders in pending.items():
            good = bytearray(n)
            stack = [i for i, s in enumerate(self.states) if spec.met(m, s, key, self.frees[i])]
            for i in stack:
                good[i] = 1
            while stack:
                j = stack.pop()
                for r in range(start[j], start[j + 1]):
                    i = rev[r]
                    if not good[i]:
                        good[i] = 1
                        stack.append(i)
            for i in holders:
                if not good[i] and (best is None or self.depth_of[i] < self.depth_of[best[0]]):
                    best = (i, key)
        if best is None:
            return None
        i, key = best
        name = m.name(key) if isinstance(key, int) else key
        return self._violation(prop.name, spec.describe.format(key=name), i)
