"""Spec-guided shrinking of a failing action sequence.

Hypothesis shrinks by editing the byte stream behind the draws; for long stateful traces
whose later choices depend on earlier ones that stalls (minutes, "making very slow
progress"). We know more than Hypothesis does: the spec tells which sequences are valid
and which state each prefix reaches. So a failing trace is shrunk by
  1. cutting loops: a segment that leaves the spec state where it started;
  2. shortcuts: replacing a prefix by the shortest spec path to the state it reaches;
  3. deleting single steps, keeping only sequences the spec allows;
re-running the implementation (a fresh driver) on every candidate. A candidate is kept
only if the implementation still disagrees with the spec.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, List, Optional


class ShortestPaths:
    """Incremental breadth-first search from the initial state, shared by all queries."""

    def __init__(self, model, limit: int = 200_000):
        self.model = model
        self.limit = limit
        init = model.init_states()[0]
        self.parent = {init: None}
        self.queue = deque([init])

    def path_to(self, target) -> Optional[list]:
        while target not in self.parent and self.queue and len(self.parent) < self.limit:
            s = self.queue.popleft()
            for a, t in self.model.successors(s):
                if t not in self.parent:
                    self.parent[t] = (s, a)
                    self.queue.append(t)
        if target not in self.parent:
            return None
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


def shrink(model, still_fails: Callable[[list], bool], actions: list, time_budget: float = 60.0) -> List:
    """The shortest failing sequence found within the budget (``actions`` fails)."""
    deadline = time.monotonic() + time_budget
    paths = ShortestPaths(model)
    best = list(actions)
    tried = set()

    def attempt(cand) -> bool:
        nonlocal best
        key = tuple(cand)
        if len(cand) >= len(best) or key in tried or time.monotonic() > deadline:
            return False
        tried.add(key)
        if spec_states(model, cand) is None or not still_fails(cand):
            return False
        best = list(cand)
        return True

    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        states = spec_states(model, best)
        # 1. loops
        seen = {}
        for i, s in enumerate(states):
            if s in seen and attempt(best[: seen[s]] + best[i:]):
                improved = True
                break
            seen.setdefault(s, i)
        if improved:
            continue
        # 2. shortcuts, longest prefix first (the state just before the failure)
        for k in range(len(best), 0, -1):
            p = paths.path_to(states[k])
            if p is not None and len(p) < k and attempt(p + best[k:]):
                improved = True
                break
        if improved:
            continue
        # 3. single deletions, latest first
        for i in range(len(best) - 1, -1, -1):
            if attempt(best[:i] + best[i + 1 :]):
                improved = True
                break
    return best
