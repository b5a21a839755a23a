"""Checking a model on a Dask cluster, the state space partitioned by state hash.

Each Dask worker holds one ``Partition`` (a Dask actor, tiercheck.models.partition): the
visited set and the frontier of the states whose hash falls on it. The coordinator (the ``tiercheck check`` process)
runs the breadth-first search level by level:

1. every partition expands its frontier (tiercheck.models.expand, the same per-state
   work as one process) and returns its successors bucketed by owning partition, its
   violations, and how many steps it took;
2. the coordinator hands each partition the successors it owns; the partition drops
   those it has seen and keeps, per new state, the smallest (parent index, action
   position) that reached it;
3. the coordinator sorts the new states of the whole level by that pair and numbers them.

That numbering is exactly the one of the single-process search (tiercheck.models.search:
states are numbered in discovery order, a state's parent is its first discoverer), so the
distinct count, every verdict and every counterexample (the same shortest trace) are the
single-process ones; where that search stops early because every property is violated,
the counts are cut where it would have stopped. Traces are rebuilt by re-executing the
recorded action positions from the initial state (tiercheck.models.replay), as always.

Progress and liveness properties run the one-process graph algorithms
(tiercheck.models.progress, tiercheck.models.liveness) on a ``ClusterGraph``
(tiercheck.models.cluster_graph): each
partition keeps the edges into its own states (it alone can number their targets), the
driver gathers them once the search is done, in the one-process order (source state,
then action position), and the per-state questions (obligations opened and met, fair
steps, a state of a trace) go back to the partitions that hold the states, in batches.
Verdicts and lassos are then the one-process ones. Symmetry, ``--max-states`` and
``--time-limit`` work as in one process (docs/cluster.md). Needs the ``cluster`` extra
(dask distributed).
"""

from __future__ import annotations

import logging
import pickle
import time
from array import array
from typing import Dict, List, Optional

from tiercheck.errors import UserError
from tiercheck.models import verdicts
from tiercheck.models.checker import Result, make_lasso, make_violation, resolve_property
from tiercheck.models.cluster_graph import ClusterGraph, each, states_of
from tiercheck.models.partition import POS_BITS, POS_MASK, Partition, part_of, rank_digest, state_of, symmetry_for, wire_of
from tiercheck.models.search import Hit, Search
from tiercheck.spec.state import State

EXTRA = "pip install 'tiercheck[cluster]' (dask distributed)"


# --- the coordinator --------------------------------------------------------------------


class _Trace:
    """What tiercheck.models.replay.rebuild reads of a search, for the cluster run: parent
    indices and action positions of every state, and the states of the hits."""

    class _Identity:
        decode = encode = staticmethod(lambda s: s)

    def __init__(self):
        self.parent = array("q")
        self.via = array("H")
        self.keys: Dict[int, State] = {}
        self.hits: Dict[str, List[Hit]] = {}
        self.codec = self._Identity()

    path_to = Search.path_to  # reads only self.parent

class LocalParts:
    """The partitions in this process (no Dask): the same protocol, for tests and for
    comparing the partitioned search with the one-process search."""

    def __init__(self, cfg, props, parts: int, symmetry: bool = False):
        self.symmetry = symmetry
        self.parts = [Partition(cfg, props, q, parts, symmetry) for q in range(parts)]

    def call(self, method: str, args_per_part) -> list:
        return [getattr(p, method)(*a) for p, a in zip(self.parts, args_per_part)]

    def close(self) -> None:
        pass


