"""The benchmark arms: one workload served with a flag off and on.

Seed 000 (mirror release): write_through + storage + prefetch from storage, host pool
about 0.25 x the device pool; one engine serves the cold round then the warm round, or
(two-engine arm) a second engine with its own cache and its own store client serves the
warm round from the same store. Seed 001 (duplicate reclaim): write_back under host
pressure, no storage, one engine. Every arm ends with group.verify() on every engine.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace

from tiercheck.errors import UserError
from tiercheck.impl.hicache import FileStorage, HiCacheConfig, LockstepHiCache, MooncakeStorage
from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.hicache.pages import PageRegistry
from tiercheck.impl.kvdata import KVLayout
from tiercheck.impl.storage import codes, rank_key

from .occupancy import HostSampler, HostTrace
from .scheduler import ForwardModel, RoundStats, Scheduler
from .sessions import SessionLoad, build_rounds

BACKENDS = ("file", "mooncake")


def default_file_dir() -> str | None:
    """tmpfs when there is one (a page put costs ~0.5 ms there, 2-4 ms on this machine's
    disk): the store then keeps up with the staging rate, as a local SSD tier would."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


@dataclass(frozen=True)
class BenchSetup:
    """Sizes of one benchmark; the ratios are what matter (host ~0.25 x device, the
    working set 1.5 x the device pool, per-step staging demand a
    small part of the host pool)."""

    load: SessionLoad = field(default_factory=lambda: SessionLoad(user_pages=8, output_pages=4))
    device_pages: int = 2048
    host_ratio: float = 0.25
    concurrency: int = 8
    # Computed prompt tokens one step may prefill, as a fraction of the device pool
    # (SGLang: max_prefill_tokens 16384 against a device pool of ~0.5M tokens, ~3%).
    # It bounds the staging demand of one step, which the host headroom must absorb.
    prefill_frac: float | None = 1 / 32
    decode_steps: int | None = None  # None: one decode step per output token
    ranks: int = 1
    # Modelled GPU time per step: storage and copies run on threads, so the step rate
    # against the storage latency is a ratio that matters (zero: the steps outrun a
    # Mooncake put and acks arrive rounds late).
    forward: ForwardModel = field(default_factory=lambda: ForwardModel(prefill_us=20.0, step_us=1000.0))
    # Mirror release keeps this fraction of the host pool free (SGLang's _FREE_FRAC).
    host_free_frac: float = 0.25
    # Anti-churn age gate in drain rounds (the seed's _REFRESH_ROUNDS); None: never re-stage.
    # The gate exists to refresh pages the store evicted; our stores never evict, and a
    # gate shorter than a round (a few hundred steps here) re-stages every released
    # mirror the warm round hits: pure churn. So it stays off unless asked for.
    refresh_rounds: int | None = None
    layers: int = 2
    heads: int = 2
    head_dim: int = 8

    def __post_init__(self) -> None:
        if not 0 < self.host_ratio:
            raise UserError(f"bench: host ratio must be positive, got {self.host_ratio}")
        if not 0 <= self.host_free_frac < 1:
            raise UserError(f"bench: host free fraction must be in [0, 1), got {self.host_free_frac}")
        if self.device_pages < self.load.longest_pages() * self.concurrency:
            raise UserError(
                f"bench: {self.concurrency} requests of up to {self.load.longest_pages()} pages do not "
                f"fit a device pool of {self.device_pages} pages")
        if self.ranks < 1:
            raise UserError(f"bench: ranks must be at least 1, got {self.ranks}")

    @property
    def max_prefill_tokens(self) -> int | None:
        if self.prefill_frac is None:
            return None
        return max(1, round(self.device_pages * self.prefill_frac)) * self.load.page_size

    @property
    def host_pages(self) -> int:
        return max(1, round(self.device_pages * self.host_ratio))

    def layout(self) -> KVLayout:
        return KVLayout(layers=self.layers, heads=self.heads, head_dim=self.head_dim,
                        page_size=self.load.page_size)

    def mirror_config(self, flag: bool) -> HiCacheConfig:
        return HiCacheConfig(
            layout=self.layout(), device_pages=self.device_pages, host_pages=self.host_pages,
            policy="write_through", storage=True, prefetch=True, mirror_release=flag,
            host_free_target=max(1, math.ceil(self.host_free_frac * self.host_pages)),
            anti_churn_refresh_rounds=self.refresh_rounds,
            prefetch_stop_policy="wait_complete", verify_loads=True,
        )

    def reclaim_config(self, flag: bool) -> HiCacheConfig:
        return HiCacheConfig(
            layout=self.layout(), device_pages=self.device_pages, host_pages=self.host_pages,
            policy="write_back", duplicate_reclaim=flag, verify_loads=True,
        )


SCALES = ("full", "small")


