"""One rank's HiCache state: pools, transfer engines, storage workers, the radix tree, the
protocol's queues, and the small helpers every protocol path shares.

The protocol paths are mixins over this base (write_path, eviction, load_path,
storage_path, prefetch, inspect); impl/hicache/rank.py assembles them.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from tiercheck.impl.kvdata import fill_pages
from tiercheck.impl.pools import DevicePool, HostPool
from tiercheck.impl.storage import StorageBackend, StorageWorker
from tiercheck.impl.transfer import make_engine

from . import digest as dg
from .config import HiCacheConfig
from .errors import ProtocolError, ReplicaDivergenceError
from .metrics import Metrics
from .pages import PageRegistry
from .tree import ABSENT, RESIDENT, Node, RadixTree

SKIP = -1  # a single-writer follower's storage ack: it wrote nothing, defers to rank 0
INT64_MAX = (1 << 63) - 1


@dataclass
class WriteOp:  # one D->H copy (write_backup)
    pages: list[str]
    op_id: int


@dataclass
class LoadOp:  # one H->D copy (load_back) for an evicted chain, anchored at its last node
    pages: list[str]
    anchor_end: str
    op_id: int


@dataclass
class BackupOp:  # one H->L3 backup (write_backup_storage)
    pages: list[str]
    op_id: int | None  # storage worker op id; None for a single-writer follower (no write)
    ack: int | None = None  # pages the finished op reports (SKIP for a follower)
    stored: int | None = None  # pages it really stored (= ack unless failed-batch-acked)


@dataclass
class PrefetchOp:  # one L3->H read (prefetch_from_storage)
    req: tuple
    anchor_end: str | None  # None: the fetched pages hang below the root
    k: int  # pages of the request already cached when the prefetch started
    pages: list[str]  # the pages to read (the request's pages k..)
    slots: list[int]  # host slots reserved for them
    worker: StorageWorker | None = None
    op_id: int | None = None
    done: int | None = None  # pages this rank's read got, once it finished
    settled: bool = False  # no IO can touch the slots any more (finished or cancelled)
    start: float = 0.0  # time.monotonic() at submission (the timeout policy's clock)
    timed_out: bool = False  # this rank's timer fired (timeout policy)
    terminated: bool = False  # mark_terminate on this rank: a failed read, or a revoke
    revoked: bool = False  # the scheduler revoked it: the drain retires it
    freed: bool = False  # its host slots were freed early (revoke-frees-in-flight)


class RankBase:
    def __init__(
        self,
        cfg: HiCacheConfig,
        rank: int = 0,
        world_size: int = 1,
        backend: StorageBackend | None = None,
        *,
        owns_backend: bool = True,
    ) -> None:
        if not isinstance(cfg, HiCacheConfig):
            raise TypeError(f"cfg must be a HiCacheConfig, got {type(cfg).__name__}")
        if cfg.storage and backend is None:
            raise ValueError("hicache: storage is on but no storage backend was given")
        self.cfg = cfg
        self.rank = rank
        self.world_size = world_size
        self.coll = None  # the collective handle of the action being run (set by the group)
        # MLA single writer: every rank holds the same KV; rank 0 writes storage for all.
        self.content_rank = 0 if cfg.single_writer else rank
        self.source_rank = 0 if cfg.single_writer else rank  # whose storage keys reads use
        self.writer = not cfg.single_writer or rank == 0
        self.layout = cfg.layout
        lowest = cfg.slot_order == "lowest"
        self.device_pool = DevicePool(
            cfg.layout, cfg.device_pages, device=cfg.device, poison_on_free=cfg.poison_on_free,
            lowest_first=lowest,
        )
        self.host_pool = HostPool(cfg.layout, cfg.host_pages, poison_on_free=cfg.poison_on_free,
                                  lowest_first=lowest)
        mode = "manual" if cfg.manual else "auto"
        # Two engines, as SGLang has two streams: backups and load-backs finish independently.
        self.d2h = make_engine(self.device_pool, self.host_pool, mode=mode)
        self.h2d = make_engine(self.device_pool, self.host_pool, mode=mode)
        self.backend = backend
        self._owns_backend = owns_backend
        wmode = "manual" if cfg.manual else "threaded"
        self.backup_worker = None
        self.prefetch_worker = None
        if cfg.storage and self.writer:
            self.backup_worker = StorageWorker(
                backend, rank=rank, mode=wmode, batch_pages=cfg.storage_batch_pages
            )
        if cfg.storage and cfg.prefetch and not cfg.manual:
            self.prefetch_worker = StorageWorker(
                backend, rank=self.source_rank, mode="threaded", batch_pages=cfg.storage_batch_pages
            )
        self.reg = PageRegistry(cfg.layout.page_size)
        self.tree = RadixTree(self.reg)
        self.wq: list[WriteOp] = []
        self.lq: list[LoadOp] = []
        self.sq: list[BackupOp] = []
        self.pq: list[PrefetchOp] = []
        self.relq: list[list[int]] = []  # host_mem_release_queue
        self.durable: collections.OrderedDict[str, int] = collections.OrderedDict()  # hash -> round
        self.drain_round = 0
        self.plan: list[str] = []  # mirror release: last round's prepared plan (end hashes)
        self._commit: list[str] = []  # this round's committable part of the plan
        self.mismatch = 0
        self.closed = False
        self.dups: dict[str, None] = {}  # duplicate registry (insertion ordered), by end hash
        self.victims: list[str] = []  # reclaim victims since the last ready-count round
        self.last_victims: list[str] = []  # the victims the last passing round compared
        self.reclaimed: collections.deque[str] = collections.deque(maxlen=64)  # observability
        self.digest = 0
        self.metrics = Metrics()
        self.stored: set[str] = set()  # pages this rank's backups really stored
        self.lost: set[str] = set()  # pages deleted from this rank's store (store_lose)
        self._fail_host = False  # fault injection: host allocation fails during this step
        # CP load-back (cp_load.py): this rank's own access order, by end page, least
        # recent first (per-rank, never replicated); the last plan's victims (end paths).
        self.local_clock: list[str] = []
        self.cp_last_plan: list[tuple] = []
        # This rank's wall-clock access order (end pages, least recent first): every touch
        # of the replicated steps plus the rank's own local touches. Only the
        # lru-local-clock bug orders victims by it.
        self.wall: list[str] = []
        self.tree.on_touch = self._wall_touch
        # Request locks: running request (tokens) -> end page of the node it locked.
        self.running: dict[tuple, str] = {}

    # -- collectives -------------------------------------------------------------------------

    def _reduce(self, values, op: str, tag: str) -> list[int]:
        if self.coll is None:
            raise ProtocolError(f"rank {self.rank}: '{tag}' needs a collective but none is bound")
        return self.coll.all_reduce(values, op, tag)

    def _min_max(self, values, tag: str):
        if self.coll is None:
            raise ProtocolError(f"rank {self.rank}: '{tag}' needs a collective but none is bound")
        return self.coll.min_max(values, tag)

    @property
    def tracks_digest(self) -> bool:
        return self.cfg.reclaims_duplicates and self.world_size > 1

    def _digest_fields(self) -> list[int]:
        return dg.pair(self.digest, self.cfg.wire_bits) if self.tracks_digest else []

    def _check_digest(self, fields: list[int], where: str) -> None:
        """The digest part of a ready-count round: every rank asserts min == max."""
        if not self.tracks_digest:
            return
        lo, neg_lo = fields[0], fields[1]
        if not self.cfg.has("digest-unchecked") and not dg.pair_agrees(lo, neg_lo, self.cfg.wire_bits):
            raise ReplicaDivergenceError(
                f"rank {self.rank}: {where}: duplicate-reclaim victims diverged across ranks "
                f"(digest min {lo}, max {dg.wrap(-neg_lo, self.cfg.wire_bits)}; this rank "
                f"reclaimed {[self.reg.path[e] for e in self.victims]})"
            )
        self.last_victims = list(self.victims)
        self.victims = []
        self.digest = 0

    def _round(self, fields: list[int], tag: str) -> list[int]:
        """One ready-count round: a MIN all-reduce of ``fields`` with the reclaim digest
        pair riding along, the digest asserted; returns the reduced ``fields``."""
        red = self._reduce(list(fields) + self._digest_fields(), "min", tag)
        self._check_digest(red[len(fields):], tag)
        return red[: len(fields)]

    def _record_victim(self, node: Node) -> None:
        self.reclaimed.append(node.end)
        if self.tracks_digest:
            self.victims.append(node.end)
            self.digest = dg.fold(
                self.digest, dg.node_key(node.end), self.cfg.wire_bits,
                self.cfg.has("negated-pair-overflow"),
            )

    # -- pools --------------------------------------------------------------------------------

    def _host_ok(self, need: int, fail: bool) -> int:
        return int(not fail and not self._fail_host and self.host_pool.available() >= need)

    def _host_take(self, n: int, what: str) -> list[int]:
        slots = None if self._fail_host else self.host_pool.alloc(n)
        if slots is None:
            raise ProtocolError(f"rank {self.rank}: {what}: agreed host allocation of {n} pages failed")
        return slots

    def _dev_take(self, n: int, what: str) -> list[int]:
        slots = self.device_pool.alloc(n)
        if slots is None:
            raise ProtocolError(
                f"rank {self.rank}: {what}: {n} device pages needed, {self.device_pool.available()} free"
            )
        return slots

    def _fill(self, slots: list[int], pages: list[str]) -> None:
        """What the forward pass computes into fresh device pages."""
        fill_pages(self.device_pool, slots, pages, self.content_rank)

    def _free_node_host(self, node: Node) -> int:
        n = 0
        if node.host_slots is not None:
            n = len(node.host_slots)
            self.host_pool.free(node.host_slots)
        node.host_slots = None
        node.host = ABSENT
        return n

    def _free_node_dev(self, node: Node) -> int:
        n = 0
        if node.dev_slots is not None:
            n = len(node.dev_slots)
            self.device_pool.free(node.dev_slots)
        node.dev_slots = None
        node.dev = ABSENT
        return n

    # -- durable LRU (seed 000) ---------------------------------------------------------------

    def _mark_durable(self, h: str) -> None:
        self.durable[h] = self.drain_round
        self.durable.move_to_end(h)
        cap = self.cfg.durable_capacity
        while cap is not None and len(self.durable) > cap:
            self.durable.popitem(last=False)  # losing a mark only removes a candidate

    def _all_durable(self, node: Node) -> bool:
        return all(h in self.durable for h in node.pages)

    def _churn_guard(self, node: Node) -> bool:
        """Anti-churn: a fully durable node is not staged again (age-gated if configured)."""
        if not self.cfg.mirror_release or not self._all_durable(node):
            return False
        age = self.cfg.anti_churn_refresh_rounds
        if age is None:
            return True
        return all(self.drain_round - self.durable[h] < age for h in node.pages)

    # -- duplicate registry (seed 001) --------------------------------------------------------

    @staticmethod
    def _is_dup(node: Node | None) -> bool:
        """A settled full host duplicate: device copy present (not evicted), host resident."""
        return node is not None and node.dev != ABSENT and node.host == RESIDENT

    def _register_dup(self, node: Node) -> None:
        """_update_duplicate_tracking at a birth point; re-registering keeps the position."""
        if self.cfg.reclaims_duplicates and node.end not in self.dups and self._is_dup(node):
            self.dups[node.end] = None

    # -- tree helpers -----------------------------------------------------------------------

    def _order(self, node: Node):
        path = self.tree.path(node)
        if self.cfg.victim_order == "path":
            return path
        if self.cfg.has("lru-local-clock"):
            wall = {e: i for i, e in enumerate(self.wall)}
            return (wall.get(node.end, -1), path)  # the bug: a rank-local clock decides
        return self._order_lru(node)

    def _order_lru(self, node: Node):
        return (node.last_access, self.tree.path(node))

    def _wall_touch(self, node: Node) -> None:
        self.wall = [e for e in self.wall if e != node.end and self.tree.node_at(e) is not None] + [node.end]

    def _wall_split(self, upper: Node, lower: Node) -> None:
        """A split's upper half copies the lower half's stamp (the path breaks the tie:
        the upper half first)."""
        if lower.end in self.wall:
            i = self.wall.index(lower.end)
            self.wall.insert(i, upper.end)

    def wall_order(self) -> list[str]:
        return [e for e in self.wall if self.tree.node_at(e) is not None]

    def _remove_nodes(self, nodes) -> None:
        """Take nodes out of the tree: durable marks revoked, registry entries cleaned.
        Pools are the caller's business."""
        for n in nodes:
            for h in n.pages:
                self.durable.pop(h, None)
            self.dups.pop(n.end, None)
        for n in nodes:
            self.tree.remove(n)

    def _lock_path(self, node: Node, delta: int) -> None:
        for n in self.tree.path_to_root(node):
            n.lock_ref += delta

    def _by_path(self, path) -> Node | None:
        return self.tree.node_at(self.reg.of_path(path))

    # -- completion bookkeeping ------------------------------------------------------------

    def _wdone(self) -> int:
        c = self.d2h.completed()
        return sum(1 for op in self.wq if op.op_id < c)

    def _ldone(self) -> int:
        c = self.h2d.completed()
        return sum(1 for op in self.lq if op.op_id < c)

    def _sdone(self) -> list[int]:
        out = []
        for op in self.sq:
            if op.ack is None:
                break
            out.append(op.ack)
        return out

    def _sstored(self) -> list[int]:
        """Per finished backup (as ``_sdone``), the pages it really stored: what the ack
        reports, unless the ack lies (failed-batch-acked)."""
        return [op.ack if op.stored is None else op.stored for op in self.sq[: len(self._sdone())]]
