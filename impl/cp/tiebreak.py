"""Tie-break keys for the victim order, and the per-rank bug variant.

After contribution and ancestor-unlock credit, victims are ordered by a tie-break key. The
key must make the order a strict total order over rank-replicated state, or CP ranks that
hold identical trees pick different victims and their device pools diverge.
"""

from __future__ import annotations

from typing import Callable, Tuple

from .node import DeviceNode

TieBreak = Callable[[DeviceNode], Tuple]

VARIANT_LOCAL_TIEBREAK = "planner-local-tiebreak"
KNOWN_VARIANTS = frozenset({VARIANT_LOCAL_TIEBREAK})


def replicated_tiebreak(node: DeviceNode) -> Tuple[int, int]:
    """Least recently used first by the replicated access counter; the unique id decides."""
    return (int(node.access_seq), int(node.id))


def local_clock_tiebreak(node: DeviceNode) -> Tuple[float, int]:
    """BUG VARIANT: orders ties by this rank's own wall clock of the last access.

    Still a total order on one rank, but over per-rank state: two ranks whose clocks saw
    the accesses at different moments order equal-contribution victims differently.
    """
    return (float(node.last_access_time), int(node.id))