class DaskParts:
    """One Partition actor per worker of a Dask cluster (``local:N`` starts one here)."""

    def __init__(self, cfg, props, address: str, symmetry: bool = False):
        self.symmetry = symmetry
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise UserError(f"--cluster needs the cluster extra: {EXTRA}") from None
        self.cluster = None
        if address.startswith("local:"):
            n = _local_size(address)
            self.cluster = LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                # Workers log their own shutdown (a heartbeat to a closed scheduler) as
                # errors; what goes wrong in a partition reaches the driver as an exception.
                silence_logs=logging.CRITICAL,
            )
            address = self.cluster.scheduler_address
        try:
            self.client = Client(address, timeout="30s")
        except (OSError, TimeoutError) as exc:
            self.close()
            raise UserError(f"--cluster {address}: cannot connect ({exc})") from None
        workers = sorted(self.client.scheduler_info()["workers"])
        if not workers:
            self.close()
            raise UserError(f"--cluster {address}: the cluster has no workers")
        futs = [
            self.client.submit(
                Partition, cfg, props, q, len(workers), symmetry, actor=True, workers=[w], allow_other_workers=False
            )
            for q, w in enumerate(workers)
        ]
        self.parts = [f.result() for f in futs]

    def call(self, method: str, args_per_part) -> list:
        futs = [getattr(p, method)(*a) for p, a in zip(self.parts, args_per_part)]
        return [f.result() for f in futs]

    def close(self) -> None:
        client, self.client = getattr(self, "client", None), None
        if client is not None:
            client.close()
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None


def _local_size(address: str) -> int:
    try:
        n = int(address.split(":", 1)[1])
    except ValueError:
        n = 0
    if not 1 <= n <= 64:
        raise UserError(f"--cluster {address}: local:N needs N in 1..64")
    return n

def check(model, properties: List[str], parts, max_violations: int = 1,
          max_states: Optional[int] = None, time_limit: Optional[float] = None) -> Result:
    """Breadth-first search of ``model`` on ``parts`` (LocalParts / DaskParts, over orbit
    representatives when built with symmetry); the Result is the single-process
    Checker's, including where ``max_states`` cuts it (the same step of the same state).
    ``time_limit`` stops at the end of a level."""
    props = [resolve_property(n) for n in properties]
    m = model
    res = Result(workers=len(parts.parts))
    sym = symmetry_for(m, parts.symmetry)
    run = _Run(parts, {p.name for p in props}, max_violations)
    t0 = time.monotonic()
    init, incoming = _initial(m, run.n_parts, sym.canonical if sym else None)
    orders = parts.call("merge", [(inc,) for inc in incoming])
    depth, level, stop_reason = 0, 0, ""
    while True:
        flat = sorted((o, q, j) for q, lst in enumerate(orders) for j, o in enumerate(lst))
        if not flat:
            break
        lo = run.total
        depth = level
        out = parts.call("expand", [(nums, set(run.open_props), max_violations) for nums in run.number(flat, orders, level)])
        run.unexpanded |= {i for _b, _h, u, _t, _c in out for i in u}
        incoming = [[] for _ in range(run.n_parts)]
        for batches, *_rest in out:
            for q, b in enumerate(batches):
                incoming[q].append(b)
        orders = parts.call("merge", [(inc,) for inc in incoming])
        level += 1
        # Where the one-process search stops inside this level, if it does: the last
        # step it takes, as an order key (state << POS_BITS | action position).
        cut = run.max_states_cut(max_states, orders, lo) if max_states else None
        run.take_hits(out, cut)
        stop_at = run.closed_stop(lo)
        reason = ""
        if cut is not None and (stop_at is None or cut >> POS_BITS <= stop_at):
            # Cut inside a state: the reason is the one it checks first after the break.
            reason = "every property already violated" if not run.open_props else f"--max-states {max_states} reached"
        elif stop_at is not None:
            cut, reason = stop_at << POS_BITS | POS_MASK, "every property already violated"
        elif time_limit and time.monotonic() - t0 > time_limit:
            reason = f"--time-limit {time_limit:g}s reached"
        run.tally(out, cut)
        if reason:
            found = run.register_cut(orders, cut)
            depth = level if found else level - 1
            stop_reason = reason
            break
    res.seconds = time.monotonic() - t0
    res.distinct, res.transitions, res.depth = run.total, run.transitions, depth
    res.complete, res.stop_reason = not stop_reason, stop_reason
    res.coverage = {m.action_names()[nid]: c for nid, c in sorted(run.cov.items())}
    run.tr.keys.update(enumerate(init))
    _verdicts(m, props, run, sym, res)
    return res


