"""Memoisation of pure per-rank computations, keyed by their (hashable) arguments.

A global state is a tuple of rank states, and the same rank state appears in very many
global states (the other ranks and the store vary independently), so per-rank guards,
effects and invariants are computed once per distinct rank state instead of once per
global state. Caches live on the Model instance, whose constants never change.
"""

from __future__ import annotations

import functools


def per_model(fn):
    """Cache ``fn(model, *args)`` on the model; every argument must be hashable."""
    key = object()

    @functools.wraps(fn)
    def wrapper(m, *args):
        cache = m.caches.get(key)
        if cache is None:
            cache = m.caches[key] = {}
        try:
            return cache[args]
        except KeyError:
            value = cache[args] = fn(m, *args)
            return value

    wrapper.uncached = fn
    return wrapper
