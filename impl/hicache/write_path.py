"""Device -> host: insert (split, un-evict, _inc_hit_count), write_backup with host
allocation agreed across ranks, the D->H copy, and writing_check."""

from __future__ import annotations

from . import digest as dg
from . import metrics as mt
from .errors import DeviceFullError
from .state import WriteOp
from .tree import ABSENT, RESIDENT, WRITING, Node


class WritePath:
    # -- insert -----------------------------------------------------------------------------

    def _ceil_match(self, cached: str, wanted: str) -> bool:
        """page-ceil-match: the token match is rounded up to the page it stops in, so a
        sibling page sharing its leading token is taken for the request's page."""
        reg = self.reg
        return reg.parent[cached] == reg.parent[wanted] and reg.path[cached][-reg.page_size] == reg.path[wanted][-reg.page_size]

    def _walk(self, hashes: list[str]):
        return self.tree.walk(hashes, self._ceil_match if self.cfg.has("page-ceil-match") else None)

    def insert_need(self, hashes: list[str]) -> int:
        """Device pages insert() allocates: un-evicted nodes plus the new leaf."""
        need = covered = 0
        for node, k in self._walk(hashes):
            if node.dev == ABSENT:
                need += k
            covered += k
        return need + len(hashes) - covered

    def _insert_lanes(self, hashes: list[str]) -> list[int]:
        """CP owner lane of each page insert() takes (path position mod cp_lanes)."""
        lanes = []
        for i, h in enumerate(hashes):
            node = self.tree.owner.get(h)
            if node is None or node.dev == ABSENT:
                lanes.append(i % self.cfg.cp_lanes)
        return lanes

    def insert(self, tokens, fail: bool = False, evict_if_needed: bool = True) -> int:
        """insert(): walk, split at the divergence page, un-evict (duplicate birth), add the
        new leaf, _inc_hit_count -> write_backup. Returns the pages that were new to the
        device. ``fail``: this rank's host allocation fails during the step (fault)."""
        hashes = self.reg.hashes(self.reg.whole_pages(tokens))
        need = self.insert_need(hashes)
        if need > self.device_pool.available() and evict_if_needed:
            # The request holds its matched prefix (lock_ref) while the scheduler evicts.
            walk = self._walk(hashes)
            held = walk[-1][0] if walk else None
            if held is not None:
                self._lock_path(held, +1)
            try:
                self.evict((need - self.device_pool.available()) * self.layout.page_size)
            finally:
                if held is not None:
                    self._lock_path(held, -1)
        if need > self.device_pool.available():
            raise DeviceFullError(
                f"rank {self.rank}: insert needs {need} device pages, {self.device_pool.available()} free"
            )
        if self.cfg.cp_lanes > 1 and any(self.lane_deficits(self._insert_lanes(hashes))):
            raise DeviceFullError(f"rank {self.rank}: insert lacks room on a CP owner lane")
        to_write: list[Node] = []
        pos = 0
        last = None  # the last node walked (after its split): the new leaf's parent
        for node, k in self._walk(hashes):
            if k < len(node.pages):
                node = self._split(node, k)
            if node.dev == ABSENT:
                # Evicted: adopt the request's fresh device copy (KV recomputation); with
                # a resident host copy this is a duplicate birth point.
                node.dev_slots = self._dev_take(k, "insert (un-evict)")
                self._fill(node.dev_slots, node.pages)
                node.dev = RESIDENT
                self._register_dup(node)
            else:
                self._hit(node, to_write)
            self.tree.touch(node)
            pos += k
            last = node
        if pos < len(hashes):
            leaf = self.tree.add(last, hashes[pos:])
            leaf.dev_slots = self._dev_take(len(hashes) - pos, "insert")
            self._fill(leaf.dev_slots, leaf.pages)
            self._hit(leaf, to_write)
        if not self.cfg.write_back:
            self._write_backups(to_write, fail)
        return need

    def _split(self, node: Node, k: int) -> Node:
        """_split_node plus the protocol's inheritance rules. The upper half holds one
        host reference per in-flight storage backup covering it (they read its pages);
        a prefetch anchor's reference stays with the lower half (the anchor's identity).
        The upper half keeps load_back_pending, and is a duplicate birth point."""
        upper = self.tree.split(node, k)
        if self.cfg.has("split-slice-off-by-one") and node.dev_slots is not None:
            # the bug: the lower half's device value is sliced one page early
            node.dev_slots = (upper.dev_slots[-1:] + node.dev_slots)[:-1]
        self._wall_split(upper, node)
        at = upper.end
        backups = sum(1 for op in self.sq if at in op.pages)
        upper.host_ref = 0 if self.cfg.has("split-during-backup") else backups
        if self.cfg.has("split-drops-pending-mark"):
            upper.lbp = False
        self._register_dup(upper)
        return upper

    def _hit(self, node: Node, to_write: list[Node]) -> None:
        """_inc_hit_count: write-through stages a node to host on its threshold-th hit."""
        if self.cfg.write_back:
            return
        node.hit_count = min(node.hit_count + 1, self.cfg.write_threshold)
        if (
            node.host == ABSENT
            and node.hit_count >= self.cfg.write_threshold
            and not self._churn_guard(node)
        ):
            to_write.append(node)

    # -- write_backup ----------------------------------------------------------------------

    def _write_backups(self, to_write: list[Node], fail: bool) -> None:
        """write_backup for each node the insert wants staged, in the same order on every
        rank. The ranks first agree on how many there are; where they disagree nobody
        stages (the replicas diverged)."""
        if self.cfg.has("partial-backup-leak"):
            for node in to_write:  # the bug: each rank decides on its own
                if self._allocate_host(len(node), fail, agree=False):
                    self._stage(node)
                else:
                    self._reject(len(node), "host_alloc_failed", "write_through")
            return
        mins, maxs = self._min_max([len(to_write)], "write_backup_count")
        for i in range(maxs[0]):
            if i >= mins[0]:
                if i < len(to_write):
                    self._reject(len(to_write[i]), "rank_disagreement", "write_through")
                continue
            node = to_write[i]
            if self._allocate_host(len(node), fail, key=dg.node_key(node.end)):
                self._stage(node)

    def _allocate_host(self, need: int, fail: bool, key: int | None = None, agree: bool = True,
                       stage: str = "write_through") -> bool:
        """Host room for ``need`` pages on every rank, with evict_host as the fallback.

        Agreed: a MIN all-reduce of the local outcome before and after the fallback
        eviction (which every rank runs), so all ranks take the pages or none does.
        ``key`` (a node key) is compared in the same round: different nodes -> nobody."""
        if not agree:
            if not self._host_ok(need, fail):
                self.evict_host(need)
            return bool(self._host_ok(need, fail))
        fields = [self._host_ok(need, fail)] + ([key, -key] if key is not None else [])
        red = self._reduce(fields, "min", "host_alloc")
        if key is not None and red[1] != -red[2]:
            self._reject(need, "rank_disagreement", stage)
            return False
        if red[0] == 1:
            return True
        self.evict_host(need)
        red = self._reduce([self._host_ok(need, fail)], "min", "host_alloc_retry")
        if red[0] != 1:
            self._reject(need, "host_alloc_failed", stage)
            return False
        return True

    def _reject(self, pages: int, reason: str, stage: str) -> None:
        self.metrics.add(mt.rejected(reason, stage), pages * self.layout.page_size)

    def _stage(self, node: Node) -> None:
        """Take host slots and submit the D->H copy; the node is locked until the ack."""
        node.host_slots = self._host_take(len(node), "write_backup")
        node.host = WRITING
        node.lock_ref += 1
        op = self.d2h.submit_d2h(node.dev_slots, node.host_slots)
        self.wq.append(WriteOp(list(node.pages), op))
        self.metrics.add(mt.HOST_WRITE, len(node) * self.layout.page_size)

    # -- the D->H copy finishing on this rank -------------------------------------------------

    def write_dma_done(self) -> int | None:
        """Manual mode: the head D->H copy finishes (its bytes move now)."""
        return self.d2h.complete_next()

    # -- writing_check ----------------------------------------------------------------------

    def writing_check(self) -> int:
        """MIN of finished D->H copies across ranks (with the reclaim digest pair), then
        commit that many: host resident, write lock dropped, storage backup started.
        Every rank enters the all-reduce, even with nothing in flight: the queues can
        differ across ranks once something went wrong. Returns the number committed."""
        done = self._wdone()
        if self.cfg.has("early-return-collective") and self.wq and done == 0:
            return 0  # the bug: a per-rank early return skips the all-reduce
        n = self._round([done], "writing_check")[0]
        self._commit_writes(n)
        return n

    def _commit_writes(self, n: int) -> None:
        for op in self.wq[:n]:
            for node in self.tree.covering(op.pages):
                node.host = RESIDENT
                # split-write-lock-leak (seed 004): the ack unlocks only the node the write
                # was registered with; the upper half a split cut off keeps its copied lock.
                leak = self.cfg.has("split-write-lock-leak") and node.end != op.pages[-1]
                if not self.cfg.write_back and not leak:
                    node.lock_ref -= 1
                if self.cfg.storage:
                    node.host_ref += 1  # protect_host for write_backup_storage
                self._register_dup(node)  # backup ack: a duplicate birth point
            if self.cfg.storage:
                self._start_backup(op.pages)
        self.wq = self.wq[n:]
