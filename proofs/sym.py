"""Small helpers for writing the spec's functions over z3 terms.

The encoding mirrors the explicit spec function by function, so it needs the same handful
of operations on values that may be concrete (Python ints/bools, or z3 literals) or
symbolic: a conditional, indexing a per-page tuple with a symbolic page, updating one
entry, and bounded lists with a symbolic length (the spec's queues). Python-level
constant folding keeps formulas small where an index or a condition is known.
"""

from __future__ import annotations

from typing import Sequence, Tuple

import z3

TRUE = z3.BoolVal(True)
FALSE = z3.BoolVal(False)


def const(x):
    """A z3 term for a Python value (ints and bools); z3 terms pass through."""
    if isinstance(x, bool):
        return z3.BoolVal(x)
    if isinstance(x, int):
        return z3.IntVal(x)
    return x


def py(x):
    """The Python value of ``x`` when it is known at encoding time, else None."""
    if isinstance(x, (bool, int)):
        return x
    if z3.is_true(x):
        return True
    if z3.is_false(x):
        return False
    if z3.is_int_value(x):
        return x.as_long()
    return None


def ite(c, a, b):
    """If-then-else that folds a known condition and identical branches."""
    k = py(c)
    if k is True:
        return a
    if k is False:
        return b
    if a is b:
        return a
    if isinstance(a, tuple):
        return tuple(ite(c, x, y) for x, y in zip(a, b))
    return z3.If(c, const(a), const(b))


def and_(*xs):
    out = []
    for x in xs:
        k = py(x)
        if k is False:
            return FALSE
        if k is not True:
            out.append(x)
    if not out:
        return TRUE
    return out[0] if len(out) == 1 else z3.And(*out)


def or_(*xs):
    out = []
    for x in xs:
        k = py(x)
        if k is True:
            return TRUE
        if k is not False:
            out.append(x)
    if not out:
        return FALSE
    return out[0] if len(out) == 1 else z3.Or(*out)


def not_(x):
    k = py(x)
    if k is not None:
        return const(not k)
    return z3.Not(x)


def implies(a, b):
    return or_(not_(a), b)


def eq(a, b):
    ka, kb = py(a), py(b)
    if ka is not None and kb is not None:
        return const(ka == kb)
    if isinstance(a, tuple):
        return and_(*(eq(x, y) for x, y in zip(a, b)))
    return const(a) == const(b)


def ne(a, b):
    return not_(eq(a, b))


def sum_(xs):
    xs = [x for x in xs if py(x) != 0]
    if not xs:
        return z3.IntVal(0)
    total = const(xs[0])
    for x in xs[1:]:
        total = total + x
    return total


def count(conds):
    return sum_([ite(c, 1, 0) for c in conds])


def min2(a, b):
    return ite(a <= b if not _both_py(a, b) else py(a) <= py(b), a, b)


def max2(a, b):
    return ite(a >= b if not _both_py(a, b) else py(a) >= py(b), a, b)


def _both_py(a, b):
    return py(a) is not None and py(b) is not None


def sel(arr: Sequence, idx, default=None):
    """``arr[idx]`` for a possibly symbolic index (out of range: ``default`` or the last)."""
    k = py(idx)
    if k is not None:
        if 0 <= k < len(arr):
            return arr[k]
        return default if default is not None else arr[-1]
    out = default if default is not None else arr[-1]
    for i in range(len(arr) - 1 if default is None else len(arr), -1, -1):
        if i < len(arr):
            out = ite(idx == i, arr[i], out)
    return out


def upd(arr: Tuple, idx, val, cond=True) -> Tuple:
    """``arr`` with entry ``idx`` set to ``val`` when ``cond`` holds."""
    k = py(idx)
    if k is not None:
        if not 0 <= k < len(arr):
            return arr
        return tuple(ite(cond, val, x) if i == k else x for i, x in enumerate(arr))
    return tuple(ite(and_(cond, idx == i), val, x) for i, x in enumerate(arr))


