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
met, so they are deterministic; worker processes hold replicas of the tables and name
values they have not been told about by a local reference (see tiercheck.models.parallel).
"""

from __future__ import annotations

from typing import Any, List, Tuple

from tiercheck.spec.state import State

RANK_BITS = 32  # up to 4e9 distinct rank states
FLAG_BITS = 16  # (hung, halted) pairs: a handful per model

_ALIAS_LIMIT = 200_000


class Table:
    """Exact interning of hashable values to dense ints (0, 1, 2, ...)."""

    def __init__(self):
        self.values: List[Any] = []  # gid -> canonical object (kept alive here)
        self.ids: dict = {}  # value -> gid
        # id(obj) -> gid for canonical objects: valid because self.values keeps them
        # alive, so no other object can have the same address.
        self.ident: dict = {}
        # id(obj) -> (obj, gid) for equal non-canonical objects met repeatedly (e.g. the
        # results the spec's memo caches hand out); bounded, holds its objects alive.
        self.alias: dict = {}

    def __len__(self) -> int:
        return len(self.values)

    def lookup(self, v):
        """The gid of ``v`` or None; never adds."""
        g = self.ident.get(id(v))
        if g is not None:
            return g
        hit = self.alias.get(id(v))
        if hit is not None and hit[0] is v:
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
            g = len(self.values)
            self.values.append(v)
            self.ids[v] = g
            self.ident[id(v)] = g
        return g

    def adopt(self, v) -> int:
        """Register a value that is known to be new (the owner's merge step)."""
        g = len(self.values)
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

    def pack(self, rank_gids, stores, flag_gid: int) -> int:
        key = flag_gid
        for r in range(self.ranks):
            key |= stores[r] << self.store_shift[r] | rank_gids[r] << self.rank_shift[r]
        return key

    def unpack(self, key: int) -> Tuple[Tuple[int, ...], Tuple[int, ...], int]:
        flag = key & ((1 << FLAG_BITS) - 1)
        stores = tuple((key >> sh) & self.store_mask for sh in self.store_shift)
        mask = (1 << RANK_BITS) - 1
        gids = tuple((key >> sh) & mask for sh in self.rank_shift)
        return gids, stores, flag


class Codec:
    """Encode/decode global states against a pair of tables (ranks, flags)."""

    def __init__(self, model, ranks: Table = None, flags: Table = None):
        self.model = model
        self.layout = Layout(model.cfg.ranks, model.pages.count)
        self.ranks = ranks if ranks is not None else Table()
        self.flags = flags if flags is not None else Table()
        if not len(self.flags):
            self.flags.add(("", ""))  # gid 0: running normally

    def encode(self, s: State) -> int:
        """Pack a state, interning any new rank state or flag pair (owner side)."""
        ranks = self.ranks
        gids = [ranks.add(rs) for rs in s.ranks]
        flag = 0 if not (s.hung or s.halted) else self.flags.add((s.hung, s.halted))
        self._check_store(s.store)
        return self.layout.pack(gids, s.store, flag)

    def decode(self, key: int) -> State:
        gids, stores, flag = self.layout.unpack(key)
        values = self.ranks.values
        hung, halted = self.flags.values[flag]
        return State(tuple(values[g] for g in gids), stores, hung, halted)

    def _check_store(self, store) -> None:
        lim = self.layout.store_mask
        for x in store:
            if x < 0 or x > lim:
                raise ValueError(f"store mask {x} outside the page universe")
