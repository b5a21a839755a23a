"""One share of a cluster search's state space (tiercheck.models.cluster): a Dask actor
holding the visited set, the frontier, and what the driver asks about afterwards, of the
states whose hash falls on it.

A partition expands states with the one-process engine (tiercheck.models.expand through
the default ``memo`` engine), merges the successors it owns, and, for progress and
liveness (tiercheck.models.cluster_graph), keeps the edges into its own states and
answers per-state questions by global state index.
"""

from __future__ import annotations

import pickle
import zlib
from array import array
from bisect import bisect_left
from typing import Dict, List, Optional

from tiercheck.models import state_graph, verdicts
from tiercheck.models.checker import ENGINES, resolve_property
from tiercheck.models.codec import Codec, from_plain, to_plain
from tiercheck.spec.model import Model
from tiercheck.spec.state import State

GRAPH_KINDS = ("progress", "liveness")
POS_BITS = 16  # action positions per state (the single-process search keeps them as 'H')
POS_MASK = (1 << POS_BITS) - 1


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


def symmetry_for(m, on: bool):
    """The model's Symmetry when ``on`` and one applies (tiercheck.models.symmetry), else None."""
    if not on:
        return None
    from tiercheck.models import symmetry

    return symmetry.for_model(m)[0]

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

    def merge(self, batches) -> List[int]:
        """Take the (order, wire state, action name id) triples this partition owns (name
        id -1: an initial state), in pickled batches; return the order keys of its new
        states (in the order ``expand`` will number them)."""
        pending, visited = self.pending, self.visited
        for order, wire, nid in (t for batch in batches for t in pickle.loads(batch)):
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
        coverage): per destination partition its (order, wire, name id) successors as one
        pickled batch (the driver forwards it unread; Dask then ships bytes instead of
        walking a list of tuples); per property its first ``max_hits`` (index, pos,
        message, wire state, wire successor) here."""
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
        wired: Dict[int, tuple] = {}  # successor key -> (wire, partition), this level
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
                w = wired.get(tkey)
                if w is None:
                    w = wired[tkey] = self._wire(tkey)
                buckets[w[1]].append((base | pos, w[0], nid))
        for lst in hits.values():
            for k, h in enumerate(lst):
                lst[k] = h[:3] + (self._wire(h[3])[0], None if h[4] is None else self._wire(h[4])[0])
        transitions, coverage = self.tally(None)
        batches = [pickle.dumps(b, protocol=pickle.HIGHEST_PROTOCOL) for b in buckets]
        return batches, hits, unexpanded, transitions, coverage

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
        return {i: wire_of(s) for i, s, _f in self._own(indices)}

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

def state_of(wire) -> State:
    blobs, stores, hung, halted = wire
    return State(tuple(from_plain(pickle.loads(b)) for b in blobs), tuple(stores), hung, halted)


def wire_of(s: State):
    return tuple(pickle.dumps(to_plain(rs), protocol=4) for rs in s.ranks), s.store, s.hung, s.halted
