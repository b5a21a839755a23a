"""Checking a model on a Dask cluster, the state space partitioned by state hash.

Each Dask worker holds one ``Partition`` (a Dask actor): the visited set and the frontier
of the states whose hash falls on it. The coordinator (the ``tiercheck check`` process)
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
(tiercheck.models.progress, tiercheck.models.liveness) on a ``ClusterGraph``: each
partition keeps the edges into its own states (it alone can number their targets), the
driver gathers them once the search is done, in the one-process order (source state,
then action position), and the per-state questions (obligations opened and met, fair
steps, a state of a trace) go back to the partitions that hold the states, in batches.
Verdicts and lassos are then the one-process ones. Needs the ``cluster`` extra (dask
distributed).
"""

from __future__ import annotations

import pickle
import time
import zlib
from array import array
from bisect import bisect_left
from typing import Dict, List, Optional

import numpy as np

from tiercheck.errors import UserError
from tiercheck.models import replay, state_graph, verdicts
from tiercheck.models.checker import ENGINES, Result, make_lasso, make_violation, resolve_property
from tiercheck.models.codec import Codec, from_plain, to_plain
from tiercheck.models.search import Hit, Search
from tiercheck.spec.model import Model
from tiercheck.spec.state import State

GRAPH_KINDS = ("progress", "liveness")
POS_BITS = 16  # action positions per state (the single-process search keeps them as 'H')
POS_MASK = (1 << POS_BITS) - 1
EXTRA = "pip install 'tiercheck[cluster]' (dask distributed)"


# --- states on the wire -----------------------------------------------------------------
# A state crosses processes as (rank blobs, stores, hung, halted): each rank state pickled
# as plain tuples. Its partition comes from a digest of its value, not of those bytes (a
# pickle's bytes depend on which equal sub-tuples happen to be one object): every process
# computes it alike (Python's own str hash is salted per process).


def _canon(v):
    """A value whose repr is the same for equal plain values (True == 1 in Python)."""
    if isinstance(v, tuple):
        return tuple([_canon(x) for x in v])
    return int(v) if isinstance(v, bool) else v


def rank_digest(rs) -> int:
    return zlib.crc32(repr(_canon(to_plain(rs))).encode())


def part_of(digests, stores, hung, halted, parts: int) -> int:
    """The partition that owns a state, from its ranks' digests and the rest of it."""
    return zlib.crc32(repr((tuple(digests), tuple(stores), hung, halted)).encode()) % parts


