"""The memoised engines' tables: records filed under a footprint, looked up by key.

A computation's footprint is the set of key bits it read (``mask``); its record is filed
in the table of that mask under ``key & mask``. One computation may read different parts
in different states, so a memo entry keeps one (mask, table) pair per footprint met, and
a look-up tries each (a handful at most in practice).
"""

from __future__ import annotations

MISS = object()  # not found (a record may itself be None)


def find(tables, key):
    """(record, footprint mask) of the first table holding ``key``, or (MISS, 0)."""
    for mask, table in tables:
        rec = table.get(key & mask, MISS)
        if rec is not MISS:
            return rec, mask
    return MISS, 0


def file_under(tables, mask, key, rec) -> None:
    for m, table in tables:
        if m == mask:
            break
    else:
        table = {}
        tables.append((mask, table))
    table[key & mask] = rec


def open_violations(viols, open_props):
    """The violations of properties still open (all when ``open_props`` is None)."""
    if open_props is not None and viols:
        return tuple(v for v in viols if v[0] in open_props)
    return viols