def _verdicts(m, props, run, sym, res: Result) -> None:
    """Counterexamples and verdicts of a finished cluster search, as Checker.run decides
    them (tiercheck.models.verdicts)."""
    safety = [p for p in props if p.kind in ("invariant", "transition")]
    graph = [p for p in props if p not in safety]
    tr, parts = run.tr, run.parts
    diverged, canon = None, None
    if parts.symmetry and sym is None:
        from tiercheck.models import symmetry

        res.notes.append(f"symmetry off: {symmetry.for_model(m)[1]}")
    if sym is not None:
        canon = sym.canonical
        if graph:
            res.notes.append(verdicts.SYMMETRY_GRAPH_NOTE)
        res.symmetry = sym.summary(run.total, sum(each(parts, "represented")))
        if sym.ranks:
            diverged = min((d for d in each(parts, "diverged") if d is not None), default=None)
        # Traces under symmetry are re-executed into each recorded orbit: every state
        # on a hit's path is needed, not only its last.
        path = {j for hits in tr.hits.values() for h in hits for j in tr.path_to(h.index)}
        tr.keys.update(states_of(parts, run.owner, sorted(path - set(tr.keys))))
    res.violations = verdicts.safety_violations(m, tr, safety, canon, make_violation)
    if graph and res.complete and sym is None:
        g = ClusterGraph(m, parts, tr, run.level_start, run.owner, sorted(run.unexpanded))
        for p in graph:
            found = verdicts.graph_violations(m, g, p, run.max_violations, make_violation, make_lasso)
            if found:
                res.violations[p.name] = found
    res.verdicts = verdicts.decide(props, res.violations, res.complete, sym is not None, diverged)
    if run.unexpanded:
        res.notes.append(verdicts.bounds_note(m, len(run.unexpanded)))
    if diverged is not None:
        res.notes.append(verdicts.diverged_note(diverged))

def _initial(m, n_parts: int, canon=None):
    """(the initial states, level 0 for ``merge``): in order, duplicates dropped, orbit
    representatives under symmetry (their order key is their index)."""
    incoming = [[] for _ in range(n_parts)]
    init: List[State] = []
    seen = set()
    for s in m.init_states():
        s = canon(s) if canon is not None else s
        if s in seen:
            continue
        seen.add(s)
        q = part_of([rank_digest(rs) for rs in s.ranks], s.store, s.hung, s.halted, n_parts)
        incoming[q].append((len(init), wire_of(s), -1))
        init.append(s)
    return init, [[pickle.dumps(inc, protocol=pickle.HIGHEST_PROTOCOL)] for inc in incoming]


