"""Units for mutation survivors worked in session 19: the implementation's two teardown
bounds, which only wall-clock time showed until now, and the write-back size on
diverged replicas, which the spec now charges per rank.

- (fault) flush() with its default timeout while a store call hangs (wt-storage-1r in auto
  mode, the first backup write blocked): it gives up once its clock passes the documented
  default deadline (60 s) and not before, saying so. The scenario's own clock stands in for
  the wall clock (a fake ``time.monotonic`` for the scenario's thread only, half a second a
  call), so the minute costs about a second and the bound is exact both ways (group.py's
  ``timeout: float = 60.0`` read as 59 or 61 gave up a clock tick early or late).
- (fault) close() with a prefetch read in flight (wt-prefetch-1r in auto mode: a second
  group prefetches what a first one stored): every storage worker thread of the rank is
  joined once, each for at most the documented bound (30 s) on a backend call that never
  returns. The joins are recorded by a spy on the worker threads (the real join runs
  after it). A prefetch in flight shares the rank's prefetch worker, which the rank
  closes with its own workers: closing it a second time (rank.py's ``op.worker is not
  None and op.worker is not self.prefetch_worker`` read with ``or``) doubles the wait on
  a hung call, and a bound of 31 s (or 29) is not the documented one. In manual mode
  each read has a worker of its own, closed with the same bound.
- (fault) a real Mooncake master and two ranks with MooncakeStorage's defaults: the
  master's metrics show the two 16 MiB segments the ranks mount (storage_setup.py's
  ``segment_bytes: int = 16 << 20`` read as 17 << 20 offered 2 MiB more; no unit fills a
  store). Skipped, like the Mooncake tours, where Mooncake is not installed.
"""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass, field

from tiercheck.impl.hicache import FileStorage, LockstepHiCache
from tiercheck.impl.storage import FaultyBackend
from tiercheck.models import model_file
from tiercheck.spec.eviction import _leaf_on
from tiercheck.spec.state import ABSENT, node_len

from .reference import impl_config
from .situations import Situation

DEFAULT_FLUSH_TIMEOUT = 60.0  # HiCacheGroup.flush's documented default (its docstring)
CLOSE_JOIN_BOUND = 30.0  # HiCacheRank.close's documented wait for each worker's thread (its docstring)
CLOCK_TICK = 0.5  # the scenario clock's step per call
MOONCAKE_SEGMENT_BYTES = 16 << 20  # MooncakeStorage's documented segment per rank (its docstring)


class _ScenarioClock:
    """``time.monotonic`` for one thread advances CLOCK_TICK per call; other threads (the
    ranks, the storage workers) keep the real clock."""

    def __init__(self, start: float = 1000.0):
        self.now, self.thread = start - CLOCK_TICK, threading.get_ident()
        self._real = time.monotonic

    def __call__(self) -> float:
        if threading.get_ident() != self.thread:
            return self._real()
        self.now += CLOCK_TICK
        return self.now

    def __enter__(self):
        time.monotonic = self
        return self

    def __exit__(self, *exc):
        time.monotonic = self._real


@dataclass(frozen=True)
class _BlockedStore(FileStorage):
    """The file store whose first backup write blocks until ``release`` is set."""

    release: threading.Event = field(default_factory=threading.Event)

    def make(self, rank: int):
        faulty = FaultyBackend(super().make(rank))
        faulty.on_call("put", 1, lambda: self.release.wait(60))
        return faulty