class Partition:
    """One share of the state space (a Dask actor; also usable in-process)."""

    def __init__(self, cfg, props, part: int, parts: int, symmetry: bool = False):
        self.m = Model(cfg)
        self.part, self.parts = part, parts
        self.codec = Codec(self.m)
        props = [resolve_property(n) for n in props]
        # Under symmetry a partition holds orbit representatives (the same canonical
        # function in every process), as the one-process search does.
        self.sym = symmetry_for(self.m, symmetry)
        # The one-process default engine (per-rank memoised expansion, the plain
        # engine's records bit for bit).
        self.expander = ENGINES["memo"](self.m, props, self.codec, self.sym.canonical if self.sym else None)
        self.visited = set()  # local packed keys (this process's codec)
        # With progress/liveness properties: the graph's share here. Each edge is kept by
        # the partition that owns its target (which alone can number it); the states'
        # global indices let the driver's graph algorithms ask about them afterwards.
        self.graph = self.sym is None and any(p.kind in GRAPH_KINDS for p in props)
        self.index: Dict[int, int] = {}  # own key -> global index (graph only)
        # Own states by global index (for the driver's questions: traces, graph, orbits).
        self.own_idx, self.own_keys, self.own_frees = array("q"), [], bytearray()
        self.unresolved: list = []  # (order, name id, key) of edges into unnumbered states
        self.e_src, self.e_dst, self.e_pos, self.e_kind = array("i"), array("i"), array("H"), bytearray()
        self.pending: Dict[int, int] = {}  # new key -> smallest (parent << POS_BITS | pos)
        self.blobs: List[bytes] = []  # rank gid -> its blob
        self.digests: List[int] = []  # rank gid -> rank_digest
        self.by_blob: Dict[bytes, int] = {}  # blob -> rank gid
        self.last: list = []  # (index, step name/stutter bytes) of the last level expanded

    # -- wire <-> local keys ------------------------------------------------------------

    def _grow(self, gid: int) -> None:
        while len(self.blobs) <= gid:
            rs = self.codec.ranks.values[len(self.blobs)]
            self.blobs.append(pickle.dumps(to_plain(rs), protocol=4))
            self.digests.append(rank_digest(rs))

    def _wire(self, key: int):
        """(the state of a local key on the wire, its owning partition)."""
        s, gids = self.codec.decode_gids(key)
        self._grow(max(gids))
        wire = tuple([self.blobs[g] for g in gids]), s.store, s.hung, s.halted
        return wire, part_of([self.digests[g] for g in gids], s.store, s.hung, s.halted, self.parts)

    def _key(self, wire) -> int:
        blobs, stores, hung, halted = wire
        gids = []
        for b in blobs:
            g = self.by_blob.get(b)
            if g is None:
                g = self.by_blob[b] = self.codec.rank_ref(from_plain(pickle.loads(b)))
            gids.append(g)
        flag = self.codec.flag_ref((hung, halted)) if (hung or halted) else 0
        return self.codec.make_key(gids, tuple(stores), flag)

    # -- the level steps ----------------------------------------------------------------

    def merge(self, incoming) -> List[int]:
        """Take the (order, wire state, action name id) triples this partition owns (name
        id -1: an initial state); return the order keys of its new states (in the order
        ``expand`` will number them)."""
        pending, visited = self.pending, self.visited
        for order, wire, nid in incoming:
            k = self._key(wire)
            if self.graph and nid >= 0:
                self._edge(order, nid, k)
            if k in visited:
                old = pending.get(k)
                if old is not None and order < old:
                    pending[k] = order
                continue
            visited.add(k)
            pending[k] = order
        return list(pending.values())

    def expand(self, numbers: List[int], open_props, max_hits: int):
        """Expand the states merged last, numbered ``numbers`` (aligned with what
        ``merge`` returned). Returns (buckets, hits, unexpanded indices, transitions,
        coverage): per destination partition the (order, wire) successors; per property
        its first ``max_hits`` (index, pos, message, wire state) here."""
        frontier = list(zip(numbers, self.pending))
        self.pending = {}
        frontier.sort()
        if self.graph:
            for i, key in frontier:
                self.index[key] = i
            self._resolve()
        buckets = [[] for _ in range(self.parts)]
        hits: Dict[str, list] = {}
        unexpanded, self.last = [], []
        expand = self.expander.expand
        for i, key in frontier:
            viols, expanded, steps, frees = expand(key, open_props)
            for name, msg in viols:
                self._hit(hits, name, (i, -1, msg, key, None), max_hits)
            self.own_idx.append(i)
            self.own_keys.append(key)
            self.own_frees.append(1 if expanded and frees else 0)
            if not expanded:
                unexpanded.append(i)
                continue
            self.last.append((i, bytes([s[1] << 1 | s[3] for s in steps])))
            base = i << POS_BITS
            for pos, nid, tkey, stutter, tviols in steps:
                if stutter:
                    continue
                for name, msg in tviols:
                    self._hit(hits, name, (i, pos, msg, key, tkey), max_hits)
                wire, q = self._wire(tkey)
                buckets[q].append((base | pos, wire, nid))
        for lst in hits.values():
            for k, h in enumerate(lst):
                lst[k] = h[:3] + (self._wire(h[3])[0], None if h[4] is None else self._wire(h[4])[0])
        transitions, coverage = self.tally(None)
        return buckets, hits, unexpanded, transitions, coverage

    def register(self, numbers) -> None:
        """Number the states merged last without expanding them (a cut search's last
        finds; ``numbers`` aligned with what ``merge`` returned, None: beyond the cut)."""
        found = sorted((i, key) for key, i in zip(self.pending, numbers) if i is not None)
        self.pending = {}
        for i, key in found:
            self.own_idx.append(i)
            self.own_keys.append(key)
            self.own_frees.append(0)

    def represented(self) -> int:
        """The states this partition's orbit representatives stand for."""
        return sum(self.sym.orbit_size(s) for _i, s, _f in self._own())

    def diverged(self) -> Optional[int]:
        """The first own state whose replicas disagree, or None."""
        return verdicts.first_diverged(self.m, ((i, s) for i, s, _f in self._own()))

    def first_move(self, i: int) -> Optional[int]:
        """The action position of the first step of own state ``i`` (last level) that
        changes it; None when it has none or is not here."""
        for j, steps in self.last:
            if j == i:
                return next((pos for pos, b in enumerate(steps) if not b & 1), None)
        return None

    # -- the graph's share (progress and liveness) ---------------------------------------

    def _edge(self, order: int, nid: int, key: int) -> None:
        j = self.index.get(key)
        if j is None:
            self.unresolved.append((order, nid, key))
            return
        self.e_src.append(order >> POS_BITS)
        self.e_pos.append(order & POS_MASK)
        self.e_kind.append(nid)
        self.e_dst.append(j)

    def _resolve(self) -> None:
        todo, self.unresolved = self.unresolved, []
        for order, nid, key in todo:
            self._edge(order, nid, key)

    def edges(self):
        """This partition's edges (into its own states) once the search is done: (src,
        dst, action position, action name id) as bytes of int32, int32, uint16, uint8."""
        self._resolve()
        if self.unresolved:
            raise RuntimeError("cluster: an edge into a state that was never numbered")
        return self.e_src.tobytes(), self.e_dst.tobytes(), self.e_pos.tobytes(), bytes(self.e_kind)

    def _own(self, indices=None):
        """(global index, state, frees) of this partition's states (all, or ``indices``)."""
        decode = self.codec.decode
        if indices is None:
            for i, key, f in zip(self.own_idx, self.own_keys, self.own_frees):
                yield i, decode(key), f
            return
        for i in indices:
            k = bisect_left(self.own_idx, i)
            if k == len(self.own_idx) or self.own_idx[k] != i:
                raise RuntimeError(f"cluster: state {i} is not on partition {self.part}")
            yield i, decode(self.own_keys[k]), self.own_frees[k]

    def obligations(self, name: str):
        return state_graph.opened_by(self.m, resolve_property(name), ((i, s) for i, s, _f in self._own()))

    def met(self, name: str, keys):
        return state_graph.met_by(self.m, resolve_property(name), keys, self._own())

    def fair_steps(self, indices):
        """{index: [(action position, fair unit), ...]}: the targets are the driver's."""
        return {i: [(pos, u) for pos, u, _t in state_graph.fair_steps_of(self.m, s)] for i, s, _f in self._own(indices)}

    def states(self, indices):
        """{index: wire state}."""
        return {i: _wire_of(s) for i, s, _f in self._own(indices)}

    @staticmethod
    def _hit(hits, name, h, max_hits) -> None:
        lst = hits.setdefault(name, [])
        if len(lst) < max_hits:
            lst.append(h)

    def tally(self, upto: Optional[int], upto_pos: int = POS_MASK):
        """(transitions, {name id: [enabled, taken]}) of the last level's steps up to
        action position ``upto_pos`` of state ``upto`` (all when None)."""
        n, cov = 0, {}
        for i, steps in self.last:
            if upto is not None and i >= upto:
                if i > upto:
                    continue
                steps = steps[: upto_pos + 1]
            n += len(steps)
            for b in steps:
                c = cov.setdefault(b >> 1, [0, 0])
                c[0] += 1
                c[1] += 0 if b & 1 else 1
        return n, cov


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


