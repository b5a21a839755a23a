"""Compact, exact encoding of spec states as single ints.

A global state is a tuple of rank states plus a store bitmask per rank and two flag
strings. The same rank state recurs in very many global states (other ranks and the store
vary independently), so rank states are interned to dense ids ("gids") and a global state
becomes one packed int:

    key = flags_gid | store[0] << F | ... | store[R-1] << ... | rank_gid[0] << ... | ...

The packing is a bijection (not a hash), so the visited set never merges distinct states.
Interning also makes every decoded state hold *canonical* rank objects, which keeps the
spec's per-rank memo caches on their identity fast path.

Gids are assigned by one owner (the exploring process), in the order values are first
met. Worker processes (tiercheck.models.parallel) hold replicas of the tables and name a
value they have not been told about by a negative local reference, which the owner
resolves; a key holding such a reference is a tuple ("unresolved") instead of an int.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from tiercheck.spec.state import Node, RankState, State, StorageAck

RANK_BITS = 32  # up to 4e9 distinct rank states
FLAG_BITS = 16  # (hung, halted) pairs: a handful per model

_ALIAS_LIMIT = 200_000


class Table:
    """Exact interning of hashable values to dense ints (0, 1, 2, ...)."""

    def __init__(self, limit_bits: int = RANK_BITS):
        self.values: List[Any] = []  # gid -> canonical object (kept alive here)
        self.ids: dict = {}  # value -> gid
        # id(obj) -> gid for canonical objects: valid because self.values keeps them
        # alive, so no other object can have the same address.
        self.ident: dict = {}
        # id(obj) -> (obj, gid) for equal non-canonical objects met repeatedly (e.g. the
        # results the spec's memo caches hand out); bounded, holds its objects alive.
        self.alias: dict = {}
        self.limit = 1 << limit_bits

    def __len__(self) -> int:
        return len(self.values)

    def lookup(self, v):
        """The gid of ``v`` or None; never adds."""
        g = self.ident.get(id(v))
        if g is not None:
            return g
        hit = self.alias.get(id(v))
        if hit is not None:
            return hit[1]
        g = self.ids.get(v)
        if g is not None:
            if len(self.alias) >= _ALIAS_LIMIT:
                self.alias.clear()
            self.alias[id(v)] = (v, g)
        return g

    def add(self, v) -> int:
        g = self.lookup(v)
        if g is None:
            g = self.adopt(v)
        return g

    def adopt(self, v) -> int:
        """Register a value known to be new; it becomes the canonical object."""
        g = len(self.values)
        if g >= self.limit:
            raise OverflowError(f"more than {self.limit} distinct values to intern")
        self.values.append(v)
        self.ids[v] = g
        self.ident[id(v)] = g
        return g


class Layout:
    """Bit positions of the fields of a packed key (pure arithmetic, no tables)."""

    def __init__(self, ranks: int, pages: int):
        self.ranks = ranks
        self.pages = max(pages, 1)
        self.store_shift = [FLAG_BITS + r * self.pages for r in range(ranks)]
        base = FLAG_BITS + ranks * self.pages
        self.rank_shift = [base + r * RANK_BITS for r in range(ranks)]
        self.store_mask = (1 << self.pages) - 1
        self.flag_mask = (1 << FLAG_BITS) - 1
        self.gid_mask = (1 << RANK_BITS) - 1
        self.fields = list(zip(self.rank_shift, self.store_shift))

    def pack(self, rank_gids, stores, flag_gid: int) -> int:
        key = flag_gid
        for (rsh, ssh), g, st in zip(self.fields, rank_gids, stores):
            key |= g << rsh | st << ssh
        return key

    def field_masks(self) -> dict:
        """State field -> the key bits that hold it (hung and halted share the flag
        pair's gid). tiercheck.models.footprint memoises on these."""
        ranks = 0
        for sh in self.rank_shift:
            ranks |= self.gid_mask << sh
        store = 0
        for sh in self.store_shift:
            store |= self.store_mask << sh
        return {"ranks": ranks, "store": store, "hung": self.flag_mask, "halted": self.flag_mask}

    def element_masks(self) -> list:
        """The key bits of each rank's state, then of each rank's store mask, then of the
        flag pair (hung, halted): tiercheck.models.element_memo memoises on these."""
        ranks = [self.gid_mask << sh for sh in self.rank_shift]
        stores = [self.store_mask << sh for sh in self.store_shift]
        return ranks + stores + [self.flag_mask]

    def unpack(self, key: int) -> Tuple[Tuple[int, ...], Tuple[int, ...], int]:
        sm, gm = self.store_mask, self.gid_mask
        gids = tuple([(key >> sh) & gm for sh in self.rank_shift])
        stores = tuple([(key >> sh) & sm for sh in self.store_shift])
        return gids, stores, key & self.flag_mask


class Codec:
    """Encode/decode global states against a pair of tables (ranks, flags); the owner's
    codec adds new values, a worker's (``WorkerCodec``) refers to them locally."""

    def __init__(self, model, ranks: Table = None, flags: Table = None):
        self.model = model
        self.layout = Layout(model.cfg.ranks, model.pages.count)
        self.ranks = ranks if ranks is not None else Table()
        self.flags = flags if flags is not None else Table(FLAG_BITS)
        if not len(self.flags):
            self.flags.add(("", ""))  # gid 0: running normally

    # -- the owner side ---------------------------------------------------------------

    def rank_ref(self, rs) -> int:
        return self.ranks.add(rs)

    def flag_ref(self, pair) -> int:
        return self.flags.add(pair)

    def rank_value(self, ref):
        return self.ranks.values[ref]

    def make_key(self, gids, stores, flag):
        return self.layout.pack(gids, stores, flag)

    # -- shared ------------------------------------------------------------------------

    def encode(self, s: State):
        """The key of a state (interning what is new)."""
        return self.encode_canonical(s)[0]

    def encode_canonical(self, s: State):
        """(key, the same state rebuilt from interned rank objects)."""
        gids = [self.rank_ref(rs) for rs in s.ranks]
        flag = self.flag_ref((s.hung, s.halted)) if (s.hung or s.halted) else 0
        canon = State(tuple([self.rank_value(g) for g in gids]), s.store, s.hung, s.halted)
        return self.make_key(gids, s.store, flag), canon

    def encode_step(self, t: State, s: State, sgids):
        """``encode_canonical`` of a successor ``t`` of ``s`` (whose rank gids are
        ``sgids``): ranks the step left untouched keep their gid without a lookup, and
        interned objects are found by identity."""
        ident = self.ranks.ident
        gids = []
        for rt, rs, g in zip(t.ranks, s.ranks, sgids):
            if rt is not rs:
                g = ident.get(id(rt))
                if g is None:
                    g = self.rank_ref(rt)
            gids.append(g)
        flag = self.flag_ref((t.hung, t.halted)) if (t.hung or t.halted) else 0
        rv = self.rank_value
        canon = State(tuple([rv(g) for g in gids]), t.store, t.hung, t.halted)
        return self.make_key(gids, t.store, flag), canon

    def decode(self, key: int) -> State:
        return self.decode_gids(key)[0]

    def decode_gids(self, key: int):
        gids, stores, flag = self.layout.unpack(key)
        values = self.ranks.values
        hung, halted = self.flags.values[flag]
        return State(tuple([values[g] for g in gids]), stores, hung, halted), gids


class WorkerCodec(Codec):
    """A worker's replica: the owner's tables (synced by the owner, in gid order) plus
    values met locally since the last sync, referred to as -1, -2, ..."""

    def __init__(self, model):
        super().__init__(model)
        self.local_ranks: dict = {}  # value -> local ref (negative)
        self.local_rank_values: list = []
        self.local_flags: dict = {}
        self.local_flag_values: list = []

    def rank_ref(self, rs):
        g = self.ranks.lookup(rs)
        if g is None:
            g = self.local_ranks.get(rs)
            if g is None:
                self.local_rank_values.append(rs)
                g = self.local_ranks[rs] = -len(self.local_rank_values)
        return g

    def flag_ref(self, pair):
        g = self.flags.lookup(pair)
        if g is None:
            g = self.local_flags.get(pair)
            if g is None:
                self.local_flag_values.append(pair)
                g = self.local_flags[pair] = -len(self.local_flag_values)
        return g

    def rank_value(self, ref):
        return self.ranks.values[ref] if ref >= 0 else self.local_rank_values[-ref - 1]

    def make_key(self, gids, stores, flag):
        if flag < 0 or min(gids) < 0:
            return (tuple(gids), tuple(stores), flag)
        return self.layout.pack(gids, stores, flag)

    def take_local(self):
        """The values met since the last call, as plain tuples, and forget them."""
        ranks = [to_plain(v) for v in self.local_rank_values]
        flags = list(self.local_flag_values)
        return ranks, flags

    def sync(self, ranks_plain, flags) -> None:
        """Append the owner's new values (gid order). A value this worker met locally
        keeps its local object, so its memo entries stay on the identity path."""
        for p in ranks_plain:
            v = from_plain(p)
            ref = self.local_ranks.get(v)
            self.ranks.adopt(self.local_rank_values[-ref - 1] if ref is not None else v)
        for pair in flags:
            self.flags.adopt(tuple(pair))

    def reset_local(self) -> None:
        self.local_ranks.clear()
        self.local_rank_values.clear()
        self.local_flags.clear()
        self.local_flag_values.clear()


# --- fast transport of rank states between processes ----------------------------------
# Pickling namedtuples goes through Python-level __reduce__; plain nested tuples pickle
# in C. The round trip is exact (field values, bools included).


_NODES = RankState._fields.index("nodes")
_SDONE = RankState._fields.index("sdone")


def to_plain(rs: RankState):
    vals = list(rs)
    vals[_NODES] = tuple([None if n is None else tuple(n) for n in rs.nodes])
    vals[_SDONE] = tuple([tuple(a) for a in rs.sdone])
    return tuple(vals)


def from_plain(p) -> RankState:
    vals = list(p)
    vals[_NODES] = tuple([None if n is None else Node(*n) for n in p[_NODES]])
    vals[_SDONE] = tuple([StorageAck(*a) for a in p[_SDONE]])
    return RankState(*vals)