def flush_gives_up_at_its_default_deadline() -> str:
    cfg = model_file.load("wt-storage-1r").config
    release = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        store = _BlockedStore(tmp, release=release)
        group = LockstepHiCache(impl_config(cfg, manual=False), cfg.ranks, store)
        try:
            group.insert(list(cfg.requests[0]))
            with _ScenarioClock() as clock:
                start = clock.now + CLOCK_TICK  # the value flush reads first: its deadline's base
                try:
                    group.flush()
                    return "flush returned while the first backup write hangs"
                except TimeoutError as exc:
                    msg, gave_up = str(exc), clock.now - start
        finally:
            release.set()
            group.close()
    if f"after {DEFAULT_FLUSH_TIMEOUT:g}s" not in msg:
        return f"flush's timeout message does not give the default ({DEFAULT_FLUSH_TIMEOUT:g}s): {msg[:200]}"
    if not DEFAULT_FLUSH_TIMEOUT < gave_up <= DEFAULT_FLUSH_TIMEOUT + CLOCK_TICK:
        return (f"flush gave up {gave_up:g}s (scenario clock) after it started, not at the first tick "
                f"past its default deadline ({DEFAULT_FLUSH_TIMEOUT:g}s)")
    return ""


def _spy_joins(rank, joins: list) -> int:
    """Record (worker, timeout) for every join of the rank's storage worker threads;
    returns how many workers the rank has."""
    workers = {id(w): w for w in [rank.backup_worker, rank.prefetch_worker] + [op.worker for op in rank.pq]
               if w is not None}
    for w in workers.values():
        real = w._thread.join

        def join(timeout=None, w=w, real=real):
            joins.append((id(w), timeout))
            real(timeout)
        w._thread.join = join
    return len(workers)


def _close_with_a_read_in_flight(manual: bool) -> str:
    cfg = model_file.load("wt-prefetch-1r").config
    req = list(cfg.requests[0])
    mode = "manual" if manual else "auto"
    with tempfile.TemporaryDirectory() as tmp:
        first = LockstepHiCache(impl_config(cfg, manual=False), cfg.ranks, FileStorage(tmp))
        try:
            first.insert(req)
            first.flush(timeout=30.0)  # written through, backed up to the store
        finally:
            first.close()
        group = LockstepHiCache(impl_config(cfg, manual=manual), cfg.ranks, FileStorage(tmp))
        joins: list = []
        try:
            started = group.prefetch_from_storage(req)
            rank = group.ranks[0]
            if started != [0] * cfg.ranks or not rank.pq:
                return f"{mode}: a second group did not start a prefetch of what the first stored: {started}"
            # auto: the read runs on the rank's prefetch worker; manual: on a worker of its own
            if (rank.pq[0].worker is rank.prefetch_worker) == manual:
                return f"{mode}: the prefetch does not read on the worker its mode gives it"
            workers = _spy_joins(rank, joins)
        finally:
            group.close()
    per_worker: dict = {}
    for w, timeout in joins:
        per_worker.setdefault(w, []).append(timeout)
    if len(per_worker) != workers or any(len(t) != 1 for t in per_worker.values()):
        return (f"{mode}: close() joined the rank's {workers} storage workers "
                f"{sorted(len(t) for t in per_worker.values())} times")
    bounds = sorted({t for ts in per_worker.values() for t in ts})
    if bounds != [CLOSE_JOIN_BOUND]:
        return f"{mode}: close() waits {bounds}s for a worker's thread, not the documented {CLOSE_JOIN_BOUND:g}s"
    return ""


def close_joins_each_worker_once() -> str:
    """Auto mode (the read on the prefetch worker), then manual (a worker per read)."""
    return _close_with_a_read_in_flight(False) or _close_with_a_read_in_flight(True)


def _master_capacity(master) -> int | None:
    """The master's ``master_total_capacity_bytes`` (its Prometheus metrics page)."""
    import urllib.request

    url = master.health_url.rsplit("/", 1)[0] + "/metrics"
    with urllib.request.urlopen(url, timeout=10) as page:
        for line in page.read().decode().splitlines():
            if line.startswith("master_total_capacity_bytes "):
                return int(float(line.split()[1]))
    return None


