"""Values that record being read: what the memoised engines learn a step's footprint from.

A ``Tracked`` wraps one part of a state (a field, or one rank's state, or one rank's store
mask) and sets its bit in a shared box whenever its value is used. It is not a tuple or
a str, so an operation it does not define fails (TypeError) instead of reading around it;
the engines then rerun the step on the plain state, unmemoised. What it cannot see is
``isinstance``/``type``/``is`` applied to it: the spec uses ``is`` only between rank states
of a state and its successor, which the element engine keeps meaningful (see
tiercheck.models.element_memo).

``TrackedSeq`` wraps a per-rank tuple (``State.ranks``, ``State.store``): indexing and
iterating hand out one wrapper per element without reading it, so a step that copies the
tuple and replaces one rank reads only that rank; its length is the model's rank count, a
constant. Anything else it is asked reads every element.
"""

from __future__ import annotations

import operator

from tiercheck.spec.state import RankState


class Tracked:
    """A value that sets ``bit`` in ``box[0]`` whenever it is used."""

    __slots__ = ("v", "box", "bit")

    def __init__(self, v, box, bit):
        self.v, self.box, self.bit = v, box, bit

    def _get(self):
        self.box[0] |= self.bit
        return self.v

    # The frequent ones, spelled out (the loops below define the rest).
    def __getitem__(self, i):
        self.box[0] |= self.bit
        return self.v[i]

    def __iter__(self):
        self.box[0] |= self.bit
        return iter(self.v)

    def __len__(self):
        self.box[0] |= self.bit
        return len(self.v)

    def __bool__(self):
        self.box[0] |= self.bit
        return bool(self.v)

    def __getattr__(self, name):  # methods of the value (count, index, startswith, ...)
        return getattr(self._get(), name)

    def __hash__(self):
        return hash(self._get())

    def __reduce__(self):  # never pickle a wrapper: pickle the value (read)
        return (_ident, (self._get(),))


def _ident(v):
    return v


def unwrap(x):
    return x._get() if isinstance(x, Tracked) else x


def _unary(fn):
    return lambda self, *args: fn(self._get(), *[unwrap(a) for a in args])


def _binary(fn):
    return lambda self, other: fn(self._get(), unwrap(other))


def _reflected(fn):
    return lambda self, other: fn(unwrap(other), self._get())


for _name, _fn in {
    "contains": operator.contains, "repr": repr, "str": str, "format": format, "index": operator.index, "int": int,
    "neg": operator.neg, "invert": operator.invert, "abs": abs, "reversed": reversed,
}.items():
    setattr(Tracked, f"__{_name}__", _unary(_fn))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Tracked, f"__{_name}__", _binary(getattr(operator, _name)))
for _name in ("add", "sub", "mul", "and", "or", "xor", "lshift", "rshift", "mod", "floordiv", "truediv", "pow"):
    _fn = getattr(operator, f"{_name}_" if _name in ("and", "or") else _name)
    setattr(Tracked, f"__{_name}__", _binary(_fn))
    setattr(Tracked, f"__r{_name}__", _reflected(_fn))
del _name, _fn


class TrackedRank(Tracked):
    """One rank's state: its fields as properties (the spec reads them by the million, and
    ``__getattr__`` is the slow path), its hash precomputed (the spec's per-rank memo
    caches hash their arguments; a rank state's hash walks all its nested tuples)."""

    __slots__ = ("h",)

    def __init__(self, v, box, bit, h):
        self.v, self.box, self.bit, self.h = v, box, bit, h

    def __hash__(self):
        self.box[0] |= self.bit
        return self.h

    def __eq__(self, other):  # the spec's memo caches compare it with interned states
        self.box[0] |= self.bit
        return self.v is other or self.v == unwrap(other)

    def __ne__(self, other):
        return not self.__eq__(other)


def _field(i):
    def get(self):
        self.box[0] |= self.bit
        return self.v[i]

    return property(get)


for _i, _name in enumerate(RankState._fields):
    setattr(TrackedRank, _name, _field(_i))
TrackedRank._replace = property(lambda self: self._get()._replace)
del _i, _name


class TrackedSeq(Tracked):
    """A per-rank tuple whose elements are wrapped one by one (``elems``); ``bit`` is the
    union of theirs, read by any use of the tuple as a whole."""

    __slots__ = ("elems",)

    def __init__(self, v, box, bit, elems):
        self.v, self.box, self.bit, self.elems = v, box, bit, elems

    def __getitem__(self, i):
        if type(i) is slice:
            return tuple(self.elems[i])
        return self.elems[i]

    def __iter__(self):
        return iter(self.elems)

    def __reversed__(self):
        return reversed(self.elems)

    def __len__(self):  # the number of ranks: the same in every state of a model
        return len(self.elems)

    def __bool__(self):
        return bool(self.elems)
