"""Progress properties (spec kind "progress") on the explored graph.

For every state with an open obligation, some path of allowed steps must reach a state
that meets it (a possibility property, AG(P -> E<allowed>F Q)). The predicates are the
spec's (tiercheck.spec.properties.Progress); this module is only the graph algorithm.
Violations are reported shallowest first.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from tiercheck.models import graph_algo


def check(m, graph, prop, limit: int = 1) -> List[Tuple[int, object]]:
    """Up to ``limit`` (state index, obligation key) pairs from which no allowed path meets
    the obligation, shallowest first (ties: first obligation met, then lowest index).
    ``graph``: the explored graph (tiercheck.models.state_graph)."""
    spec = prop.fn
    n = graph.n
    names = m.action_names()
    allowed = np.array([bool(spec.step(m.action_kind(x), x)) for x in names] + [False] * (256 - len(names)))
    keep = allowed[graph.kind]
    # Backward reachability: walk reversed allowed edges from the states that meet it.
    rsrc, rdst = graph.dst[keep], graph.src[keep]
    pending = graph.obligations(prop)
    met = graph.met(prop, list(pending))
    depth = graph.depth
    # A state past the model's bounds (Model.constraint) was not expanded: its future is
    # unknown, so a path into it may meet the obligation; it is no counterexample either.
    # (The correct protocol can reach the bounds: request locks past max_lock.)
    unknown = ~graph.expanded
    found = []
    for order, (key, holders) in enumerate(pending.items()):
        good = graph_algo.reach(n, rsrc, rdst, np.flatnonzero(met[key] | unknown))
        for i in holders:
            if not good[i]:
                found.append((int(depth[i]), order, i, key))
    return first_per_state(found, limit)


def first_per_state(found, limit):
    """(state, key) of the shallowest ``limit`` entries of ``found`` — tuples (depth,
    property order, state, key) — one per state: distinct counterexamples, shortest first."""
    out, seen = [], set()
    for _d, _o, i, key in sorted(found):
        if i in seen:
            continue
        seen.add(i)
        out.append((i, key))
        if len(out) >= limit:
            break
    return out
