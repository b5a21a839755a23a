"""LockstepGroup: R ranks as threads of one process, meeting at every collective.

    group = LockstepGroup(world_size=2, timeout=5.0)
    results = group.run(fn, *args)   # fn(rank_handle, *args) on every rank at once

Each collective blocks until all R ranks arrive, then every rank gets the same result. The
result is an elementwise MIN over all ranks' frames, so it never depends on thread timing.
A rank that finishes or fails before reaching a collective the others wait at, or does not
arrive within ``timeout`` seconds, makes the waiting ranks raise RankMissingError naming the
sync point and the missing ranks; the group is then broken and every later collective raises.
"""

from __future__ import annotations

import queue
import threading
import time

from tiercheck.impl.collective import (
    Collective,
    CollectiveError,
    CollectiveTimeoutError,
    RankMissingError,
)

_RUNNING, _FINISHED = "running", "finished"


class _State:
    """Everything the ranks of one run() share, guarded by one condition variable."""

    def __init__(self, world_size: int) -> None:
        self.cond = threading.Condition()
        self.arrivals: dict[tuple[int, int], dict[int, list[int]]] = {}
        self.results: dict[tuple[int, int], list] = {}  # key -> [result, readers left]
        self.progress: list[tuple[int, str] | None] = [None] * world_size  # last (call, desc)
        self.status: list[str] = [_RUNNING] * world_size
        self.broken: CollectiveError | None = None


class LockstepRank(Collective):
    """One rank's handle: the collective interface for the code running on that rank."""

    def __init__(self, group: "LockstepGroup", state: _State, rank: int) -> None:
        super().__init__()
        self.rank = rank
        self.world_size = group.world_size
        self.timeout = group.timeout
        self._s = state

    def _arrive(self, call: int, desc: str) -> None:
        with self._s.cond:
            self._s.progress[self.rank] = (call, desc)

    def _peer_sync_points(self, call: int) -> dict[int, str]:
        with self._s.cond:
            return {r: p[1] for r, p in enumerate(self._s.progress) if p is not None and p[0] == call}

    def _where(self, r: int) -> str:
        p = self._s.progress[r]
        last = f"last sync point {p[1]} (call #{p[0]})" if p else "no collective yet"
        return f"rank {r}: {last}, {self._s.status[r]}"

    def _min_reduce(self, frame: list[int], call: int, index: int, desc: str) -> list[int]:
        s, key = self._s, (call, index)
        with s.cond:
            if s.broken is not None:
                raise type(s.broken)(f"rank {self.rank}: {desc} (call #{call}) abandoned: {s.broken}")
            arrived = s.arrivals.setdefault(key, {})
            arrived[self.rank] = frame
            if len(arrived) == self.world_size:
                frames = [arrived[r] for r in range(self.world_size)]
                s.results[key] = [[min(col) for col in zip(*frames)], self.world_size]
                del s.arrivals[key]
                s.cond.notify_all()
            deadline = time.monotonic() + self.timeout
            while key not in s.results:
                if s.broken is not None:
                    raise type(s.broken)(
                        f"rank {self.rank}: {desc} (call #{call}) abandoned: {s.broken}"
                    )
                missing = [r for r in range(self.world_size) if r not in arrived]
                gone = [r for r in missing if s.status[r] != _RUNNING]
                left = deadline - time.monotonic()
                if gone or left <= 0:
                    cls, why = (
                        (RankMissingError, "cannot complete")
                        if gone
                        else (CollectiveTimeoutError, f"timed out after {self.timeout:g}s")
                    )
                    detail = "; ".join(self._where(r) for r in missing)
                    s.broken = cls(
                        f"rank {self.rank}: collective {desc} (call #{call}) {why}: "
                        f"rank(s) {missing} did not arrive ({detail})"
                    )
                    s.cond.notify_all()
                    raise s.broken
                s.cond.wait(left)
            entry = s.results[key]
            entry[1] -= 1
            if entry[1] == 0:
                del s.results[key]
            return list(entry[0])


class LockstepGroup:
    """Runs one function on ``world_size`` ranks (threads) connected by lock-step collectives."""

    def __init__(self, world_size: int, *, timeout: float = 10.0) -> None:
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.world_size = world_size
        self.timeout = timeout
        # One long-lived thread per rank (starting threads per step dominated the cost of
        # small steps). A worker still busy from a run that gave up on it is replaced.
        self._workers: list = [None] * world_size

    def _worker(self, r: int) -> "queue.Queue":
        w = self._workers[r]
        if w is None or not w[0].is_alive():
            inbox: queue.Queue = queue.Queue()

            def loop(inbox=inbox) -> None:
                while True:
                    item = inbox.get()
                    if item is None:
                        return
                    body, rank = item
                    body(rank)

            t = threading.Thread(target=loop, name=f"lockstep-rank{r}", daemon=True)
            t.start()
            w = self._workers[r] = (t, inbox)
        return w[1]

    def close(self) -> None:
        for w in self._workers:
            if w is not None:
                w[1].put(None)
        self._workers = [None] * self.world_size

    def run(self, fn, *args, **kwargs) -> list:
        """fn(handle, *args, **kwargs) on every rank concurrently; the per-rank results.

        If any rank raises, the first failure is re-raised, preferring a root cause over the
        CollectiveErrors it provoked on other ranks. Each run starts a fresh group state."""
        s = _State(self.world_size)
        handles = [LockstepRank(self, s, r) for r in range(self.world_size)]
        results: list = [None] * self.world_size
        failures: list[tuple[int, BaseException, float]] = []

        def body(r: int) -> None:
            try:
                results[r] = fn(handles[r], *args, **kwargs)
                outcome = _FINISHED
            except BaseException as exc:  # noqa: BLE001 -- re-raised by run()
                outcome = f"failed ({type(exc).__name__})"
                with s.cond:
                    failures.append((r, exc, time.monotonic()))
            with s.cond:
                s.status[r] = outcome
                s.cond.notify_all()

        for r in range(self.world_size):
            self._worker(r).put((body, r))
        grace = self.timeout + 1.0  # after a failure, wait this long for the others to notice
        with s.cond:
            while _RUNNING in s.status:
                if failures and time.monotonic() - failures[0][2] > grace:
                    break
                s.cond.wait(0.1)
            stuck = [r for r, st in enumerate(s.status) if st == _RUNNING]
        for r in stuck:  # abandoned, still running: the next run gets a fresh thread
            self._workers[r] = None
        if not failures:
            return results
        root = next((f for f in failures if not isinstance(f[1], CollectiveError)), failures[0])
        rank, exc, _ = root
        if hasattr(exc, "add_note"):
            exc.add_note(f"(raised on lockstep rank {rank}" + (f"; ranks {stuck} still running)" if stuck else ")"))
        raise exc
