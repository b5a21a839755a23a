"""HiCacheRank: one TP rank's cache, assembled from the protocol paths."""

from __future__ import annotations

from .cp_load import CpLoadBack
from .eviction import Eviction
from .observe import Inspect
from .load_path import LoadPath
from .prefetch import Prefetch
from .state import RankBase
from .tree import ABSENT
from .storage_path import StoragePath
from .write_path import WritePath


class HiCacheRank(WritePath, Eviction, LoadPath, CpLoadBack, StoragePath, Prefetch, Inspect, RankBase):
    """Every replicated or sync method needs ``self.coll`` bound to a collective handle
    (the group binds it per action); local methods (``*_done``, ``prefetch_io``,
    ``store_lose``, ``registry_skew``, ``local_access``) do not."""

    def registry_skew(self) -> None:
        """Fault hook: this rank's duplicate-registry order drifts (oldest entry to the back)."""
        if self.dups:
            first = next(iter(self.dups))
            del self.dups[first]
            self.dups[first] = None

    def set_host_alloc_fault(self, on: bool) -> None:
        self._fail_host = bool(on)

    def lock_request(self, path, delta: int) -> bool:
        """inc_lock_ref (+1) / dec_lock_ref (-1) for a running request whose KV ends at
        token path ``path``: the node ending there and its ancestors stay on the device
        until the request finishes. Lock and unlock name the same node (a split keeps the
        lower half's end). False when no node ends there (nothing changed)."""
        if delta not in (1, -1):
            raise ValueError(f"lock_request: delta must be +1 or -1, got {delta!r}")
        node = self._by_path(path)
        if node is None:
            return False
        self._lock_path(node, delta)
        return True

    def lock_running(self, tokens) -> int:
        """A request starts running: match_prefix (split where the device match ends)
        and inc_lock_ref on the last device node; the node is remembered for the unlock.
        Returns the pages locked (0: nothing cached on the device, or already running)."""
        key = tuple(int(t) for t in tokens)
        if key in self.running:
            return 0
        hashes = self.reg.hashes(self.reg.whole_pages(key))
        last, pos = None, 0
        for node, k in self.tree.walk(hashes):
            if node.dev == ABSENT:
                break
            if k < len(node):
                node = self._split(node, k)
            last, pos = node, pos + k
        if last is None:
            return 0
        self.lock_request(self.tree.path(last), +1)  # inc_lock_ref(last_node)
        self.running[key] = last.end
        return pos

    def unlock_running(self, tokens) -> bool:
        """The request finished: dec_lock_ref on the node its lock named."""
        end = self.running.pop(tuple(int(t) for t in tokens), None)
        if end is None:
            return False
        node = self.tree.node_at(end)
        if node is not None:
            self.lock_request(self.tree.path(node), -1)  # dec_lock_ref on the node the lock named
        return True

    def match_prefix(self, tokens) -> dict:
        """Longest cached prefix: device pages, host-only pages below them, and the paths
        of the last device node and last host node (refreshes LRU on the path)."""
        hashes = self.reg.hashes(self.reg.whole_pages(tokens))
        dev = host = 0
        last_dev = last_host = None
        for node, k in self.tree.walk(hashes):
            self.tree.touch(node)
            if node.dev != "absent" and not host:
                dev += k
                if k == len(node):
                    last_dev = node
            elif node.host == "resident":
                host += k
                if k == len(node):
                    last_host = node
            else:
                break
        path = self.tree.path
        return {
            "device_pages": dev,
            "host_pages": host,
            "last_device_node": path(last_dev) if last_dev else None,
            "last_host_node": path(last_host) if last_host else None,
        }

    def pending(self) -> dict:
        """In-flight work on this rank (for flushing before shutdown)."""
        self._poll()
        return {"wq": len(self.wq), "lq": len(self.lq), "sq": len(self.sq), "pq": len(self.pq),
                "relq": len(self.relq), "store_calls": self.store_calls()}

    def check_events(self) -> None:
        """One scheduler iteration's sync round (SGLang's _sync_hicache_ready_counts): ONE
        MIN all-reduce of [write acks, load acks, storage queue sizes, plan triple, digest
        pair], then commit writes, ack loads, drain storage. Under early-return-collective,
        seed 004's three separate rounds (the first with its per-rank early return)."""
        if self.cfg.has("early-return-collective"):
            self.writing_check()
            self.loading_check()
            if self.cfg.storage:
                self.drain_storage_control_queues()
            return
        self._poll()
        fields = [self._wdone(), self._ldone()]
        if self.cfg.storage:
            fields += self._drain_fields()
        red = self._round(fields, "ready_counts")
        self._commit_writes(red[0])
        self._ack_loads(red[1])
        if self.cfg.storage:
            self._drain_apply(red[2:])

    def store_calls(self) -> int:
        """Store reads and writes this rank's workers have not finished: which rank a
        stalled flush waits on (the queues above are agreed across ranks)."""
        workers = {id(w): w for w in [self.backup_worker, self.prefetch_worker] + [op.worker for op in self.pq]}
        return sum(w.outstanding() for w in workers.values() if w is not None)

    def close(self) -> None:
        """Stop the storage workers (their queued ops cancelled) and close the backend.
        Each worker's thread is waited for once, at most 30 s: a backend call that never
        returns leaves its (daemon) thread behind rather than hanging the close."""
        for w in (self.backup_worker, self.prefetch_worker):
            if w is not None:
                w.close(drain=False, timeout=30)
        for op in self.pq:
            if op.worker is not None and op.worker is not self.prefetch_worker:
                op.worker.close(drain=False, timeout=30)
        if self.backend is not None and self._owns_backend:
            self.backend.close()
            self.backend = None
