"""What a halt tells its user, against the ranks it describes.

A sync round that finds the duplicate-reclaim digests diverged stops the TP group
(fail-stop, spec/sync.py) with a ReplicaDivergenceError that names the digest min and max
across the ranks and the nodes the raising rank reclaimed since the last passing round
(impl/hicache/state.py ``_check_digest``). The refinement maps a halt to a flag, so
nothing else reads that text; it is what a user debugging the divergence sees first. Here
it is read back: the min and max must be the smallest and largest digest the ranks hold
(their wire values), and the nodes must be that rank's victims in its snapshot (which
the refinement compares with the spec's victims since the last round).
"""

from __future__ import annotations

import ast
import re

from tiercheck.impl.hicache import digest as dg

_MESSAGE = re.compile(r"^rank (\d+): .*\(digest min (-?\d+), max (-?\d+); this rank reclaimed (\[.*\])\)$",
                      re.DOTALL)


def problems(message: str, ranks, snaps, cfg) -> list:
    """Disagreements of a halt ``message`` with the in-process ``ranks`` (their digests)
    and their snapshots ``snaps`` (their victims); [] when it tells the truth. ``cfg``:
    the implementation's HiCacheConfig. Under ``negated-pair-overflow`` (a bug in the
    negated pair itself) the max is whatever the broken arithmetic says: not checked."""
    got = _MESSAGE.match(message)
    if got is None:
        return [f"halt message {message!r} does not name the digest min and max and this rank's victims"]
    rank, lo, hi, victims = int(got[1]), int(got[2]), int(got[3]), ast.literal_eval(got[4])
    out = []
    if not cfg.has("negated-pair-overflow"):
        wire = [dg.wrap(r.digest, cfg.wire_bits) for r in ranks]
        if (lo, hi) != (min(wire), max(wire)):
            out.append(f"halt message says digest min {lo}, max {hi}; the ranks hold {wire}")
    mine = [tuple(p) for p in snaps[rank]["victims"]]
    if [tuple(v) for v in victims] != mine:
        out.append(f"halt message says rank {rank} reclaimed {victims}; its snapshot says {mine}")
    return out
