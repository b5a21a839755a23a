"""The shortest trace on which a spec mutant disagrees with the spec.

Breadth-first search over pairs (spec state, mutant state), both driven by the actions the
spec enables (the mutant stays put when its own guard refuses, as SpecDriver does), up to
the first pair that fails the conformance comparison. The kill matrix reports it next
to the shrinker's result; the reference implementation's variants change the same guard
or effect as the spec's, so its shortest disagreement is this one (the matrix replays it
on the implementation to confirm).
"""

from __future__ import annotations

import time
from collections import deque
from typing import List, Optional

from .compare import check_step


def shortest_disagreement(model, mutant, limit: int = 300_000, time_budget: float = 120.0) -> Optional[List]:
    """Actions of a shortest disagreeing trace, or None (none within the limits)."""
    stop = time.monotonic() + time_budget
    init = (model.init_states()[0], mutant.init_states()[0])
    if check_step(model, -1, init[0], init[1], []):
        return []
    parent = {init: None}
    queue = deque([init])
    while queue and len(parent) < limit and time.monotonic() < stop:
        pair = queue.popleft()
        s, m = pair
        if not model.constraint(s):
            continue
        for a, t in model.successors(s):
            n = mutant.next_state(m, a) or m
            nxt = (t, n)
            if nxt in parent:
                continue
            parent[nxt] = (pair, a)
            if check_step(model, 0, t, n, [], before=m, action=a):
                out = []
                while parent[nxt] is not None:
                    nxt, b = parent[nxt]
                    out.append(b)
                return out[::-1]
            queue.append(nxt)
    return None
