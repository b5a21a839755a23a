"""Deterministic control of an upstream SGLang 0.5.23 cache for conformance runs.

Conformance decides *when* each copy and storage operation finishes on each rank (the
spec's local actions) and *which* node a step evicts. SGLang decides that itself (CUDA
events, a storage thread, an LRU heap), so the adapter wraps those few points of one
cache instance; the protocol code that reacts to them runs unchanged:

* ``HeldEvent``: the finish event of a D->H or H->D copy reports done only once the
  adapter says the copy finished on that rank. On CPU every copy is already complete
  when it is submitted, so holding the ack is exactly "the DMA is still in flight".
* ``StorageGate``: the storage thread's backup of one operation waits for the adapter,
  which also says how many pages reach the store (the partial_storage fault).
* ``PathOrder``: an eviction strategy (SGLang's pluggable priority) that ranks nodes by
  the token path of their last page, the spec's order for host-side victims, and puts
  the node a step evicts first.
* ``one_victim``: a device eviction walk stops after the victim the step names (the
  spec takes one victim per evict step; a further victim is a further step).
* ``failing_host_alloc``: host allocation fails on this rank during one step
  (the alloc_asymmetry fault, injected on top of the real pool).
* ``PrefetchGate``: the prefetch read thread runs an operation's storage read only once
  the adapter says that read finished on this rank (or the operation was cut).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time


class HeldEvent:
    """Wraps a copy's finish event; query() is False until released. A blocking wait
    (synchronize, write_back's synchronous writing_check) completes the copy."""

    def __init__(self, event):
        self.event = event
        self.done = False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.done = True
        self.event.synchronize()

    def __getattr__(self, name):
        return getattr(self.event, name)


def hold_copy_acks(cc, unmerged: bool = True) -> None:
    """Every D->H / H->D ack the controller queues from now on carries a HeldEvent, and
    every D->H backup is submitted as its own copy operation.

    SGLang defers backup submission so that one flush merges an insert's backups into one
    copy (``flush=False`` in _execute_kv_backup); submitted one by one (HCC.write's default
    ``flush=True`` path) each copy's completion is its own step, which covers the merged
    submission's interleavings as the special case where they finish together.
    """

    def held_tail(ack_queue, n_before):
        for i in range(n_before, len(ack_queue)):
            ack = ack_queue[i]
            if not isinstance(ack.finish_event, HeldEvent):
                ack_queue[i] = ack._replace(finish_event=HeldEvent(ack.finish_event))

    start_writing, start_loading, write = cc.start_writing, cc.start_loading, cc.write

    def start_writing_held():
        n = len(cc.ack_write_queue)
        start_writing()
        held_tail(cc.ack_write_queue, n)

    def start_loading_held():
        n = len(cc.ack_load_queue)
        out = start_loading()
        held_tail(cc.ack_load_queue, n)
        return out

    def write_unmerged(*args, **kwargs):
        kwargs["flush"] = True
        return write(*args, **kwargs)

    cc.start_writing, cc.start_loading = start_writing_held, start_loading_held
    if unmerged:  # releases whose write() defers submission to a flush
        cc.write = write_unmerged


def release_head(ack_queue) -> bool:
    """The oldest copy still in flight on this rank finishes; False if none is."""
    for ack in ack_queue:
        ev = ack.finish_event
        if isinstance(ev, HeldEvent) and not ev.done:
            ev.done = True
            return True
    return False


def ready_count(ack_queue) -> int:
    """Finished copies at the head of the queue (what SGLang's ready count reads)."""
    n = 0
    for ack in ack_queue:
        if not ack.finish_event.query():
            break
        n += 1
    return n


class StorageGate:
    """The backup thread takes one operation at a time; it waits here until the adapter
    lets it finish, storing only the first ``pages`` pages (then the write fails)."""

    def __init__(self, cc, timeout: float = 20.0):
        import sglang.srt.managers.cache_controller as cc_mod

        # One page per storage batch: a write failing after k pages then reports k (the
        # batch loop is unchanged; 128-page batches would round the report down). The
        # constant is module-global: restore() puts the release's value back.
        self._cc_mod, self._batch = cc_mod, cc_mod.STORAGE_BATCH_SIZE
        cc_mod.STORAGE_BATCH_SIZE = 1
        self.cc = cc
        self.timeout = timeout
        self.tokens: queue.Queue = queue.Queue()
        self.budget = None
        backup, page_set = cc._page_backup, cc.page_set_func

        def gated_backup(operation):
            pages = self._wait_token()
            if pages is None:
                return None  # shutting down: nothing more is written
            self.budget = pages
            try:
                return backup(operation)
            finally:
                self.budget = None

        def budgeted_set(hashes, host_indices, extra_info=None):
            if self.budget is not None:
                if self.budget < len(hashes):
                    return False  # the store refuses the rest of this operation
                self.budget -= len(hashes)
            return page_set(hashes, host_indices, extra_info)

        cc._page_backup, cc.page_set_func = gated_backup, budgeted_set
        # (An MLA follower's _page_backup writes nothing, backup_skip, and is gated the same.)

    def _wait_token(self):
        """The pages the adapter lets the next backup store; None once the cache stops."""
        while True:
            try:
                return self.tokens.get(timeout=0.1)
            except queue.Empty:
                if self.cc.storage_stop_event.is_set():
                    return None

    def restore(self) -> None:
        self._cc_mod.STORAGE_BATCH_SIZE = self._batch

    def finish(self, pages: int) -> None:
        """Let the oldest pending backup finish with ``pages`` pages stored; returns once
        its ack is queued (the thread runs it meanwhile)."""
        q = self.cc.ack_backup_queue
        before = q.qsize()
        self.tokens.put(pages)
        wait_for(lambda: q.qsize() > before, "SGLang's storage backup thread", self.timeout)


class PrefetchGate:
    """The prefetch read thread (prefetch_io_aux_func) waits here before each operation's
    storage read until ``finish`` (the spec's prefetch_io) or ``release`` (a cut read, which
    then reads nothing: the operation is terminated); ``got``: pages each read brought in
    (the sum of its batch reads' hits, what the read's first ack reports before the vote)."""

    def __init__(self, cc, timeout: float = 20.0):
        self.timeout = timeout
        self.allowed: set = set()
        self.got: dict = {}
        self._cond = threading.Condition()
        self._hits: dict = {}
        transfer, read_batch = cc._page_transfer, cc._page_transfer_kv_batch

        def gated_transfer(operation):
            with self._cond:
                while operation.id not in self.allowed and not cc.storage_stop_event.is_set():
                    self._cond.wait(0.1)
            try:
                return transfer(operation)
            finally:
                with self._cond:
                    self.got[operation.id] = self._hits.pop(operation.id, 0)
                    self._cond.notify_all()

        def counted_batch(operation, *args, **kwargs):
            hits = read_batch(operation, *args, **kwargs)
            self._hits[operation.id] = self._hits.get(operation.id, 0) + hits
            return hits

        cc._page_transfer, cc._page_transfer_kv_batch = gated_transfer, counted_batch

    def release(self, op_id) -> None:
        with self._cond:
            self.allowed.add(op_id)
            self._cond.notify_all()

    def finish(self, op_id) -> None:
        """Let the read of operation ``op_id`` run; returns once it has."""
        self.release(op_id)
        wait_for(lambda: op_id in self.got, "SGLang's prefetch read thread", self.timeout)


def queued(q) -> list:
    """A snapshot of a queue.Queue's items, oldest first."""
    with q.mutex:
        return list(q.queue)


def last_prefetch_ack(ack_queue, operation) -> int:
    """Acks up to and including the operation's completion ack (0: not queued yet)."""
    for i, ack in enumerate(queued(ack_queue)):
        if ack.operation is operation and ack.completed_req:
            return i + 1
    return 0


def wait_for(ready, what: str, timeout: float = 20.0):
    """Poll ``ready()`` until it returns something true (a background thread's step)."""
    deadline = time.monotonic() + timeout
    while True:
        out = ready()
        if out:
            return out
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not finish within {timeout:g}s")
        time.sleep(0.001)


class PathOrder:
    """Eviction priority by the token path of a node's last page (the spec's order for
    host-side victims, standing for LRU); ``target`` goes first (the step's victim)."""

    def __init__(self):
        self.target = None

    def get_priority(self, node):
        if node.id == self.target:
            return (0, ())
        return (1, node_path(node))


def node_path(node) -> tuple:
    """Tokens from the root to the node's last page."""
    parts = []
    while node is not None and node.parent is not None:
        parts.append(tuple(node.key.token_ids))
        node = node.parent
    return tuple(t for part in reversed(parts) for t in part)


@contextlib.contextmanager
def one_victim(cache, with_progress: bool = True):
    """The device eviction walk of one evict() call stops after its first victim.
    ``with_progress``: the walk step returns (node id, progress), else the node id."""
    walk = cache._evict_device_next_node
    taken = []

    def next_node(component_type, tracker):
        if taken:
            return (None, False) if with_progress else None
        out = walk(component_type, tracker)
        node_id = out[0] if with_progress else out
        if node_id is not None:
            taken.append(node_id)
        return out

    cache._evict_device_next_node = next_node
    try:
        yield taken
    finally:
        del cache._evict_device_next_node  # back to the class method


@contextlib.contextmanager
def failing_host_alloc(cc, fail: bool):
    """Host allocations fail on this rank for the duration (alloc_asymmetry fault)."""
    if not fail:
        yield
        return
    pool = cc.mem_pool_host
    pool.alloc = lambda *args, **kwargs: None
    try:
        yield
    finally:
        del pool.alloc
