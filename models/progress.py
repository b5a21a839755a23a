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


def state_depths(search) -> np.ndarray:
    n = len(search.keys)
    starts = np.asarray(search.level_start + [n], dtype=np.int64)
    return np.searchsorted(starts, np.arange(n), side="right") - 1


def check(m, search, prop, limit: int = 1) -> List[Tuple[int, object]]:
    """Up to ``limit`` (state index, obligation key) pairs from which no allowed path meets
    the obligation, shallowest first (ties: first obligation met, then lowest index)."""
    spec = prop.fn
    n = len(search.keys)
    names = m.action_names()
    allowed = np.array([bool(spec.step(m.action_kind(x), x)) for x in names] + [False] * (256 - len(names)))
    src, dst, kind = graph_algo.edges(search)
    keep = allowed[kind]
    # Backward reachability: walk reversed allowed edges from the states that meet it.
    rsrc, rdst = dst[keep], src[keep]
    decode = search.codec.decode
    frees = search.frees
    pending = {}
    for i, k in enumerate(search.keys):
        for key in spec.obligations(m, decode(k)):
            pending.setdefault(key, []).append(i)
    met = {key: [] for key in pending}
    if pending:
        for i, k in enumerate(search.keys):
            s = decode(k)
            for key, lst in met.items():
                if spec.met(m, s, key, frees[i]):
                    lst.append(i)
    depth = state_depths(search)
    found = []
    for order, (key, holders) in enumerate(pending.items()):
        good = graph_algo.reach(n, rsrc, rdst, met[key])
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
