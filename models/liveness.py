"""Liveness under weak fairness: ``P leads-to Q`` and ``eventually Q``, with lassos.

A property opens obligations (keys) in the states where P holds and meets them where Q
holds (the predicates are the spec's, tiercheck.spec.properties). It is violated when some
fair behaviour reaches a state with an open obligation and never meets it afterwards;
the counterexample is a lasso: a prefix from the initial state into that state, then a
cycle repeated forever.

Fairness (weak, per action unit; a unit is an action name and its parameters, minus the
environment's choices ``fail`` and ``pages``):
  * fair: every local step (a DMA or storage operation finishing on a rank), every sync
    round, and ``insert`` (a request that is waiting is served again: the hot prefixes
    of seed 000 keep arriving);
  * not fair: ``evict`` (device eviction is not fair to hot nodes, seed 000), load-back
    and prefetch (the scheduler may skip them), and the environment's faults.
A unit is *enabled* in a state when one of its steps changes the state (TLA+'s
ENABLED <<A>>_vars): a rejected re-hit that changes nothing does not oblige anything.
Stuttering is always possible, so a state in which no fair unit is enabled can be the
end of a fair behaviour (a lasso whose cycle is a stuttering step).

Algorithm, per obligation key k: restrict the graph to the states where Q_k fails, keep
the part reachable from states where P_k holds, split it into strongly connected
components, and look for a fair one: every fair unit enabled somewhere in the component
is either disabled in some state of it or taken by an edge inside it (with weak fairness
the whole component is the best cycle, so no further decomposition is needed).

Symmetry reduction is refused for these properties (tiercheck.models.checker).
"""

from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Optional

import numpy as np

from tiercheck.models import graph_algo, progress, replay
from tiercheck.spec.action import COUNT, LOCAL, RANKS, SYNC
from tiercheck.spec.model import ACTION_SPECS
from tiercheck.spec.properties import LIVENESS, PROPERTIES, LeadsTo, Property

FAIR_KINDS = (LOCAL, SYNC)
FAIR_REPLICATED = ("insert",)
# Parameters the environment picks, not the scheduler (by their declared kind): the ranks
# whose allocation fails, the pages a storage batch completes.
ENV_KINDS = (RANKS, COUNT)


def fair_name(name: str) -> bool:
    spec = ACTION_SPECS[name]
    return spec.kind in FAIR_KINDS or name in FAIR_REPLICATED


def fair_unit(a):
    """The weak-fairness unit of an action, or None when the action is not fair."""
    if not fair_name(a.name):
        return None
    kinds = ACTION_SPECS[a.name].signature
    return (a.name,) + tuple((k, v) for k, v in a.params if kinds[k] not in ENV_KINDS)


def unit_str(u) -> str:
    inner = ", ".join(f"{k}={v}" for k, v in u[1:])
    return f"{u[0]}({inner})" if inner else u[0]


def eventually(name: str, doc: str, q: Callable, describe: str) -> Property:
    """``<> Q`` from the initial states; ``q(model, state) -> bool``."""
    return Property(
        name, LIVENESS, 0, doc, LeadsTo(lambda m, s: ("init",), lambda m, s, k, f: q(m, s), describe, True)
    )


# The fair-liveness properties are the spec's (one registry, tiercheck.spec.properties).
BY_NAME: Dict[str, Property] = {p.name: p for p in PROPERTIES if p.kind == LIVENESS}


class Lasso(NamedTuple):
    message: str
    states: list
    actions: list
    loop_start: int
    key: object


# --- the check ------------------------------------------------------------------------


