"""Storage operations off the scheduler thread: one StorageWorker per TP rank.

The scheduler submits backups (host pages -> L3) and prefetches (L3 -> host pages) into a
FIFO; a single worker thread runs them in order and posts ``OpResult(op_id,
completed_pages, codes)`` on a completion queue that the scheduler drains with ``poll()``,
which never blocks. Only ``completed_pages`` (the leading successes) may be acted on:
a backup page after a failure is not durable even if it was written, and a prefetched page
after a miss is not served.

Modes:
- ``threaded``: ops run as soon as the thread gets to them.
- ``manual``: ops wait until the caller says ``run_next(max_pages=k)``, which runs the head
  op on the worker thread letting at most k pages succeed (the rest NOT_ATTEMPTED) and
  blocks until its result is on the completion queue: deterministic interleavings for
  tests and model-based conformance.
"""

from __future__ import annotations

import collections
import itertools
import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import torch

from tiercheck.errors import UserError

from . import codes
from .base import Counters, StorageBackend, byte_view, check_pages, completed_prefix, rank_key

log = logging.getLogger(__name__)

MODES = ("threaded", "manual")
BACKUP, PREFETCH = "backup", "prefetch"


class OpResult(NamedTuple):
    op_id: int
    completed_pages: int  # leading pages that succeeded: the only ones that count
    codes: tuple[int, ...]  # per page: 0 ok, else a negative code (see codes.py)


@dataclass
class _Op:
    op_id: int
    kind: str
    keys: list[str]
    tensors: list[torch.Tensor]  # held until the op finishes: the pages must stay alive
    done: threading.Event = field(default_factory=threading.Event)
    result: OpResult | None = None


_STOP = object()


