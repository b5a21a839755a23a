"""Traces for the viewer tests, made from the spec alone (no checker): the shortest path
to a state that breaks a property, found by a plain BFS, written with models/trace.py."""

from __future__ import annotations

from collections import deque

from tiercheck.models import model_file
from tiercheck.models.trace import write_trace
from tiercheck.spec.model import Model


def shortest_violation(model: Model, prop: str, limit: int = 200_000):
    """(actions, states) from the initial state to the first state violating invariant ``prop``."""
    check = model.property(prop).fn
    init = model.init_states()[0]
    parent = {init: None}
    queue = deque([init])
    while queue and len(parent) < limit:
        s = queue.popleft()
        if check(model, s):
            actions, states = [], [s]
            while parent[s] is not None:
                s, a = parent[s]
                actions.append(a)
                states.append(s)
            return actions[::-1], states[::-1]
        if not model.constraint(s):
            continue
        for a, t in model.successors(s):
            if t not in parent:
                parent[t] = (s, a)
                queue.append(t)
    raise AssertionError(f"no violation of {prop} found")


def write_counterexample(path, name: str, prop: str):
    mf = model_file.load(name)
    model = Model(mf.config)
    actions, states = shortest_violation(model, prop)
    msg = model.property(prop).fn(model, states[-1])
    write_trace(path, model, model_file.dump(mf), actions, states, prop=prop, message=msg)
    return model, actions, states


def write_walk(path, name: str, picks, loop_start=None):
    """A trace of the actions whose text (str(action)) is given, in order, from the start."""
    mf = model_file.load(name)
    model = Model(mf.config)
    s = model.init_states()[0]
    states, actions = [s], []
    for want in picks:
        enabled = {str(a): a for a in model.actions(s)}
        if want not in enabled:
            raise AssertionError(f"{want} not enabled; enabled: {sorted(enabled)}")
        a = enabled[want]
        s = model.next_state(s, a)
        actions.append(a)
        states.append(s)
    write_trace(path, model, model_file.dump(mf), actions, states, kind="lasso" if loop_start is not None else "trace",
                loop_start=loop_start)
    return model, actions, states
