"""Memoisation of pure per-rank computations, keyed by their (hashable) arguments.

A global state is a tuple of rank states, and the same rank state appears in very many
global states (the other ranks and the store vary independently), so per-rank guards,
effects and invariants are computed once per distinct rank state instead of once per
global state. Caches live on the Model instance, whose constants never change.

Hashing a rank state walks all its nested tuples, so each cache has an identity layer in
front, keyed by the arguments' addresses: each entry holds its argument objects, so no
other object can have those addresses while the entry lives, and an address match is an
identity match. The model checker hands the spec interned rank states, which keeps nearly
every lookup on that layer. It is bounded (cleared when full); the value-keyed cache
behind it is the memo proper and decides every miss. Either way the result is ``fn``'s,
so this is a pure speed-up.
"""

from __future__ import annotations

import functools
import inspect

IDENTITY_LIMIT = 1 << 18  # entries per function before the identity layer is cleared


def per_model(fn):
    """Cache ``fn(model, *args)`` on the model; every argument must be hashable."""
    key = object()
    arity = len(inspect.signature(fn).parameters) - 1

    def tables(m):
        try:
            return m.caches[key]
        except KeyError:
            t = m.caches[key] = ({}, {})
            return t

    def miss(m, ident, cache, ik, args):
        try:
            value = cache[args]
        except KeyError:
            value = cache[args] = fn(m, *args)
        if len(ident) >= IDENTITY_LIMIT:
            ident.clear()
        ident[ik] = (args, value)
        return value

    if arity == 1:

        def wrapper(m, a):
            ident, cache = tables(m)
            hit = ident.get(id(a))
            if hit is not None:
                return hit[1]
            return miss(m, ident, cache, id(a), (a,))

    elif arity == 2:

        def wrapper(m, a, b):
            ident, cache = tables(m)
            ik = (id(a), id(b))
            hit = ident.get(ik)
            if hit is not None:
                return hit[1]
            return miss(m, ident, cache, ik, (a, b))

    else:

        def wrapper(m, *args):
            ident, cache = tables(m)
            ik = tuple(map(id, args))
            hit = ident.get(ik)
            if hit is not None:
                return hit[1]
            return miss(m, ident, cache, ik, args)

    wrapper = functools.wraps(fn)(wrapper)
    wrapper.uncached = fn
    return wrapper
