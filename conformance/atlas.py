"""The spec's own map of a model, for steering conformance examples: a breadth-first
exploration (bounded) that records, for every (action, outcome) pair it meets, the
shortest action sequence from the initial state that takes it.

An example of the ``coverage`` strategy may start by walking one of these paths to a pair
the run has not taken yet (a two-rank prefetch read needs 12 or more exactly ordered
steps, which random choice almost never produces), then continues with random choices.
"""

from __future__ import annotations

from collections import deque
from typing import Dict, List, Tuple

from .run_coverage import outcome

_CACHE: Dict[object, "Atlas"] = {}


class Atlas:
    def __init__(self, model, limit: int = 2000):
        init = model.init_states()[0]
        parent = {init: None}
        queue = deque([init])
        self.first: Dict[Tuple[str, frozenset], tuple] = {}  # pair -> (state, action)
        while queue:
            s = queue.popleft()
            if not model.constraint(s):
                continue
            for a, t in model.successors(s):
                self.first.setdefault((a.name, outcome(model, s, t)), (s, a))
                if t not in parent and len(parent) < limit:
                    parent[t] = (s, a)
                    queue.append(t)
        self._parent = parent
        self.states = len(parent)
        self.pairs = sorted(self.first, key=lambda p: (p[0], sorted(p[1])))

    def path(self, pair) -> List:
        """The shortest known action sequence that ends by taking ``pair``."""
        s, a = self.first[pair]
        out = [a]
        while self._parent[s] is not None:
            s, b = self._parent[s]
            out.append(b)
        out.reverse()
        return out


def atlas_for(model) -> Atlas:
    key = model.cfg
    if key not in _CACHE:
        _CACHE[key] = Atlas(model)
    return _CACHE[key]