def _state(wire) -> State:
    blobs, stores, hung, halted = wire
    return State(tuple(from_plain(pickle.loads(b)) for b in blobs), tuple(stores), hung, halted)


def _wire_of(s: State):
    return tuple(pickle.dumps(to_plain(rs), protocol=4) for rs in s.ranks), s.store, s.hung, s.halted


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
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
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


def symmetry_for(m, on: bool):
    """The model's Symmetry when ``on`` and one applies (tiercheck.models.symmetry), else None."""
    if not on:
        return None
    from tiercheck.models import symmetry

    return symmetry.for_model(m)[0]


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
        for buckets, *_rest in out:
            for q, b in enumerate(buckets):
                incoming[q].extend(b)
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
        res.symmetry = sym.summary(run.total, sum(_each(parts, "represented")))
        if sym.ranks:
            diverged = min((d for d in _each(parts, "diverged") if d is not None), default=None)
        # Traces under symmetry are re-executed into each recorded orbit: every state
        # on a hit's path is needed, not only its last.
        path = {j for hits in tr.hits.values() for h in hits for j in tr.path_to(h.index)}
        tr.keys.update(_states_of(parts, run.owner, sorted(path - set(tr.keys))))
    res.violations = verdicts.safety_violations(m, tr, safety, canon, make_violation)
    if graph and res.complete and sym is None:
        g = ClusterGraph(m, parts, tr, run.level_start, run.owner, sorted(run.unexpanded))
        for p in graph:
            found = verdicts.graph_violations(m, g, p, run.max_violations, make_violation, make_lasso)
            if found:
                res.violations[p.name] = found
    res.verdicts = verdicts.decide(props, res.violations, res.complete, sym is not None, diverged)
    if diverged is not None:
        res.notes.append(verdicts.diverged_note(diverged))