class SymList:
    """A list with a symbolic length and at most ``cap`` items (a spec queue).

    Items are tuples of terms (all the same arity). Entries at positions >= length are
    don't-cares. An append to a full list is recorded in ``overflow`` (a condition the
    proofs show false): the bound is a proof obligation, never an assumption.
    """

    __slots__ = ("cap", "n", "items", "overflow")

    def __init__(self, cap: int, n, items, overflow=FALSE):
        self.cap = cap
        self.n = n
        self.items = tuple(items)
        self.overflow = overflow

    @staticmethod
    def of(cap: int, values, arity: int, filler=0):
        values = [tuple(v) if isinstance(v, tuple) else (v,) for v in values]
        if len(values) > cap:
            raise ValueError(f"{len(values)} items do not fit a list of {cap}")
        pad = [tuple(const(filler) for _ in range(arity))] * (cap - len(values))
        return SymList(cap, z3.IntVal(len(values)), [tuple(const(x) for x in v) for v in values] + pad)

    def valid(self, i: int):
        return const(i) < self.n if py(self.n) is None else const(i < py(self.n))

    def get(self, i: int):
        return self.items[i]

    def at(self, idx):
        """Item at a symbolic index (tuple)."""
        return tuple(sel([it[j] for it in self.items], idx) for j in range(len(self.items[0])))

    def append(self, item, cond=True) -> "SymList":
        item = tuple(const(x) for x in (item if isinstance(item, tuple) else (item,)))
        items = tuple(ite(and_(cond, eq(self.n, i)), item, it) for i, it in enumerate(self.items))
        full = and_(cond, self.n >= self.cap) if py(self.n) is None else and_(cond, const(py(self.n) >= self.cap))
        return SymList(self.cap, ite(cond, self.n + 1, self.n), items, or_(self.overflow, full))

    def drop(self, k) -> "SymList":
        """Remove the first ``k`` items (0 <= k <= length)."""
        kk = py(k)
        if kk is not None:
            items = self.items[kk:] + (self.items[-1],) * min(kk, self.cap)
            return SymList(self.cap, self.n - kk, items[: self.cap], self.overflow)
        items = []
        for i in range(self.cap):
            out = self.items[i]
            for j in range(1, self.cap - i):
                out = ite(eq(k, j), self.items[i + j], out)
            items.append(out)
        return SymList(self.cap, self.n - k, items, self.overflow)

    def remove_at(self, i: int, cond=True) -> "SymList":
        items = list(self.items)
        shifted = items[:i] + items[i + 1 :] + [items[-1]]
        new = tuple(ite(cond, s, o) for s, o in zip(shifted, items))
        return SymList(self.cap, ite(cond, self.n - 1, self.n), new, self.overflow)

    def remove_at_sym(self, idx) -> "SymList":
        """Remove the item at a symbolic index (0 <= idx < length)."""
        items = []
        for j in range(self.cap):
            nxt = self.items[j + 1] if j + 1 < self.cap else self.items[j]
            items.append(ite(const(j) < idx, self.items[j], nxt))
        return SymList(self.cap, self.n - 1, items, self.overflow)

    def filter(self, keep) -> "SymList":
        """Keep the items for which ``keep(item)`` holds, in order."""
        kept = [and_(self.valid(j), keep(self.items[j])) for j in range(self.cap)]
        pos = []
        acc = z3.IntVal(0)
        for j in range(self.cap):
            pos.append(acc)
            acc = acc + ite(kept[j], 1, 0)
        items = []
        for k in range(self.cap):
            out = self.items[-1]
            for j in range(self.cap - 1, k - 1, -1):
                out = ite(and_(kept[j], eq(pos[j], k)), self.items[j], out)
            items.append(out)
        return SymList(self.cap, acc, items, self.overflow)

    def contains(self, item):
        item = item if isinstance(item, tuple) else (item,)
        return or_(*(and_(self.valid(j), eq(self.items[j], item)) for j in range(self.cap)))

    def is_empty(self):
        return eq(self.n, 0)

    def same(self, other: "SymList"):
        """The two lists hold the same items (positions beyond length ignored)."""
        parts = [eq(self.n, other.n)]
        for j in range(min(self.cap, other.cap)):
            parts.append(implies(self.valid(j), eq(self.items[j], other.items[j])))
        return and_(*parts)

    def full_eq(self, other: "SymList"):
        """Every slot equal, don't-cares included (a deterministic transition)."""
        parts = [eq(self.n, other.n)]
        for a, b in zip(self.items, other.items):
            parts.append(eq(a, b))
        return and_(*parts)

    def values(self, model, arity_index=None):
        """Concrete items under a z3 model (for counterexamples)."""
        n = model.eval(const(self.n), model_completion=True).as_long()
        out = []
        for j in range(min(n, self.cap)):
            vals = tuple(_model_value(model, x) for x in self.items[j])
            out.append(vals if arity_index is None else vals[arity_index])
        return out


def _model_value(model, x):
    v = model.eval(const(x), model_completion=True)
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    return v.as_long()


def model_value(model, x):
    return _model_value(model, x)