def check(m, graph, prop, limit: int = 1) -> List[Lasso]:
    """Up to ``limit`` lassos violating ``prop`` (distinct obligation states), shallowest
    first; [] when it holds on the explored graph (tiercheck.models.state_graph)."""
    lt = prop.fn
    n = graph.n
    src, dst, kind = graph.src, graph.dst, graph.kind
    if lt.from_init:
        opened: Dict[object, List[int]] = {"init": np.flatnonzero(graph.depth == 0).tolist()}
    else:
        opened = graph.obligations(prop)
    if not opened:
        return []
    met = graph.met(prop, list(opened))
    names = m.action_names()
    fair_kind = np.array([fair_name(x) for x in names] + [False] * (256 - len(names)))
    # A state with no fair non-stuttering step can stutter forever: a fair end.
    has_fair_step = np.zeros(n, dtype=bool)
    fk = fair_kind[kind]
    has_fair_step[src[fk]] = True
    # Edges a cycle may use.
    cyc_ok = np.array([x not in lt.cycle_excludes for x in names] + [False] * (256 - len(names)))
    ck = cyc_ok[kind]
    csrc, cdst = src[ck], dst[ck]
    depth = graph.depth
    found = []
    for order, (key, holders) in enumerate(opened.items()):
        region = ~met[key]
        seeds = np.array([i for i in holders if region[i]], dtype=np.int64)
        if not len(seeds):
            continue
        live = graph_algo.reach(n, src, dst, seeds, region)
        fair = _fair_states(graph, live, csrc, cdst, has_fair_step)
        if not fair.any():
            continue
        # Obligation states from which a fair component is reachable inside the region.
        back = graph_algo.reach(n, dst, src, np.flatnonzero(fair), live)
        for i in holders:
            if live[i] and back[i]:
                found.append((int(depth[i]), order, i, key))
    return [_lasso(m, graph, prop, i, key, met[key], (src, dst), (csrc, cdst), has_fair_step)
            for i, key in progress.first_per_state(found, limit)]


# States of components whose fair steps one ``graph.fair_steps`` call asks for at most
# (a cluster answers each call in one round trip per partition; the batch bounds what
# is held at once).
UNITS_BATCH = 50_000


def _fair_states(graph, live, src, dst, has_fair_step) -> np.ndarray:
    """Mask of the states (inside ``live``) that lie in a fair component of ``live``."""
    n = graph.n
    inside = live[src] & live[dst]
    s_in, d_in = src[inside], dst[inside]
    _count, label = graph_algo.scc_labels(n, s_in, d_in)
    out = np.zeros(n, dtype=bool)
    # Components with an internal edge (non-trivial); the rest are single states.
    same = label[s_in] == label[d_in]
    nontrivial = np.zeros(n, dtype=bool)
    nontrivial[s_in[same]] = True
    comp_nontrivial = np.zeros(int(label.max()) + 1 if n else 0, dtype=bool)
    comp_nontrivial[label[nontrivial]] = True
    single = live & ~comp_nontrivial[label]
    # A lone state with nothing fair left to do stutters forever: a fair end. States cut
    # off by Model.constraint were never expanded: their future is unknown, not quiet.
    out |= single & ~has_fair_step & graph.expanded
    comps = [np.flatnonzero((label == c) & live) for c in np.unique(label[live & comp_nontrivial[label]]).tolist()]
    batch: list = []
    size = 0
    for k, members in enumerate(comps):
        batch.append(members)
        size += len(members)
        if k + 1 < len(comps) and size < UNITS_BATCH:
            continue
        info = graph.fair_steps(np.concatenate(batch).tolist())
        for mem in batch:
            if _component_fair(info, set(mem.tolist())):
                out[mem] = True
        batch, size = [], 0
    return out


def _units(steps):
    """(enabled fair units, {unit: [successor index, ...]}) of a state's fair steps."""
    enabled, taken = set(), {}
    for u, j in steps:
        enabled.add(u)
        taken.setdefault(u, []).append(j)
    return enabled, taken


def _component_fair(info, members: set) -> bool:
    everywhere = None
    somewhere, inside = set(), set()
    for i in members:
        enabled, taken = _units(info[i])
        somewhere |= enabled
        everywhere = set(enabled) if everywhere is None else everywhere & enabled
        for u, js in taken.items():
            if any(j in members for j in js):
                inside.add(u)
    return all(u in inside for u in (everywhere or ()))


# --- building the lasso -------------------------------------------------------------------


