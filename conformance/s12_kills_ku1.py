"""Units for survivors of the seed-12 mutation sample (session 14, kU1).

A step naming a prefetch one past the end of the queue (the index the next prefetch
would get): the spec disables it, so the implementation must refuse it as a protocol
step it does not allow and not move. Its bound check is ``0 <= index < len(pq)``; one
that lets ``index == len(pq)`` through reads past the queue and crashes (IndexError)
instead of refusing. Both steps that take an index are probed: a rank's read finishing
(prefetch_io, one rank) and the check of the prefetch (check_prefetch_progress, every
rank).
"""

from __future__ import annotations

from tiercheck.spec.action import act

from .situations import Situation


def _prefetch_started(m, s, a, t) -> bool:
    return a.name == "prefetch_from_storage" and len(t.ranks[0].pq) > len(s.ranks[0].pq)


def _read_past_end(m, t):
    """prefetch_io of the index the next prefetch would get: no such prefetch."""
    return act("prefetch_io", rank=0, op=len(t.ranks[0].pq))


def _check_past_end(m, t):
    """check_prefetch_progress of the index the next prefetch would get."""
    return act("check_prefetch_progress", op=len(t.ranks[0].pq))


SITUATIONS = (
    Situation("a read of the prefetch one past the queue's end", "wt-prefetch-1r", (), _prefetch_started,
              _read_past_end),
    Situation("a check of the prefetch one past the queue's end", "wt-prefetch-2r", (), _prefetch_started,
              _check_past_end),
)
