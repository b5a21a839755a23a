"""Generated conformance traces: a transition tour of a model.

The model is explored breadth-first; then traces are built from the initial state so that,
together, they take every transition of the state graph (every action, with every
parameter, from every state that enables it; stuttering steps included, since the
implementation must not move there either), and probe every action in some reachable
state where its guard is false. Each trace walks the shortest path to the nearest
uncovered transition, takes it, and goes on until it reaches ``max_len``. When the model
has more transitions than ``budget`` steps can cover, the tour covers every action label
first and then as many transitions as fit, and says so. A model with more than ``limit``
states is explored breadth-first up to the limit (``Tour.bounded``): the tour then covers
the transitions of the states within it, every action label they enable included.
"""

from __future__ import annotations

from collections import deque
from typing import Dict, List, NamedTuple, Tuple

from tiercheck.spec.action import Action


class TourTrace(NamedTuple):
    actions: Tuple[Action, ...]
    probes: Tuple[int, ...]  # indices of steps that must be disabled (guard probes)


class Tour(NamedTuple):
    traces: List[TourTrace]
    labels_covered: int
    labels_total: int
    probes_covered: int
    probe_names: Tuple[str, ...]
    states: int
    transitions_covered: int
    transitions_total: int
    bounded: bool = False  # exploration stopped at the state limit


def explore(model, limit: int = 200_000, bounded: bool = False):
    """States and their successor edges. Past ``limit`` states: ValueError, or with
    ``bounded`` the states beyond are left out (edges to them too)."""
    init = model.init_states()[0]
    index = {init: 0}
    states = [init]
    edges: List[List[Tuple[Action, int]]] = []
    queue = deque([0])
    while queue:
        i = queue.popleft()
        s = states[i]
        out = []
        if model.constraint(s):
            for a, t in model.successors(s):
                j = index.get(t)
                if j is None:
                    if len(states) >= limit:
                        if bounded:
                            continue
                        raise ValueError(f"model has more than {limit} states: too big for a tour")
                    j = index[t] = len(states)
                    states.append(t)
                    queue.append(j)
                out.append((a, j))
        edges.append(out)
    return states, edges


def _disabled_candidates(model, s) -> List[Action]:
    """Actions the spec lists as candidates in ``s`` but whose guard is false there."""
    from tiercheck.spec.model import ACTIONS

    out = []
    for spec in ACTIONS:
        for a in spec.params(model, s):
            if not spec.guard(model, s, a):
                out.append(a)
    return out


def build_tour(model, max_len: int = 60, limit: int = 200_000, budget: int = 20_000, bounded: bool = False) -> Tour:
    states, edges = explore(model, limit, bounded)
    all_edges = {(i, a) for i, out in enumerate(edges) for a, _ in out}
    labels = {a for _i, a in all_edges}
    probe_at: Dict[str, Tuple[int, Action]] = {}
    for i, s in enumerate(states):
        for a in _disabled_candidates(model, s):
            probe_at.setdefault(a.name, (i, a))
    uncovered = set(all_edges)
    uncovered_labels = set(labels)
    uncovered_probes = dict(probe_at)
    traces: List[TourTrace] = []
    spent = 0
    while (uncovered or uncovered_probes) and spent < budget:
        cur, actions, probes = 0, [], []
        while len(actions) < max_len and (uncovered or uncovered_probes):
            # Labels first, so a tour cut short by the budget still takes every action.
            target_edges = {e for e in uncovered if e[1] in uncovered_labels} or uncovered
            path = _to_nearest(cur, edges, target_edges, uncovered_probes)
            if path is None:
                break
            steps, end, item = path
            for a, j in steps:
                uncovered.discard((cur, a))
                uncovered_labels.discard(a)
                actions.append(a)
                cur = j
            if isinstance(item, str):  # a probe: the disabled action, then stay put
                _, a = uncovered_probes.pop(item)
                probes.append(len(actions))
                actions.append(a)
        if not actions:
            break
        spent += len(actions)
        traces.append(TourTrace(tuple(actions), tuple(probes)))
    return Tour(
        traces=traces,
        labels_covered=len(labels) - len(uncovered_labels),
        labels_total=len(labels),
        probes_covered=len(probe_at) - len(uncovered_probes),
        probe_names=tuple(sorted(probe_at)),
        states=len(states),
        transitions_covered=len(all_edges) - len(uncovered),
        transitions_total=len(all_edges),
        bounded=bounded and len(states) >= limit,
    )


def _to_nearest(start, edges, targets, probes):
    """Shortest path from ``start`` ending with an uncovered transition in ``targets``
    (pairs of state index and action), or reaching a state where an uncovered probe can
    be made: (steps, end state, probe name or None)."""
    probe_states = {i: name for name, (i, _a) in probes.items()}
    parent = {start: None}
    queue = deque([start])
    while queue:
        i = queue.popleft()
        if i in probe_states:
            return _unwind(parent, i), i, probe_states[i]
        for a, j in edges[i]:
            if (i, a) in targets:
                return _unwind(parent, i) + [(a, j)], j, None
            if j not in parent:
                parent[j] = (i, a)
                queue.append(j)
    return None


def _unwind(parent, i):
    out = []
    while parent[i] is not None:
        p, a = parent[i]
        out.append((a, i))
        i = p
    out.reverse()
    return out
