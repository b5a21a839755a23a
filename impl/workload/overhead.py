"""What mirror release costs when it is switched off: the drain round as shipped (flag
off) against the same round with the release hook absent, side by side in one run.

BASELINE_* below are the rank's _drain_fields / _drain_apply (impl/hicache/storage_path.py)
with every mirror-release line taken out: the drain round before the feature. The
benchmark test runs both on the same scripted steps and compares the states, so a change
to the shipped round that the baseline does not follow is caught.

Two measurements:
  * side by side: a workload run whose sync rounds alternate (ABBA) between the shipped
    round and the baseline, each timed inside the rank (rank.check_events, collective
    included) and around the group call;
  * micro: the two drain-round bodies called directly on an idle rank, in alternating
    blocks, giving the added nanoseconds per round without the collective's noise.
"""

from __future__ import annotations

import statistics
import time
import types
from dataclasses import dataclass, field

from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.hicache.rank import HiCacheRank
from tiercheck.impl.hicache.state import INT64_MAX, SKIP

SHIPPED, BASELINE = "flag off (as shipped)", "hook absent (baseline)"


def baseline_drain_fields(self) -> list[int]:
    self._drain_sdone = self._sdone()
    return [len(self._drain_sdone), len(self.relq)]


def baseline_drain_apply(self, red: list[int]) -> tuple[int, int]:
    nb, nr = red[0], red[1]
    sdone = self._drain_sdone
    completed = sdone[:nb]
    if self.cfg.single_writer and nb:
        wire = [INT64_MAX if a == SKIP else a for a in completed]
        completed = [0 if v == INT64_MAX else v for v in self._reduce(wire, "min", "drain_ack_slots")]
    self.drain_round += 1
    ps = self.layout.page_size
    for op, done, own in zip(self.sq[:nb], completed, sdone[:nb]):
        if self.cfg.has("split-during-backup"):
            end = self.tree.node_at(op.pages[-1])
            targets = [end] if end is not None else []
        else:
            targets = self.tree.covering(op.pages)
        for n in targets:
            n.host_ref -= 1
        if own != SKIP:
            self.metrics.add(mt.BACKUPED, own * ps)
    self.sq = self.sq[nb:]
    freed = [s for slots in self.relq[:nr] for s in slots]
    if freed:
        self.host_pool.free(freed)
    self.relq = self.relq[nr:]
    return nb, nr


VARIANTS = {
    SHIPPED: (HiCacheRank._drain_fields, HiCacheRank._drain_apply),
    BASELINE: (baseline_drain_fields, baseline_drain_apply),
}


def install(rank, variant: str) -> None:
    """Bind the variant's drain-round bodies on ``rank`` (instance attributes for both
    variants, so the method lookup costs the same)."""
    fields_fn, apply_fn = VARIANTS[variant]
    rank._drain_fields = types.MethodType(fields_fn, rank)
    rank._drain_apply = types.MethodType(apply_fn, rank)


def abba(i: int) -> int:
    """0 or 1 for round i in the order A B B A A B B A ..."""
    return (i + (i // 2) % 2) % 2


@dataclass
class SideBySide:
    """A Scheduler round_hook: every sync round runs one variant (ABBA order) on every
    rank, timed in the rank (rank 0) and around the group call."""

    in_rank: dict = field(default_factory=lambda: {SHIPPED: [], BASELINE: []})
    call: dict = field(default_factory=lambda: {SHIPPED: [], BASELINE: []})
    rounds: int = 0
    _current: str | None = None

    def __call__(self, group) -> None:
        if self.rounds == 0:
            for r in group.ranks:
                self._time_rank(r)
        variant = (SHIPPED, BASELINE)[abba(self.rounds)]
        self.rounds += 1
        for r in group.ranks:
            install(r, variant)
        self._current = variant
        t = time.perf_counter()
        try:
            group.check_events()
        finally:
            self._current = None  # rounds outside the hook (flush) are not timed
        self.call[variant].append(time.perf_counter() - t)

    def _time_rank(self, rank) -> None:
        inner = HiCacheRank.check_events
        box = self

        def check_events(self_rank):
            t = time.perf_counter()
            try:
                return inner(self_rank)
            finally:
                if self_rank.rank == 0 and box._current is not None:
                    box.in_rank[box._current].append(time.perf_counter() - t)

        rank.check_events = types.MethodType(check_events, rank)

    def summary(self, which: str = "in_rank", boot: int = 2000, seed: int = 0) -> dict:
        a, b = getattr(self, which)[SHIPPED], getattr(self, which)[BASELINE]
        return ratio_summary(a, b, boot, seed)


def ratio_summary(a: list[float], b: list[float], boot: int = 2000, seed: int = 0) -> dict:
    """Median of each, the ratio of medians, and a bootstrap 95% interval of it."""
    import random

    if not a or not b:
        return {"n": (len(a), len(b)), "ratio": float("nan"), "lo": float("nan"), "hi": float("nan"),
                "median_a": float("nan"), "median_b": float("nan")}
    rng = random.Random(seed)
    ratios = []
    for _ in range(boot):
        ra = [a[rng.randrange(len(a))] for _ in a]
        rb = [b[rng.randrange(len(b))] for _ in b]
        ratios.append(statistics.median(ra) / statistics.median(rb))
    ratios.sort()
    return {
        "n": (len(a), len(b)),
        "median_a": statistics.median(a),
        "median_b": statistics.median(b),
        "ratio": statistics.median(a) / statistics.median(b),
        "lo": ratios[int(0.025 * boot)],
        "hi": ratios[int(0.975 * boot) - 1],
    }


def micro_cost(rank, blocks: int = 40, per_block: int = 2000) -> dict:
    """Nanoseconds per drain-round body (fields + apply, no collective) on an idle rank,
    shipped vs baseline, in alternating (ABBA) blocks. ``added_ns`` compares the fastest
    block of each (other load only ever adds time, so the minimum is the stable
    estimate on a shared machine, as timeit advises); the medians are kept too."""
    times = {SHIPPED: [], BASELINE: []}
    for i in range(blocks * 2):
        variant = (SHIPPED, BASELINE)[abba(i)]
        install(rank, variant)
        f, ap = rank._drain_fields, rank._drain_apply
        t = time.perf_counter_ns()
        for _ in range(per_block):
            ap(f())
        times[variant].append((time.perf_counter_ns() - t) / per_block)
    a, b = min(times[SHIPPED]), min(times[BASELINE])
    ma, mb = statistics.median(times[SHIPPED]), statistics.median(times[BASELINE])
    return {"shipped_ns": a, "baseline_ns": b, "added_ns": a - b, "median_shipped_ns": ma,
            "median_baseline_ns": mb, "median_added_ns": ma - mb, "blocks": blocks,
            "per_block": per_block}
