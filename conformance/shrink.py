"""Spec-guided shrinking of a failing action sequence.

Hypothesis shrinks by editing the byte stream behind the draws; for long stateful traces
whose later choices depend on earlier ones that stalls (minutes, "making very slow
progress"). We know more than Hypothesis does: the spec tells which sequences are valid
and which state each prefix reaches. So a failing trace is shrunk by
  1. cutting loops: a segment that leaves the spec state where it started;
  2. shortcuts: replacing a prefix by the shortest spec path to the state it reaches;
  3. delta debugging: deleting chunks of steps (halves, quarters, ... single steps) and
     every step one rank takes on its own (its DMA and storage completions), dropping
     the later steps the spec then no longer enables;
  4. the spec's shortest route to a step like one of the trace's: states in breadth-first
     order where one of its actions is enabled with the same outcome (the same fields
     change), each tried as shortest path + that step, shortest first (a bug that shows
     at a drain round may show sooner at the split that caused it);
re-running the implementation (a fresh driver) on every candidate. A candidate is kept
only if the implementation still disagrees with the spec in the same way (the caller's
``still_fails`` decides; tiercheck.conformance.machine compares the kind of mismatch).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, List, Optional

from tiercheck.spec.action import LOCAL

from .run_coverage import outcome


class ShortestPaths:
    """Incremental breadth-first search from the initial state, shared by all queries."""

    def __init__(self, model, limit: int = 200_000):
        self.model = model
        self.limit = limit
        init = model.init_states()[0]
        self.parent = {init: None}
        self.order = [init]  # states in breadth-first order, as discovered
        self.queue = deque([init])

    def _expand(self) -> bool:
        if not self.queue or len(self.parent) >= self.limit:
            return False
        s = self.queue.popleft()
        for a, t in self.model.successors(s):
            if t not in self.parent:
                self.parent[t] = (s, a)
                self.order.append(t)
                self.queue.append(t)
        return True

    def path_to(self, target) -> Optional[list]:
        while target not in self.parent and self._expand():
            pass
        if target not in self.parent:
            return None
        return self._unwind(target)

    def routes(self, targets, max_len: int):
        """(path, step) pairs, shortest first: ``step``, an action whose (name, outcome)
        is in ``targets``, taken at the end of the spec's shortest ``path`` to a state."""
        i = 0
        while True:
            while i >= len(self.order):
                if not self._expand():
                    return
            s = self.order[i]
            i += 1
            path = self._unwind(s)
            if len(path) + 1 >= max_len:
                return
            for a in self.model.actions(s):
                if any(name == a.name for name, _o in targets):
                    if (a.name, outcome(self.model, s, self.model.next_state(s, a))) in targets:
                        yield path, a

    def _unwind(self, target) -> list:
        out = []
        while self.parent[target] is not None:
            target, a = self.parent[target]
            out.append(a)
        out.reverse()
        return out


def spec_states(model, actions) -> Optional[list]:
    """States along ``actions``, or None if the spec does not allow the sequence."""
    s = model.init_states()[0]
    out = [s]
    for a in actions:
        s = model.next_state(s, a)
        if s is None:
            return None
        out.append(s)
    return out


def repaired(model, actions) -> list:
    """``actions`` without the steps the spec does not enable where they now fall."""
    s = model.init_states()[0]
    out = []
    for a in actions:
        t = model.next_state(s, a)
        if t is not None:
            out.append(a)
            s = t
    return out


def shrink(model, still_fails: Callable[[list], bool], actions: list, time_budget: float = 60.0) -> List:
    """The shortest failing sequence found within the budget (``actions`` fails)."""
    deadline = time.monotonic() + time_budget
    paths = ShortestPaths(model)
    best = list(actions)
    tried = set()

    def attempt(cand) -> bool:
        nonlocal best
        cand = repaired(model, cand)
        key = tuple(cand)
        if len(cand) >= len(best) or key in tried or time.monotonic() > deadline:
            return False
        tried.add(key)
        if not still_fails(cand):
            return False
        best = list(cand)
        return True

    def local_to(a):
        return model.kind(a) == LOCAL and a.get("rank") is not None

    def one_pass() -> bool:
        # 0. steps after the failure: dropped first, so that a budget cut short still
        #    leaves a trace that ends where the implementation departs
        while len(best) > 1 and attempt(best[:-1]):
            pass
        states = spec_states(model, best)
        # 1. loops
        seen = {}
        for i, s in enumerate(states):
            if s in seen and attempt(best[: seen[s]] + best[i:]):
                return True
            seen.setdefault(s, i)
        # 2. shortcuts, longest prefix first (the state just before the failure)
        for k in range(len(best), 0, -1):
            p = paths.path_to(states[k])
            if p is not None and len(p) < k and attempt(p + best[k:]):
                return True
        # 3. delta debugging: chunks, halving down to single steps (latest first), then
        #    each rank's own steps before the last one
        n = len(best)
        size = n // 2
        while size >= 1:
            for start in range(n - size, -1, -size if size > 1 else -1):
                if attempt(best[:start] + best[start + size :]):
                    return True
            size //= 2
        for r in sorted({a.get("rank") for a in best if local_to(a)}):
            if attempt([a for a in best[:-1] if not (local_to(a) and a.get("rank") == r)] + best[-1:]):
                return True
        return False

    while time.monotonic() < deadline and one_pass():
        pass
    # 4. the spec's shortest route to a step like one of the trace's (the same action with
    #    the same outcome), then that step: the bug may show at any of them
    if best and time.monotonic() < deadline:
        states = spec_states(model, best)
        targets = {(a.name, outcome(model, states[i], states[i + 1])) for i, a in enumerate(best)}
        for path, step in paths.routes(targets, len(best)):
            if time.monotonic() > deadline:
                break
            if attempt(path + [step]):
                while time.monotonic() < deadline and one_pass():
                    pass
                break
    return best