class StorageWorker:
    def __init__(self, backend: StorageBackend, rank: int = 0, mode: str = "threaded",
                 batch_pages: int | None = None) -> None:
        if mode not in MODES:
            raise UserError(f"storage worker mode must be one of {', '.join(MODES)}, got {mode!r}")
        if batch_pages is not None and (not isinstance(batch_pages, int) or batch_pages < 1):
            raise UserError(f"storage worker batch_pages must be a positive int, got {batch_pages!r}")
        self.backend, self.rank, self.mode, self.batch_pages = backend, rank, mode, batch_pages
        self.stats = Counters()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._held: collections.deque[_Op] = collections.deque()  # manual: waiting for run_next
        self._inbox: queue.Queue = queue.Queue()  # (op, max_pages) for the worker thread
        self._done: queue.SimpleQueue = queue.SimpleQueue()  # the completion queue
        self._outstanding = 0  # submitted, result not yet posted
        self._cancel = False
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"storage-worker-r{rank}", daemon=True)
        self._thread.start()

    # -- submitting ------------------------------------------------------------------------

    def submit_backup(self, page_hashes: Sequence[str], pages: Sequence[torch.Tensor]) -> int:
        """Write pages (in order) under this rank's keys; returns the op id."""
        return self._submit(BACKUP, page_hashes, pages)

    def submit_prefetch(self, page_hashes: Sequence[str], outs: Sequence[torch.Tensor]) -> int:
        """Read consecutive pages into ``outs`` (host slots); stops at the first miss."""
        return self._submit(PREFETCH, page_hashes, outs)

    def _submit(self, kind: str, page_hashes: Sequence[str], tensors: Sequence[torch.Tensor]) -> int:
        keys = [rank_key(h, self.rank) for h in page_hashes]
        check_pages(keys, tensors, f"storage {kind}")
        with self._lock:
            if self._closed:
                raise RuntimeError(f"storage worker rank {self.rank}: {kind} submitted after close()")
            op = _Op(next(self._ids), kind, keys, list(tensors))
            self._outstanding += 1
            if self.mode == "threaded":
                self._inbox.put((op, None))
            else:
                self._held.append(op)
        return op.op_id

    # -- results -------------------------------------------------------------------------

    def poll(self) -> list[OpResult]:
        """All results posted so far, in completion order. Never blocks."""
        out = []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def wait_result(self, timeout: float | None = None) -> OpResult | None:
        """Block for the next result (None on timeout). For tests and shutdown paths."""
        try:
            return self._done.get(timeout=timeout)
        except queue.Empty:
            return None

    def outstanding(self) -> int:
        """Ops submitted whose result is not posted yet."""
        with self._lock:
            return self._outstanding

    def queued(self) -> list[int]:
        """Manual mode: ids of ops waiting for run_next, head first."""
        with self._lock:
            return [op.op_id for op in self._held]

    # -- manual driving ------------------------------------------------------------------

    def run_next(self, max_pages: int | None = None, timeout: float | None = None) -> OpResult:
        """Run the head op letting at most ``max_pages`` pages succeed; block until its
        result is on the completion queue, and return it (it stays on the queue)."""
        if self.mode != "manual":
            raise RuntimeError("run_next() is for mode='manual'; threaded workers run ops themselves")
        if max_pages is not None and max_pages < 0:
            raise ValueError(f"max_pages must be >= 0, got {max_pages}")
        with self._lock:
            if self._closed:
                raise RuntimeError(f"storage worker rank {self.rank}: run_next() after close()")
            if not self._held:
                raise RuntimeError(f"storage worker rank {self.rank}: no queued op to run")
            op = self._held.popleft()
            self._inbox.put((op, max_pages))
        if not op.done.wait(timeout):
            raise TimeoutError(f"storage op {op.op_id} ({op.kind}) still running after {timeout}s")
        return op.result

    # -- the worker thread ---------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            item = self._inbox.get()
            if item is _STOP:
                return
            op, max_pages = item
            if self._cancel:
                self._post(op, self._cancelled(op))
            else:
                self._post(op, self._execute(op, max_pages))

    def _post(self, op: _Op, result: OpResult) -> None:
        op.result = result
        self.stats.add(f"{op.kind}.ops")
        self.stats.add(f"{op.kind}.pages_completed", result.completed_pages)
        self.stats.add_codes(op.kind, result.codes)
        with self._lock:
            self._outstanding -= 1
        self._done.put(result)
        op.done.set()

    @staticmethod
    def _cancelled(op: _Op) -> OpResult:
        return OpResult(op.op_id, 0, (codes.CANCELLED,) * len(op.keys))

    def _execute(self, op: _Op, max_pages: int | None) -> OpResult:
        n = len(op.keys)
        budget = n if max_pages is None else min(n, max_pages)
        step = self.batch_pages or max(budget, 1)
        result = [codes.NOT_ATTEMPTED] * n
        i = 0
        while i < budget:
            j = min(i + step, budget)
            try:
                if op.kind == BACKUP:
                    res = self.backend.batch_put(op.keys[i:j], op.tensors[i:j])
                else:
                    res = self.backend.batch_get(op.keys[i:j], op.tensors[i:j])
                    # a read counts only if it filled the whole page
                    res = [codes.OK if r == byte_view(t).numel() else
                           (r if r < 0 else codes.LENGTH_MISMATCH)
                           for r, t in zip(res, op.tensors[i:j])]
                if len(res) != j - i:
                    raise RuntimeError(f"backend answered {len(res)} codes for {j - i} keys")
            except Exception as e:  # the worker thread must survive a broken backend
                log.warning("storage %s op %d on rank %d failed: %s", op.kind, op.op_id, self.rank, e)
                self.stats.add("exceptions")
                res = [codes.INTERNAL_ERROR] * (j - i)
            result[i:j] = res
            if any(r < 0 for r in res):
                break  # later pages cannot extend the completed prefix
            i = j
        return OpResult(op.op_id, completed_prefix(result), tuple(result))

    # -- shutdown ------------------------------------------------------------------------

    def close(self, drain: bool = True, timeout: float | None = None) -> bool:
        """Stop the worker. ``drain``: run every op still queued (manual ones too, with no
        page limit); else cancel them (result: 0 pages, CANCELLED). Either way every
        submitted op gets a result, so no host page stays protected forever. An op already
        inside a backend call finishes first. Returns False if the thread did not stop
        within ``timeout`` (a backend call still blocked)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                held, self._held = list(self._held), collections.deque()
                if not drain:
                    self._cancel = True
                for op in held:
                    self._inbox.put((op, None))
                self._inbox.put(_STOP)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self) -> "StorageWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close(drain=exc[0] is None)

    def __repr__(self) -> str:
        return f"StorageWorker(rank={self.rank}, mode={self.mode}, outstanding={self.outstanding()})"