def _lasso(m, graph, prop, i, key, met, edges, cycle_edges, has_fair_step) -> Lasso:
    n = graph.n
    src, dst = edges
    csrc, cdst = cycle_edges
    region = ~met
    live = graph_algo.reach(n, src, dst, [i], region)
    fair = _fair_states(graph, live, csrc, cdst, has_fair_step)
    # Prefer ending in a quiescent state (no fair step left: it stutters forever, e.g. a
    # re-hit whose backup is rejected again and again) over a longer cycle.
    quiet = fair & ~has_fair_step & graph.expanded
    path = graph_algo.shortest_path(n, src, dst, i, quiet, live) if quiet.any() else None
    if path is None:
        path = graph_algo.shortest_path(n, src, dst, i, fair, live)
    entry = path[-1]
    inside = live[csrc] & live[cdst]
    _c, label = graph_algo.scc_labels(n, csrc[inside], cdst[inside])
    comp = np.flatnonzero((label == label[entry]) & live)
    cycle = [entry] if quiet[entry] else _cycle(graph, entry, set(comp.tolist()), csrc, cdst)
    states, actions = graph.rebuild(i)
    s, at = states[-1], i
    for j in path[1:] + cycle[1:]:
        a, s = graph.step_to(s, at, j)
        at = j
        actions.append(a)
        states.append(s)
    loop_start = len(states) - len(cycle)
    if len(cycle) == 1:  # a single state: show the stuttering step it repeats, if any
        stutter = _stutter_action(m, s, key)
        if stutter is not None:
            actions.append(stutter)
            states.append(s)
        loop_start = len(states) - 1 - (1 if stutter is not None else 0)
    why = replay.lasso_closes(m, actions, loop_start, states[0])
    if why:
        raise RuntimeError(f"liveness: the lasso does not replay ({why})")
    name = m.name(key) if isinstance(key, int) else key
    cyc = len(states) - 1 - loop_start
    msg = (
        f"{prop.fn.describe.format(key=name)}: after {loop_start} steps a cycle of {cyc} "
        f"step{'s' if cyc != 1 else ''} repeats forever under weak fairness"
    )
    return Lasso(msg, states, actions, loop_start, key)


def _cycle(graph, entry: int, comp: set, src, dst) -> List[int]:
    """State indices of a fair cycle through ``entry`` inside component ``comp``: for every
    fair unit enabled somewhere in it, the cycle visits a state where the unit is disabled
    or takes one of its edges. Returns [entry, ..., entry] ([entry] for a lone state)."""
    if len(comp) == 1:
        return [entry]
    n = graph.n
    mask = np.zeros(n, dtype=bool)
    mask[list(comp)] = True
    steps = graph.fair_steps(sorted(comp))
    info = {i: _units(steps[i]) for i in sorted(comp)}
    units = sorted({u for en, _t in info.values() for u in en}, key=repr)
    waypoints = []  # (state to reach, successor to step to or None)
    for u in units:
        off = next((i for i in sorted(comp) if u not in info[i][0]), None)
        if off is not None:
            waypoints.append((off, None))
            continue
        edge = next((i, j) for i in sorted(comp) for j in info[i][1].get(u, []) if j in comp)
        waypoints.append(edge)
    if not waypoints:  # no fair unit at all: any internal edge makes a cycle
        j = next(int(d) for s_, d in zip(src.tolist(), dst.tolist()) if s_ == entry and d in comp)
        waypoints.append((entry, j))
    cur, out = entry, [entry]
    for target, then in waypoints:
        hop = graph_algo.shortest_path(n, src, dst, cur, _one(n, target), mask)
        out += hop[1:]
        cur = target
        if then is not None:
            out.append(then)
            cur = then
    back = graph_algo.shortest_path(n, src, dst, cur, _one(n, entry), mask) if cur != entry else [entry]
    out += back[1:]
    if len(out) == 1:  # entry itself was every waypoint: leave and come back
        j = next(int(d) for s_, d in zip(src.tolist(), dst.tolist()) if s_ == entry and d in comp)
        out += [j] + graph_algo.shortest_path(n, src, dst, j, _one(n, entry), mask)[1:]
    return out


def _one(n: int, i: int) -> np.ndarray:
    t = np.zeros(n, dtype=bool)
    t[i] = True
    return t


def _stutter_action(m, s, key) -> Optional[object]:
    """A step of ``s`` that changes nothing (e.g. a re-hit whose backup is rejected),
    preferring one that concerns the obligation's node: an insert of a request through it,
    then an action naming it."""
    found = [a for a in m.actions(s) if ACTION_SPECS[a.name].effect(m, s, a) == s]
    if not found:
        return None

    def rank(a):
        if isinstance(key, int) and key >= 0:
            if a.name == "insert" and key in m.pages.request_pages[a["req"]]:
                return 0
            if key in [v for _k, v in a.params]:
                return 1
        return 2

    return min(found, key=rank)
