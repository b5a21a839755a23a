"""GlooHiCache: the same driver API over R real torch.distributed gloo processes.

Each process builds its own HiCacheRank (and its own storage backend from the factory) and
runs a command loop: the driver in this process sends it steps and gets results, snapshots
and errors back. Collectives go through TorchDistGroup, so a rank that skips a sync point
makes its peers raise the collective's error naming that sync point.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import threading
import time
import traceback

import torch

from tiercheck.errors import UserError
from tiercheck.impl.collective import CollectiveError
from tiercheck.impl.storage import StorageBackend
from tiercheck.impl.torchdist import spawn_gloo

from .config import HiCacheConfig
from .errors import RemoteRankError
from .group import HiCacheGroup, run_on_rank
from .rank import HiCacheRank
from .storage_setup import backend_for

_STOP = None
LAUNCHER = "gloo-hicache"  # the thread that owns the rank processes


def _serve(group, cfg, storage, inqs, outqs):
    """The command loop of one gloo rank."""
    r = group.rank
    backend, owned = backend_for(storage, r)
    rank = HiCacheRank(cfg, r, group.world_size, backend, owns_backend=owned)
    rank.coll = group
    outqs[r].put(("ready", None, None))
    try:
        while True:
            msg = inqs[r].get()
            if msg is _STOP:
                return "closed"
            method, args, kwargs, fail = msg
            try:
                outqs[r].put(("ok", run_on_rank(rank, method, args, kwargs, fail), None))
            except BaseException as exc:  # noqa: BLE001 -- shipped to the driver
                try:
                    outqs[r].put(("err", exc, traceback.format_exc()))
                except Exception:  # noqa: BLE001 -- unpicklable
                    outqs[r].put(("err", RemoteRankError(f"rank {r}: {exc!r}"), traceback.format_exc()))
    finally:
        rank.close()


class GlooHiCache(HiCacheGroup):
    """``storage`` must be a factory (FileStorage / MooncakeStorage): each process opens
    its own backend. ``collective_timeout``: how long a rank waits at a sync point for
    peers before raising (default 10 s). ``driver_timeout``: how long the driver waits for a rank's answer
    to one step (default 3 collective timeouts + 120 s). Once one rank has failed, the others
    get one collective timeout + 5 s more; a rank silent by then is named as stalled, in one
    line quoting the failed rank's error (type, first line cut at 300 characters). ``close``
    never waits longer than that either: a rank that does not stop is killed."""

    def __init__(self, cfg: HiCacheConfig, world_size: int = 2, storage=None, *,
                 collective_timeout: float = 10.0, start_timeout: float = 60.0,
                 start_method: str | None = None, driver_timeout: float | None = None) -> None:
        if isinstance(storage, StorageBackend):
            raise UserError("GlooHiCache: storage must be a factory (FileStorage, MooncakeStorage), "
                            "not a backend instance: each rank process opens its own")
        self.cfg = cfg
        self.world_size = world_size
        self.collective_timeout = collective_timeout
        self.driver_timeout = driver_timeout if driver_timeout is not None else 3 * collective_timeout + 120.0
        self._procs: list = []
        if start_method is None:
            fork_ok = "fork" in mp.get_all_start_methods() and not torch.cuda.is_initialized()
            start_method = "fork" if fork_ok else "spawn"
        ctx = mp.get_context(start_method)
        self._inqs = [ctx.Queue() for _ in range(world_size)]
        self._outqs = [ctx.Queue() for _ in range(world_size)]
        self._launch_error: BaseException | None = None
        self._closed = False

        def launch():
            try:
                spawn_gloo(world_size, _serve, cfg, storage, self._inqs, self._outqs,
                           timeout=7 * 24 * 3600.0, collective_timeout=collective_timeout,
                           start_method=start_method, on_start=self._procs.extend)
            except BaseException as exc:  # noqa: BLE001 -- reported by the next call
                self._launch_error = exc

        self._thread = threading.Thread(target=launch, name=LAUNCHER, daemon=True)
        self._thread.start()
        try:
            for r in range(world_size):
                kind, _, _ = self._recv(r, start_timeout, "start")
                if kind != "ready":
                    raise RemoteRankError(f"gloo rank {r} did not start")
        except BaseException:
            self.close()  # no rank process outlives a failed start (a stalled one is killed)
            raise

    # -- transport ----------------------------------------------------------------------------

    def _poll(self, rank: int, what: str):
        """Rank ``rank``'s next message, or None after 0.1 s; RemoteRankError if the ranks
        are gone."""
        try:
            return self._outqs[rank].get(timeout=0.1)
        except queue_mod.Empty:
            pass
        if not self._thread.is_alive():
            try:  # a last message may have arrived just before the exit
                return self._outqs[rank].get(timeout=0.5)
            except queue_mod.Empty:
                pass
            cause = self._launch_error
            raise RemoteRankError(
                f"gloo rank {rank} is gone while waiting for {what}"
                + (f": {type(cause).__name__}: {cause}" if cause else "")
            ) from cause
        return None

    def _recv(self, rank: int, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while True:
            msg = self._poll(rank, what)
            if msg is not None:
                return msg
            if time.monotonic() > deadline:
                raise RemoteRankError(f"gloo rank {rank} did not answer {what} within {timeout:g}s")

    def _call(self, ranks, method, args, kwargs, fail_ranks=frozenset()):
        if self._closed:
            raise RemoteRankError("GlooHiCache is closed")
        for r in ranks:
            self._inqs[r].put((method, tuple(args), dict(kwargs or {}), r in fail_ranks))
        results, failures, stalled = {}, [], []
        pending = list(ranks)
        deadline = time.monotonic() + self.driver_timeout
        grace = self.collective_timeout + 5.0
        while pending:
            # All ranks are polled together. After a failure on one rank, the others get one
            # collective timeout (plus slack) to report theirs; a rank still silent then is
            # stalled (stopped, swapped out) and is named as such.
            r = pending[0]
            msg = self._poll(r, method)
            if msg is None:
                if time.monotonic() <= deadline:
                    pending.append(pending.pop(0))
                    continue
                if not failures:
                    raise RemoteRankError(
                        f"gloo rank(s) {pending} did not answer {method} within {self.driver_timeout:g}s "
                        "(--driver-timeout)")
                stalled = pending
                break
            kind, value, tb = msg
            pending.pop(0)
            if kind == "err":
                if not failures:
                    deadline = min(deadline, time.monotonic() + grace)
                failures.append((r, value, tb))
            else:
                results[r] = value
        if stalled:
            rank, exc, _tb = failures[0]
            raise RemoteRankError(
                f"gloo rank(s) {stalled} stalled in {method}: no answer {grace:g}s after "
                f"rank {rank} failed ({type(exc).__name__}: {str(exc).splitlines()[0][:300]})"
            ) from exc
        if failures:
            rank, exc, tb = next((f for f in failures if not isinstance(f[1], CollectiveError)), failures[0])
            if hasattr(exc, "add_note"):
                exc.add_note(f"(raised on gloo rank {rank})\n{tb}".rstrip())
            raise exc
        return [results[r] for r in ranks]

    def _replicated(self, method, args=(), kwargs=None, fail_ranks=()):
        return self._call(range(self.world_size), method, args, kwargs, frozenset(fail_ranks))

    def _local(self, rank: int, method, args=(), kwargs=None):
        if not 0 <= rank < self.world_size:
            raise ValueError(f"no rank {rank} (world size {self.world_size})")
        return self._call([rank], method, args, kwargs)[0]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for q in self._inqs:
            q.put(_STOP)
        self._thread.join(timeout=self.collective_timeout + 5.0)
        if self._thread.is_alive():
            # A rank that does not stop (SIGSTOPped, stuck in a collective) is killed:
            # teardown is bounded. SIGKILL also ends a stopped process.
            for p in self._procs:
                if p.is_alive():
                    p.kill()
            self._thread.join(timeout=30)
