"""Shared builders for the checker tests."""

from __future__ import annotations

from collections import deque

from tiercheck.models import model_file
from tiercheck.models.checker import Checker
from tiercheck.spec.model import Model


def shipped(name: str) -> Model:
    return Model(model_file.load(name).config)


def explore(m: Model, props=(), **kw):
    """(checker, result) of a run over ``props`` (default: exploration only)."""
    c = Checker(m, list(props), **kw)
    return c, c.run()


def reachable(m: Model, limit: int):
    """Up to ``limit`` reachable states in breadth-first order (plain BFS on the spec,
    independent of the checker)."""
    s0 = m.init_states()[0]
    seen, order, q = {s0}, [s0], deque([s0])
    while q and len(order) < limit:
        s = q.popleft()
        if not m.constraint(s):
            continue
        for _a, t in m.successors(s):
            if t not in seen:
                seen.add(t)
                order.append(t)
                q.append(t)
    return order[:limit]


_RUNS: dict = {}


def default_run(name: str, symmetry: bool = False):
    """The result of checking shipped model ``name`` on its default properties, cached
    for the session (several tests read the same unreduced run)."""
    key = (name, symmetry)
    if key not in _RUNS:
        mf = model_file.load(name)
        m = Model(mf.config)
        from pins import size

        big = mf.slow or (size(name) or 10**9) > 20_000
        _RUNS[key] = explore(m, mf.properties, symmetry=symmetry, workers=2 if big else 1)[1]
    return _RUNS[key]