def seed_setup(scale: str = "full", **changes) -> BenchSetup:
    """Seed 000's load scaled to this machine: 128 sessions x 2 rounds over 8 shared
    system prompts, 8 in flight, host pool 0.25 x device pool, the working set 1.55 x the
    device pool, 8 requests in flight up to 15% of it. ``small`` (tests, seconds): 32 sessions with 2 in flight (the same
    sessions-per-slot ratio, 16), device pool 768 pages: the in-flight requests stay the
    same small share of the pools, which is what lets the release headroom absorb a step."""
    if scale == "full":
        base = BenchSetup()
    elif scale == "small":
        base = BenchSetup(load=SessionLoad(sessions=32, user_pages=8, output_pages=4),
                          device_pages=768, concurrency=2, forward=ForwardModel(step_us=1000.0))
    else:
        raise UserError(f"bench: scale must be one of {', '.join(SCALES)}, got {scale!r}")
    return replace(base, **changes)


def reclaim_setup(scale: str = "full", **changes) -> BenchSetup:
    """Seed 001's arm: write_back, no storage, the same sessions with shorter turns: round 1
    fills 0.8 of the device pool and the warm round overflows into the host pool (1.54 x
    in all), so host hits and load-backs (where duplicates are born) matter and the host
    pool is under pressure."""
    if scale == "full":
        base = BenchSetup(load=SessionLoad(sessions=128), device_pages=1024)
    elif scale == "small":
        base = BenchSetup(load=SessionLoad(sessions=32), device_pages=384, concurrency=2,
                          forward=ForwardModel())
    else:
        raise UserError(f"bench: scale must be one of {', '.join(SCALES)}, got {scale!r}")
    return replace(base, **changes)


@dataclass
class ArmResult:
    name: str
    flag: bool
    backend: str | None
    engines: int
    rounds: list[RoundStats]
    metrics: dict  # rank 0's counters, summed over the engines
    distinct_pages: int = 0  # pages the arm inserted (every request's prompt + output)
    stored_pages: int = 0  # of those, present in the store at the end (every rank's key)
    problems: list = field(default_factory=list)
    trace: HostTrace | None = None
    wall_s: float = 0.0
    overhead: object = None  # overhead.SideBySide when the arm timed its drain rounds

    @property
    def forward_s(self) -> float:
        return sum(r.forward_s for r in self.rounds)

    def hit_pct(self, which: str = "all") -> float:
        """Warm-round prompt tokens served from cache (device + host + storage), or one tier."""
        w = self.warm
        if which == "all":
            return 100.0 * (w.device_hit + w.host_hit + w.storage_hit) / max(w.prompt_tokens, 1)
        return w.pct(f"{which}_hit")

    @property
    def warm(self) -> RoundStats:
        return self.rounds[-1]

    def rejected(self) -> dict[tuple[str, str], int]:
        """Write-rejected tokens by (reason, stage)."""
        out = {}
        prefix = mt.WRITE_REJECTED + "{"
        for k, v in self.metrics.items():
            if k.startswith(prefix):
                labels = dict(p.split("=", 1) for p in k[len(prefix):-1].split(","))
                out[(labels["reason"].strip('"'), labels["stage"].strip('"'))] = v
        return out

    def rejected_tokens(self, reason: str = "host_alloc_failed", stage: str | None = "write_through") -> int:
        return sum(v for (r, s), v in self.rejected().items() if r == reason and (stage is None or s == stage))

    @property
    def write_out_pct(self) -> float:
        """Storage write-out: distinct inserted pages present in the store at the end."""
        return 100.0 * self.stored_pages / max(self.distinct_pages, 1)

    @property
    def written_pct(self) -> float:
        """Backed-up tokens / (backed up + rejected staging): the production ratio."""
        done = self.metrics.get(mt.BACKUPED, 0)
        return 100.0 * done / max(done + self.rejected_tokens(), 1)


def _sum_metrics(groups) -> dict:
    out: dict = {}
    for g in groups:
        for k, v in g.metrics()[0].items():
            if k in (mt.HOST_USED, mt.HOST_TOTAL):
                continue  # gauges: not additive over engines
            out[k] = out.get(k, 0) + v
    return out


