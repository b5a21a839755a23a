"""Units for mutation survivors worked in session 19: the implementation's two teardown
bounds, which only wall-clock time showed until now.

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
"""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass, field

from tiercheck.impl.hicache import FileStorage, LockstepHiCache
from tiercheck.impl.storage import FaultyBackend
from tiercheck.models import model_file

from .reference import impl_config

DEFAULT_FLUSH_TIMEOUT = 60.0  # HiCacheGroup.flush's documented default (docs/plugging-in.md)
CLOSE_JOIN_BOUND = 30.0  # HiCacheRank.close: the wait for each worker's thread
CLOCK_TICK = 0.5  # the scenario clock's step per call


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


def scenarios():
    return [("flush at its default deadline", flush_gives_up_at_its_default_deadline),
            ("close joins each storage worker once", close_joins_each_worker_once)]