def mooncake_available() -> bool:
    """The mooncake extra and its mooncake_master binary are installed."""
    from tiercheck.errors import UserError
    from tiercheck.impl.storage.mooncake import load_store_class
    from tiercheck.impl.storage.mooncake_master import find_master_binary

    try:
        load_store_class()
    except UserError:
        return False
    return find_master_binary() is not None


def mooncake_segments_of_the_documented_size() -> str:
    """wt-storage-2r on a real Mooncake master, every MooncakeStorage size left at its
    default: each rank's client mounts one segment of the documented 16 MiB, which is
    what the master then offers in all (its metrics' total capacity)."""
    from tiercheck.impl.hicache import MooncakeStorage
    from tiercheck.impl.storage.mooncake_master import MooncakeMaster

    if not mooncake_available():
        return ""  # no Mooncake here: the mooncake units skip the same way
    cfg = model_file.load("wt-storage-2r").config
    master = MooncakeMaster().start()
    try:
        group = LockstepHiCache(impl_config(cfg), cfg.ranks, MooncakeStorage(master.address, health_url=master.health_url))
        try:
            total = _master_capacity(master)
        finally:
            group.close()
    finally:
        master.stop()
    want = cfg.ranks * MOONCAKE_SEGMENT_BYTES
    if total != want:
        return (f"the master offers {total} bytes for {cfg.ranks} ranks' default segments, "
                f"not {cfg.ranks} x {MOONCAKE_SEGMENT_BYTES >> 20} MiB = {want}")
    return ""


def scenarios():
    return [("flush at its default deadline", flush_gives_up_at_its_default_deadline),
            ("close joins each storage worker once", close_joins_each_worker_once),
            ("Mooncake segments of the documented size", mooncake_segments_of_the_documented_size)]


def _both_write_rank_0_longer(m, s, a, t) -> bool:
    """A write_back eviction both ranks must write, rank 0's node longer than rank 1's
    under the same end page, with less host room on some rank than rank 0's length."""
    if a.name != "evict" or t == s:
        return False
    e = a["node"]
    if not all(e < len(rs.nodes) and _leaf_on(m, rs, e, False) and rs.nodes[e].host == ABSENT for rs in s.ranks):
        return False
    lengths = [node_len(m.pages, rs, e) for rs in s.ranks]
    return lengths[0] > lengths[1] and min(rs.host_free for rs in s.ranks) < lengths[0]


def _staged_apart(m, s, a, t) -> bool:
    """An insert after which the ranks' newest staged writes are different nodes (end pages)."""
    if a.name != "insert":
        return False
    new = [rt.wq[len(rs.wq):] for rs, rt in zip(s.ranks, t.ranks)]
    return all(new) and len({w[-1][1] for w in new}) > 1


# Diverged replicas (digest-unchecked lets duplicate reclaim drift): both ranks must write
# the victim, rank 0's node longer. Every rank asks for the lowest writing rank's length
# (one MIN of (rank, pages) packed into an int64) and takes its own node's pages; the
# spec charged every rank the asked-for length until session 19. A packing that drops the
# rank (eviction.py's ``rank << 32`` read as ``rank >> 32``) asks for the shorter length.
TWIN_SITUATIONS = (
    Situation("digest-unchecked evicting a node both ranks must write, rank 0's longer", "variants/digest-unchecked",
              (), _both_write_rank_0_longer,
              overrides=(("requests", ((1, 2), (1, 2, 3, 4), (1, 2, 3, 4, 5, 6))), ("device_pages", 6),
                         ("host_pages", 4))),
    # partial-backup-leak: each rank stages what it alone decided, so the ranks' write
    # lists can name different nodes at the same place; each rank stages its own node of
    # its own length (the spec staged the first wanting rank's node on every rank until
    # session 19: situations.py's "a prefetch the diverged replicas anchor differently"
    # had to avoid this).
    Situation("partial-backup-leak staging different nodes on the two ranks", "variants/partial-backup-leak", (),
              _staged_apart, overrides=(("requests", ((1,), (1, 2), (3,))), ("device_pages", 3))),
)