@contextlib.contextmanager
def open_store(kind: str, file_dir: str | None = None, mooncake_segment_bytes: int = 64 << 20):
    """A fresh, empty store of ``kind`` for one arm (a new directory under ``file_dir``,
    default DEFAULT_FILE_DIR / a new master), as a storage factory for LockstepHiCache;
    removed afterwards."""
    if kind == "file":
        root = tempfile.mkdtemp(prefix="tiercheck-bench-", dir=file_dir or default_file_dir())
        try:
            yield FileStorage(root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    elif kind == "mooncake":
        from tiercheck.impl.storage.mooncake_master import MooncakeMaster

        from tiercheck.impl.storage.guard import GuardedStorage

        master = MooncakeMaster().start()
        try:
            yield GuardedStorage(MooncakeStorage(master.address, health_url=master.health_url,
                                                 segment_bytes=mooncake_segment_bytes),
                                 master.alive, f"mooncake master at {master.address}")
        finally:
            master.stop()
    else:
        raise UserError(f"bench: unknown storage backend {kind!r} (known: {', '.join(BACKENDS)})")


def _unreachable_stores(groups) -> list[str]:
    """A storage backend that stopped answering fails the arm (its counters stay in the
    table): one problem per backend that gave up on its master."""
    seen = []
    for g in groups:
        for rk in g.ranks:
            for why in getattr(rk.backend, "outages", ()):
                if f"storage: {why}" not in seen:
                    seen.append(f"storage: {why}")
    return seen


def _stored(group, pages: list[str], ranks: int) -> int:
    """Pages whose every rank's object is in the store (asked through rank r's client)."""
    present = [True] * len(pages)
    for r in range(ranks):
        res = group.ranks[r].backend.batch_exists([rank_key(h, r) for h in pages])
        present = [p and x == codes.EXISTS for p, x in zip(present, res)]
    return sum(present)


def _distinct_pages(setup: BenchSetup, rounds) -> list[str]:
    reg = PageRegistry(setup.load.page_size)
    seen: dict[str, None] = {}
    for rnd in rounds:
        for req in rnd:
            for h in reg.hashes(req.full):
                seen[h] = None
    return list(seen)


def _serve(setup, groups_cfg, storage, rounds, engines: int, name: str, flag: bool,
           backend: str | None, round_hook=None) -> ArmResult:
    """Serve ``rounds``; with two engines the second serves the last (warm) round.
    ``round_hook``: the first engine's sync-round hook (overhead measurement)."""
    groups: list[LockstepHiCache] = []
    trace = None
    stats: list[RoundStats] = []
    t_start = time.perf_counter()
    try:
        groups.append(LockstepHiCache(groups_cfg, setup.ranks, storage))
        trace = HostTrace(groups_cfg.host_pages)
        sampler = HostSampler(groups[0], trace)
        sch = Scheduler(groups[0], setup.concurrency, setup.decode_steps, setup.forward, sampler,
                        round_hook=round_hook, max_prefill_tokens=setup.max_prefill_tokens)
        for i, rnd in enumerate(rounds):
            if engines == 2 and i == len(rounds) - 1:
                groups.append(LockstepHiCache(groups_cfg, setup.ranks, storage))
                last = trace.rows[-1] if trace.rows else (0, 0.0)
                sampler = HostSampler(groups[1], trace, offset=last[0], t_offset=last[1])
                sch = Scheduler(groups[1], setup.concurrency, setup.decode_steps, setup.forward,
                                sampler, max_prefill_tokens=setup.max_prefill_tokens)
            stats.append(sch.run(rnd))
            sch.drain()
        wall = time.perf_counter() - t_start
        res = ArmResult(name, flag, backend, engines, stats, _sum_metrics(groups), trace=trace,
                        wall_s=wall, overhead=round_hook)
        if groups_cfg.storage:
            pages = _distinct_pages(setup, rounds)
            res.distinct_pages = len(pages)
            res.stored_pages = _stored(groups[0], pages, setup.ranks)
        for g in groups:
            res.problems += g.verify()
        res.problems += _unreachable_stores(groups)
        return res
    finally:
        for g in groups:
            g.close()


def run_mirror_arm(setup: BenchSetup, backend: str, flag: bool, engines: int = 1,
                   round_hook=None) -> ArmResult:
    """One seed-000 arm on a fresh store of ``backend`` ("file" or "mooncake")."""
    if engines not in (1, 2):
        raise UserError(f"bench: engines must be 1 or 2, got {engines}")
    if backend not in BACKENDS:
        raise UserError(f"bench: unknown storage backend {backend!r} (known: {', '.join(BACKENDS)})")
    rounds = build_rounds(setup.load)
    name = f"{backend}{' x2 engines' if engines == 2 else ''}, mirror release {'on' if flag else 'off'}"
    with open_store(backend) as storage:
        return _serve(setup, setup.mirror_config(flag), storage, rounds, engines, name, flag, backend,
                      round_hook)


def run_reclaim_arm(setup: BenchSetup, flag: bool) -> ArmResult:
    rounds = build_rounds(setup.load)
    name = f"write_back, duplicate reclaim {'on' if flag else 'off'}"
    return _serve(setup, setup.reclaim_config(flag), None, rounds, 1, name, flag, None)


def scaled(setup: BenchSetup, **changes) -> BenchSetup:
    return replace(setup, **changes)