class _Run:
    """The driver's records of a cluster search: the numbering, the hits, the tallies."""

    def __init__(self, parts, open_props, max_violations: int):
        self.parts, self.n_parts = parts, len(parts.parts)
        # Graph properties stay open, as in the one-process search: it never stops early then.
        self.open_props = set(open_props)
        self.max_violations = max_violations
        self.closed_at: Optional[int] = None  # index where the last open property got its hits
        self.tr = _Trace()
        self.total = 0
        self.owner = bytearray()  # per state: its partition (graph queries go there)
        self.level_start: List[int] = []
        self.unexpanded: set = set()  # states outside Model.constraint
        self.transitions, self.cov = 0, {}

    def number(self, flat, orders, level: int) -> List[List[int]]:
        """Number a level's new states (``flat``: sorted (order, partition, slot)); per
        partition, the numbers of its states in ``orders`` order."""
        tr, lo = self.tr, self.total
        numbers = [[0] * len(lst) for lst in orders]
        self.level_start.append(lo)
        for k, (o, q, j) in enumerate(flat):
            numbers[q][j] = lo + k
            self.owner.append(q)
            tr.parent.append(-1 if level == 0 else o >> POS_BITS)
            tr.via.append(0 if level == 0 else o & POS_MASK)
        self.total += len(flat)
        return numbers

    def max_states_cut(self, max_states: int, orders, lo: int) -> Optional[int]:
        """The step after which the one-process search breaks on ``max_states``: the one
        that finds the state numbered max_states - 1 (``orders``: this level's finds), or,
        with that many states before the level, the first state change of its first
        expanded state. None when the level ends first."""
        if self.total >= max_states:
            i = self._first_expanded(lo)
            if i is None:
                return None
            pos = self.parts.call("first_move", [(i,)] * self.n_parts)
            pos = next((p for p in pos if p is not None), POS_MASK)
            return i << POS_BITS | pos
        need = max_states - self.total
        found = sorted(o for lst in orders for o in lst)
        return found[need - 1] if len(found) >= need else None

    def register_cut(self, orders, cut: Optional[int]) -> int:
        """Number the last merge's finds up to ``cut`` (the search stops there; they are
        counted, not expanded) on their partitions; returns how many."""
        kept = sorted((o, q, j) for q, lst in enumerate(orders) for j, o in enumerate(lst) if cut is None or o <= cut)
        numbers: List[list] = [[None] * len(lst) for lst in orders]
        for k, (_o, q, j) in enumerate(kept):
            numbers[q][j] = self.total + k
            self.owner.append(q)
        self.parts.call("register", [(nums,) for nums in numbers])
        self.total += len(kept)
        return len(kept)

    def _first_expanded(self, start: int) -> Optional[int]:
        return next((i for i in range(start, self.total) if i not in self.unexpanded), None)

    def take_hits(self, out, cut: Optional[int]) -> None:
        """Record the level's violations in the one-process order, up to ``cut``."""
        tr, open_props = self.tr, self.open_props
        level_hits = sorted(
            (h[0], h[1], name, h[2], h[3], h[4]) for _b, hits, _u, _t, _c in out for name, lst in hits.items() for h in lst
        )
        for i, pos, name, msg, wire, succ in level_hits:
            if cut is not None and (i, pos) > (cut >> POS_BITS, cut & POS_MASK):
                break
            if name not in open_props:
                continue
            lst = tr.hits.setdefault(name, [])
            lst.append(Hit(name, msg, i, None if pos < 0 else pos, None if succ is None else state_of(succ)))
            tr.keys[i] = state_of(wire)
            if len(lst) >= self.max_violations:
                open_props.discard(name)
                if not open_props and self.closed_at is None:
                    self.closed_at = i

    def closed_stop(self, lo: int) -> Optional[int]:
        """The state after which the one-process search stops because every property is
        violated: the first expanded one from the last closing hit on."""
        if self.closed_at is None:
            return None
        return self._first_expanded(max(self.closed_at, lo))

    def tally(self, out, cut: Optional[int]) -> None:
        if cut is not None:
            tallies = self.parts.call("tally", [(cut >> POS_BITS, cut & POS_MASK)] * self.n_parts)
        else:
            tallies = [(t, c) for _b, _h, _u, t, c in out]
        for t, c in tallies:
            self.transitions += t
            for nid, (e, k) in c.items():
                cc = self.cov.setdefault(nid, [0, 0])
                cc[0] += e
                cc[1] += k

def run(model, properties: List[str], address: str, max_violations: int = 1,
        max_states: Optional[int] = None, time_limit: Optional[float] = None, symmetry: bool = False) -> Result:
    """``tiercheck check --cluster ADDRESS``: ``local:N`` starts N worker processes here,
    anything else is a Dask scheduler address (tcp://host:8786)."""
    parts = DaskParts(model.cfg, list(properties), address, symmetry)
    try:
        return check(model, properties, parts, max_violations, max_states, time_limit)
    finally:
        parts.close()
