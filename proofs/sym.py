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
_CTX = z3.main_ctx()


def _mk_nary(mk, args):
    """z3.And/z3.Or without the Python-level coercion (args are BoolRefs)."""
    n = len(args)
    arr = (z3.Ast * n)()
    for i, a in enumerate(args):
        arr[i] = a.as_ast()
    return z3.BoolRef(mk(_CTX.ref(), n, arr), _CTX)


def _as_bool(x):
    return z3.BoolVal(x) if isinstance(x, bool) else x


def const(x):
    """A z3 term for a Python value (ints and bools); z3 terms pass through."""
    if isinstance(x, bool):
        return z3.BoolVal(x)
    if isinstance(x, int):
        return z3.IntVal(x)
    return x


def py(x):
    """The Python value of ``x`` when it is known at encoding time, else None.

    Concrete encodings keep plain Python ints and bools wherever they can, so most of a
    concrete step is evaluated by Python itself; this test must be cheap."""
    if isinstance(x, (bool, int)):
        return x
    if isinstance(x, z3.IntNumRef):
        return x.as_long()
    if isinstance(x, z3.BoolRef):
        v = z3.Z3_get_bool_value(x.ctx_ref(), x.as_ast())
        if v == z3.Z3_L_TRUE:
            return True
        if v == z3.Z3_L_FALSE:
            return False
    return None


def lt(a, b):
    ka, kb = py(a), py(b)
    if ka is not None and kb is not None:
        return ka < kb
    return const(a) < const(b)


def le(a, b):
    ka, kb = py(a), py(b)
    if ka is not None and kb is not None:
        return ka <= kb
    return const(a) <= const(b)


def add(a, b):
    ka, kb = py(a), py(b)
    if ka is not None and kb is not None:
        return ka + kb
    if kb == 0:
        return a
    if ka == 0:
        return b
    return const(a) + const(b)


def sub(a, b):
    ka, kb = py(a), py(b)
    if ka is not None and kb is not None:
        return ka - kb
    if kb == 0:
        return a
    return const(a) - const(b)


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
        if not isinstance(b, tuple):
            raise TypeError("ite of a tuple and a non-tuple")
        return tuple(ite(c, x, y) for x, y in zip(a, b))
    ka, kb = py(a), py(b)
    if ka is not None and ka == kb and type(ka) is type(kb):
        return a
    return z3.If(c, const(a), const(b))


def and_(*xs):
    out = []
    for x in xs:
        k = py(x)
        if k is False:
            return False
        if k is not True:
            out.append(x)
    if not out:
        return True
    return out[0] if len(out) == 1 else _mk_nary(z3.Z3_mk_and, out)


def or_(*xs):
    out = []
    for x in xs:
        k = py(x)
        if k is True:
            return True
        if k is not False:
            out.append(x)
    if not out:
        return False
    return out[0] if len(out) == 1 else _mk_nary(z3.Z3_mk_or, out)


def not_(x):
    k = py(x)
    if k is not None:
        return not k
    return z3.BoolRef(z3.Z3_mk_not(_CTX.ref(), x.as_ast()), _CTX)


def implies(a, b):
    return or_(not_(a), b)


def eq(a, b):
    if isinstance(a, tuple):
        return and_(*(eq(x, y) for x, y in zip(a, b)))
    ka, kb = py(a), py(b)
    if ka is not None and kb is not None:
        return ka == kb
    if isinstance(a, tuple):
        return and_(*(eq(x, y) for x, y in zip(a, b)))
    return const(a) == const(b)


def ne(a, b):
    return not_(eq(a, b))


def sum_(xs):
    total = 0
    terms = []
    for x in xs:
        k = py(x)
        if k is not None:
            total += k
        else:
            terms.append(x)
    if not terms:
        return total
    out = terms[0]
    for x in terms[1:]:
        out = out + x
    return out + total if total else out


def count(conds):
    return sum_([ite(c, 1, 0) for c in conds])


def min2(a, b):
    return ite(le(a, b), a, b)


def max2(a, b):
    return ite(le(b, a), a, b)


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

    def __init__(self, cap: int, n, items, overflow=False):
        self.cap = cap
        self.n = n
        self.items = tuple(items)
        self.overflow = overflow

    @staticmethod
    def of(cap: int, values, arity: int, filler=0):
        values = [tuple(v) if isinstance(v, tuple) else (v,) for v in values]
        if len(values) > cap:
            raise ValueError(f"{len(values)} items do not fit a list of {cap}")
        pad = [tuple(filler for _ in range(arity))] * (cap - len(values))
        return SymList(cap, len(values), [tuple(v) for v in values] + pad, False)

    def valid(self, i: int):
        return lt(i, self.n)

    def get(self, i: int):
        return self.items[i]

    def at(self, idx):
        """Item at a symbolic index (tuple)."""
        return tuple(sel([it[j] for it in self.items], idx) for j in range(len(self.items[0])))

    def append(self, item, cond=True) -> "SymList":
        item = item if isinstance(item, tuple) else (item,)
        items = tuple(ite(and_(cond, eq(self.n, i)), item, it) for i, it in enumerate(self.items))
        full = and_(cond, le(self.cap, self.n))
        return SymList(self.cap, ite(cond, add(self.n, 1), self.n), items, or_(self.overflow, full))

    def drop(self, k) -> "SymList":
        """Remove the first ``k`` items (0 <= k <= length)."""
        kk = py(k)
        if kk is not None:
            items = self.items[kk:] + (self.items[-1],) * min(kk, self.cap)
            return SymList(self.cap, sub(self.n, kk), items[: self.cap], self.overflow)
        items = []
        for i in range(self.cap):
            out = self.items[i]
            for j in range(1, self.cap - i):
                out = ite(eq(k, j), self.items[i + j], out)
            items.append(out)
        return SymList(self.cap, sub(self.n, k), items, self.overflow)

    def remove_at(self, i: int, cond=True) -> "SymList":
        items = list(self.items)
        shifted = items[:i] + items[i + 1 :] + [items[-1]]
        new = tuple(ite(cond, s, o) for s, o in zip(shifted, items))
        return SymList(self.cap, ite(cond, sub(self.n, 1), self.n), new, self.overflow)

    def remove_at_sym(self, idx) -> "SymList":
        """Remove the item at a symbolic index (0 <= idx < length)."""
        items = []
        for j in range(self.cap):
            nxt = self.items[j + 1] if j + 1 < self.cap else self.items[j]
            items.append(ite(lt(j, idx), self.items[j], nxt))
        return SymList(self.cap, sub(self.n, 1), items, self.overflow)

    def filter(self, keep) -> "SymList":
        """Keep the items for which ``keep(item)`` holds, in order."""
        kept = [and_(self.valid(j), keep(self.items[j])) for j in range(self.cap)]
        pos = []
        acc = 0
        for j in range(self.cap):
            pos.append(acc)
            acc = add(acc, ite(kept[j], 1, 0))
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
