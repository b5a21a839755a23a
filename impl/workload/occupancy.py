"""Host-pool occupancy over time, by what the pages hold (observation only).

Reads rank 0's pools and tree of a LockstepHiCache after each scheduler step; it never
changes them. Categories of used host pages:
  mirror    host copy of a node whose device copy is resident (or loading): a pinned
            write-through mirror, or a write-back duplicate
  host_only the only copy of an evicted node (what a host hit can serve)
  writing   D->H copies in flight (slots held until the ack)
  other     prefetch reservations and the host release queue
``releasable`` (part of ``mirror``): mirrors that are release candidates right now
(durable, idle; seed 000), what the release protocol may free under pressure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tiercheck.impl.hicache.tree import ABSENT, RESIDENT, WRITING

FIELDS = ("step", "t", "used", "mirror", "host_only", "writing", "other", "cached_pages", "releasable")


@dataclass
class HostTrace:
    capacity: int  # host pages
    rows: list = field(default_factory=list)  # tuples in FIELDS order

    def column(self, name: str) -> list:
        i = FIELDS.index(name)
        return [r[i] for r in self.rows]

    def mean(self, name: str, start: int = 0) -> float:
        col = self.column(name)[start:]
        return sum(col) / len(col) if col else 0.0

    def pressure_rows(self, full: float = 0.9) -> list:
        """Rows where the host pool was at least ``full`` x capacity used."""
        i = FIELDS.index("used")
        return [r for r in self.rows if r[i] >= full * self.capacity]

    def mean_under_pressure(self, name: str, full: float = 0.9) -> float:
        """Mean of ``name`` over the pressure rows (0.0 when there were none)."""
        i = FIELDS.index(name)
        rows = self.pressure_rows(full)
        return sum(r[i] for r in rows) / len(rows) if rows else 0.0

    def pressure_share(self, full: float = 0.9) -> float:
        return len(self.pressure_rows(full)) / max(len(self.rows), 1)


class HostSampler:
    """Callable as the scheduler's sampler: appends one row per step to ``trace``.
    ``offset``/``t_offset``: added to the step number and time (to chain engines)."""

    def __init__(self, group, trace: HostTrace | None = None, offset: int = 0,
                 t_offset: float = 0.0) -> None:
        self.rank = group.ranks[0]
        self.trace = trace or HostTrace(self.rank.host_pool.num_pages)
        self.offset = offset
        self.t_offset = t_offset

    def __call__(self, step: int, t: float) -> None:
        r = self.rank
        mirror = host_only = writing = cached = releasable = 0
        release = r.cfg.mirror_release_on
        for n in r.tree.nodes():
            k = len(n)
            if n.dev != ABSENT or n.host == RESIDENT:
                cached += k
            if n.host == RESIDENT:
                if n.dev == ABSENT:
                    host_only += k
                else:
                    mirror += k
                    if release and r.is_redundant_mirror(n):
                        releasable += k
            elif n.host == WRITING:
                writing += k
        used = r.host_pool.num_pages - r.host_pool.available()
        other = used - mirror - host_only - writing
        self.trace.rows.append((step + self.offset, t + self.t_offset, used, mirror, host_only, writing,
                                other, cached, releasable))