def _each(parts, method: str, *args) -> list:
    """Every partition's answer to ``method(*args)``."""
    return parts.call(method, [args] * len(parts.parts))


def _by_owner(parts, owner, method: str, indices) -> dict:
    """The answers ({index: ...}) of the partitions holding states ``indices``."""
    idx = np.asarray(indices, dtype=np.int64)
    who = np.frombuffer(bytes(owner), dtype=np.uint8)[idx] if len(idx) else np.zeros(0, np.uint8)
    out: dict = {}
    for d in parts.call(method, [(idx[who == q].tolist(),) for q in range(len(parts.parts))]):
        out.update(d)
    return out


def _states_of(parts, owner, indices) -> Dict[int, State]:
    return {i: _state(w) for i, w in _by_owner(parts, owner, "states", indices).items()}


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
        incoming[q].append((len(init), _wire_of(s), -1))
        init.append(s)
    return init, incoming


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
            lst.append(Hit(name, msg, i, None if pos < 0 else pos, None if succ is None else _state(succ)))
            tr.keys[i] = _state(wire)
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


class ClusterGraph:
    """The explored graph of a cluster run, as progress and liveness read it
    (tiercheck.models.state_graph): the edges gathered on the driver, the states left on
    their partitions, which answer the per-state questions in batches."""

    def __init__(self, m, parts, tr: _Trace, level_start, owner: bytearray, unexpanded):
        self.m, self.parts, self.tr = m, parts, tr
        self.n = n = len(tr.parent)
        self.owner = owner
        self.depth = state_graph.depths(level_start, n)
        self.expanded = np.ones(n, dtype=bool)
        self.expanded[np.asarray(unexpanded, dtype=np.int64)] = False
        shares = _each(parts, "edges")
        src, dst, pos, kind = (
            np.concatenate([np.frombuffer(e[f], dtype=t) for e in shares])
            for f, t in enumerate((np.int32, np.int32, np.uint16, np.uint8))
        )
        # The one-process search's edge order: by source state, then action position.
        order = np.lexsort((pos, src))
        self.src, self.dst = src[order].astype(np.int64), dst[order].astype(np.int64)
        self.pos, self.kind = pos[order], kind[order]
        self.first = np.searchsorted(self.src, np.arange(n + 1))  # edges of state i

    def obligations(self, prop):
        return state_graph.by_state(sorted(pair for lst in _each(self.parts, "obligations", prop.name) for pair in lst))

    def met(self, prop, keys):
        merged: Dict[object, List[int]] = {key: [] for key in keys}
        for d in _each(self.parts, "met", prop.name, list(keys)):
            for key, idx in d.items():
                merged[key].extend(idx)
        return state_graph.masks(self.n, merged)

    def _targets(self, i: int) -> Dict[int, int]:
        a, b = self.first[i], self.first[i + 1]
        return dict(zip(self.pos[a:b].tolist(), self.dst[a:b].tolist()))

    def fair_steps(self, indices):
        out = {}
        for i, steps in _by_owner(self.parts, self.owner, "fair_steps", indices).items():
            to = self._targets(i)
            out[i] = [(u, to.get(pos)) for pos, u in steps]
        return out

    def rebuild(self, i: int):
        if i not in self.tr.keys:
            self.tr.keys.update(_states_of(self.parts, self.owner, [i]))
        return replay.rebuild(self.m, self.tr, i)

    def step_to(self, s, i: int, j: int):
        """The first action of state ``i`` (concrete ``s``) that steps to state ``j``: the
        lowest action position among the edges i -> j."""
        pos = min(p for p, d in self._targets(i).items() if d == j)
        a = self.m.actions(s)[pos]
        return a, self.m.next_state(s, a)


def run(model, properties: List[str], address: str, max_violations: int = 1,
        max_states: Optional[int] = None, time_limit: Optional[float] = None, symmetry: bool = False) -> Result:
    """``tiercheck check --cluster ADDRESS``: ``local:N`` starts N worker processes here,
    anything else is a Dask scheduler address (tcp://host:8786)."""
    parts = DaskParts(model.cfg, list(properties), address, symmetry)
    try:
        return check(model, properties, parts, max_violations, max_states, time_limit)
    finally:
        parts.close()
