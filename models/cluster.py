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

Progress and liveness properties need the whole explored graph in one process and are
not checked here (their verdict says so). Needs the ``cluster`` extra (dask distributed).
"""

from __future__ import annotations

import pickle
import time
import zlib
from array import array
from typing import Dict, List, Optional

from tiercheck.errors import UserError
from tiercheck.models import verdicts
from tiercheck.models.checker import Result, Violation, resolve_property
from tiercheck.models.codec import Codec, from_plain, to_plain
from tiercheck.models.expand import Expander
from tiercheck.models.search import Hit, Search
from tiercheck.spec.model import Model
from tiercheck.spec.state import State

NOT_CHECKED = "not checked (cluster mode: needs the whole graph in one process)"
POS_BITS = 16  # action positions per state (the single-process search keeps them as 'H')
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

    def __init__(self, cfg, props, part: int, parts: int):
        self.m = Model(cfg)
        self.part, self.parts = part, parts
        self.codec = Codec(self.m)
        self.expander = Expander(self.m, [resolve_property(n) for n in props], self.codec)
        self.visited = set()  # local packed keys (this process's codec)
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
        """Take the (order, wire state) pairs this partition owns; return the order keys
        of its new states (in the order ``expand`` will number them)."""
        pending, visited = self.pending, self.visited
        for order, wire in incoming:
            k = self._key(wire)
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
        buckets = [[] for _ in range(self.parts)]
        hits: Dict[str, list] = {}
        unexpanded, self.last = [], []
        expand = self.expander.expand
        for i, key in frontier:
            viols, expanded, steps, _frees = expand(key, open_props)
            for name, msg in viols:
                self._hit(hits, name, (i, -1, msg, key), max_hits)
            if not expanded:
                unexpanded.append(i)
                continue
            self.last.append((i, bytes([s[1] << 1 | s[3] for s in steps])))
            base = i << POS_BITS
            for pos, _name, tkey, stutter, tviols in steps:
                if stutter:
                    continue
                for name, msg in tviols:
                    self._hit(hits, name, (i, pos, msg, key), max_hits)
                wire, q = self._wire(tkey)
                buckets[q].append((base | pos, wire))
        for lst in hits.values():
            for k, h in enumerate(lst):
                lst[k] = h[:3] + (self._wire(h[3])[0],)
        transitions, coverage = self.tally(None)
        return buckets, hits, unexpanded, transitions, coverage

    @staticmethod
    def _hit(hits, name, h, max_hits) -> None:
        lst = hits.setdefault(name, [])
        if len(lst) < max_hits:
            lst.append(h)

    def tally(self, upto: Optional[int]):
        """(transitions, {name id: [enabled, taken]}) of the last level's states up to
        index ``upto`` (all when None)."""
        n, cov = 0, {}
        for i, steps in self.last:
            if upto is not None and i > upto:
                continue
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

    def __init__(self, cfg, props, parts: int):
        self.parts = [Partition(cfg, props, q, parts) for q in range(parts)]

    def call(self, method: str, args_per_part) -> list:
        return [getattr(p, method)(*a) for p, a in zip(self.parts, args_per_part)]

    def close(self) -> None:
        pass


class DaskParts:
    """One Partition actor per worker of a Dask cluster (``local:N`` starts one here)."""

    def __init__(self, cfg, props, address: str):
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
            self.client.submit(Partition, cfg, props, q, len(workers), actor=True, workers=[w], allow_other_workers=False)
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


def check(model, properties: List[str], parts, max_violations: int = 1) -> Result:
    """Exhaustive BFS of ``model`` on ``parts`` (LocalParts / DaskParts); the Result is
    the single-process Checker's for the safety properties."""
    props = [resolve_property(n) for n in properties]
    safety = [p for p in props if p.kind in ("invariant", "transition")]
    graph = [p for p in props if p not in safety]
    m = model
    names = m.action_names()
    res = Result(workers=len(parts.parts))
    tr = _Trace()
    # Graph properties stay open, as in the one-process search: it never stops early then.
    open_props = {p.name for p in safety} | {p.name for p in graph}
    closed_at: Optional[int] = None  # index where the last open property got its hits
    t0 = time.monotonic()
    n_parts = len(parts.parts)

    # Level 0: the initial states, in order (their order key is their index).
    incoming = [[] for _ in range(n_parts)]
    seen = set()
    for s in m.init_states():
        if s in seen:
            continue
        seen.add(s)
        q = part_of([rank_digest(rs) for rs in s.ranks], s.store, s.hung, s.halted, n_parts)
        incoming[q].append((len(seen) - 1, _wire_of(s)))
    orders = parts.call("merge", [(inc,) for inc in incoming])
    transitions, cov, depth, level, stop_reason = 0, {}, 0, 0, ""
    total = 0
    while True:
        flat = sorted((o, q, j) for q, lst in enumerate(orders) for j, o in enumerate(lst))
        if not flat:
            break
        numbers = [[0] * len(lst) for lst in orders]
        lo = total
        for k, (o, q, j) in enumerate(flat):
            numbers[q][j] = lo + k
            if level == 0:
                tr.parent.append(-1)
                tr.via.append(0)
            else:
                tr.parent.append(o >> POS_BITS)
                tr.via.append(o & ((1 << POS_BITS) - 1))
        total += len(flat)
        depth = level
        open_now = set(open_props)
        out = parts.call("expand", [(numbers[q], open_now, max_violations) for q in range(n_parts)])
        level_hits = sorted(
            (h[0], h[1], name, h[2], h[3]) for _b, hits, _u, _t, _c in out for name, lst in hits.items() for h in lst
        )
        for i, pos, name, msg, wire in level_hits:
            if name not in open_props:
                continue
            lst = tr.hits.setdefault(name, [])
            lst.append(Hit(name, msg, i, None if pos < 0 else pos))
            tr.keys[i] = _state(wire)
            if len(lst) >= max_violations:
                open_props.discard(name)
                if not open_props and closed_at is None:
                    closed_at = i
        stop_at = None
        if closed_at is not None:
            # The one-process search stops after the first expanded state from there on.
            unexpanded = {i for _b, _h, u, _t, _c in out for i in u}
            stop_at = next((i for i in range(max(closed_at, lo), total) if i not in unexpanded), None)
        if stop_at is not None:
            tallies = parts.call("tally", [(stop_at,)] * n_parts)
        else:
            tallies = [(t, c) for _b, _h, _u, t, c in out]
        for t, c in tallies:
            transitions += t
            for nid, (e, k) in c.items():
                cc = cov.setdefault(nid, [0, 0])
                cc[0] += e
                cc[1] += k
        incoming = [[] for _ in range(n_parts)]
        for buckets, *_rest in out:
            for q, b in enumerate(buckets):
                incoming[q].extend(b)
        orders = parts.call("merge", [(inc,) for inc in incoming])
        level += 1
        if stop_at is not None:
            cut = (stop_at + 1) << POS_BITS
            found = sum(1 for lst in orders for o in lst if o < cut)
            total += found
            depth = level if found else level - 1
            stop_reason = "every property already violated"
            break
    res.seconds = time.monotonic() - t0
    res.distinct, res.transitions, res.depth = total, transitions, depth
    res.complete, res.stop_reason = not stop_reason, stop_reason
    res.coverage = {names[nid]: c for nid, c in sorted(cov.items())}
    tr.keys.update({i: s for i, s in enumerate(m.init_states())})
    res.violations = verdicts.safety_violations(m, tr, safety, None, _violation)
    res.verdicts = verdicts.decide(props, res.violations, res.complete, False, None)
    for p in graph:
        res.verdicts[p.name] = NOT_CHECKED
    if graph:
        res.notes.append(f"cluster mode: {', '.join(p.name for p in graph)} not checked (progress/liveness need the whole graph)")
    return res


def _violation(p, message, states, actions) -> Violation:
    return Violation(p.name, message, states, actions, kind=p.kind)


def run(model, properties: List[str], address: str, max_violations: int = 1) -> Result:
    """``tiercheck check --cluster ADDRESS``: ``local:N`` starts N worker processes here,
    anything else is a Dask scheduler address (tcp://host:8786)."""
    parts = DaskParts(model.cfg, list(properties), address)
    try:
        return check(model, properties, parts, max_violations)
    finally:
        parts.close()
