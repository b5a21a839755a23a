"""Reachable states of shipped models by seeded random walks (shared by the proof tests)."""

import random

from tiercheck.models.model_file import load
from tiercheck.spec.model import Model


def model(name: str) -> Model:
    return Model(load(f"models/library/{name}.toml").config)


def walk(m: Model, seed: int, steps: int):
    """States along one random run (the initial state first)."""
    rng = random.Random(seed)
    s = m.init_states()[0]
    out = [s]
    for _ in range(steps):
        succ = list(m.successors(s))
        if not succ:
            break
        _a, s = rng.choice(succ)
        out.append(s)
    return out


def reachable(m: Model, limit: int = 5000):
    """Reachable states breadth-first, level by level, until ``limit`` are known."""
    seen, frontier = dict.fromkeys(m.init_states()), list(m.init_states())
    while frontier and len(seen) < limit:
        nxt = []
        for s in frontier:
            for _a, t in m.successors(s):
                if t not in seen:
                    seen[t] = None
                    nxt.append(t)
        frontier = nxt
    return list(seen)
