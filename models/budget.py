"""The memory budget of a search (--max-memory): the memory of the checker and its worker
processes, sampled every few hundred states.

The budget is on proportional set sizes (PSS), but reading a process's PSS
(/proc/PID/smaps_rollup) walks its page tables: about 40 ms of system time for a 1 GiB
process, which every 256 states was most of the system time of a million-state run
(models/CHECKER.md). Each sample therefore first sums the resident sets (/proc/PID/statm,
a constant-time read), which bound the PSS from above, and reads the PSS only when that
bound exceeds the budget."""

from __future__ import annotations

import os
from typing import Optional

from tiercheck.inputs import machine_memory

DEFAULT_FRACTION = 0.5  # of the machine's memory, when --max-memory is not given
EVERY = 256  # states between samples


def default_budget() -> int:
    return int(DEFAULT_FRACTION * machine_memory())


def rss(pid: int) -> int:
    """Memory of process ``pid`` in bytes: its proportional share (PSS, so pages that
    forked workers share with the checker are not counted twice), else its resident set;
    0 where /proc is not available."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resident(pid)


def resident(pid: int) -> int:
    """Resident set of process ``pid`` in bytes (>= its PSS); 0 where /proc is not available."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def fmt(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


class Meter:
    def __init__(self, limit: Optional[int], pool=None):
        self.limit = limit
        self.pool = pool

    def pids(self):
        pids = [os.getpid()]
        if self.pool is not None:
            pids += [p.pid for p in self.pool.procs]
        return pids

    def used(self) -> int:
        return sum(rss(p) for p in self.pids())

    def over(self, i: int) -> Optional[str]:
        """A stop reason when the budget is spent (checked every EVERY states), else None."""
        if not self.limit or i % EVERY:
            return None
        if sum(resident(p) for p in self.pids()) <= self.limit:
            return None  # the PSS is no larger
        used = self.used()
        if used > self.limit:
            return f"--max-memory {fmt(self.limit)} reached ({fmt(used)} in use)"
        return None
