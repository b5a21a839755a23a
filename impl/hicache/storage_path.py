"""Host -> storage: write_backup_storage through the rank's StorageWorker, the backup
finishing (manual or threaded), drain_storage_control_queues with durable marks, the host
release queue, and the mirror-release prepare/commit round of seed 000."""

from __future__ import annotations

from tiercheck.impl.storage import FaultyBackend, rank_key

from . import digest as dg
from . import metrics as mt
from .errors import ProtocolError
from .state import INT64_MAX, SKIP, BackupOp
from .tree import RESIDENT, Node

STORAGE_TIMEOUT = 120.0  # seconds a manual storage step may take (a real backend call)


class StoragePath:
    # -- write_backup_storage ------------------------------------------------------------

    def _host_slot(self, page: str) -> int:
        node = self.tree.owner[page]
        return node.host_slots[self.tree.offset(node, page)]

    def _start_backup(self, pages: list[str]) -> None:
        """H->L3 for pages whose host copy is resident (the nodes hold a host reference).
        The worker reads the host slots when the op runs, not now: a slot freed or reused
        before that shows up as wrong bytes in the store."""
        if self.writer:
            tensors = [self.host_pool.page(self._host_slot(h)) for h in pages]
            op = BackupOp(list(pages), self.backup_worker.submit_backup(pages, tensors))
        else:
            # Single-writer follower (MLA backup_skip): no write, an ack all the same.
            op = BackupOp(list(pages), None, ack=None if self.cfg.manual else SKIP)
        self.sq.append(op)

    def storage_backup_done(self, pages: int | None = None) -> int:
        """Manual mode: the head unfinished backup finishes, letting at most ``pages``
        pages succeed (None: all that the backend stores). Returns the ack it reports."""
        op = next((o for o in self.sq if o.ack is None), None)
        if op is None:
            raise ProtocolError(f"rank {self.rank}: storage_backup_done: no backup in flight")
        if op.op_id is None:
            op.ack = SKIP
            return SKIP
        res = self.backup_worker.run_next(max_pages=pages, timeout=STORAGE_TIMEOUT)
        self.backup_worker.poll()  # run_next leaves the result on the completion queue
        if res.op_id != op.op_id:
            raise ProtocolError(f"rank {self.rank}: storage worker ran op {res.op_id}, expected {op.op_id}")
        self._record_backup(op, res)
        return op.ack

    def _record_backup(self, op: BackupOp, res) -> None:
        done = res.completed_pages
        self.stored.update(op.pages[:done])
        self.lost.difference_update(op.pages[:done])
        self.metrics.add(mt.STORAGE_FAILED_PAGES, len(op.pages) - done)
        # The ack reports the completed prefix; failed-batch-acked reports the whole op.
        op.ack = len(op.pages) if self.cfg.has("failed-batch-acked") else done
        op.stored = done

    def _poll(self) -> None:
        """Pick up what the worker threads finished (threaded mode)."""
        if self.cfg.manual:
            return
        if self.backup_worker is not None:
            by_id = {o.op_id: o for o in self.sq if o.ack is None}
            for res in self.backup_worker.poll():
                op = by_id.get(res.op_id)
                if op is not None:
                    self._record_backup(op, res)
        if self.prefetch_worker is not None:
            by_id = {o.op_id: o for o in self.pq if not o.settled}
            for res in self.prefetch_worker.poll():
                op = by_id.get(res.op_id)
                if op is not None:
                    op.done, op.settled = res.completed_pages, True

    # -- drain_storage_control_queues -----------------------------------------------------

    def drain_storage_control_queues(self) -> tuple[int, int]:
        """One MIN all-reduce of the queue sizes (with the digest pair and the mirror-release
        plan triple), then drain that many backup acks and host releases on every rank,
        then the mirror-release round. Returns (acks drained, releases drained)."""
        self._poll()
        fields = self._drain_fields()
        return self._drain_apply(self._round(fields, "drain_storage_control_queues"))

    def _drain_fields(self) -> list[int]:
        self._drain_sdone = self._sdone()  # the acks this round's sizes count
        fields = [len(self._drain_sdone), len(self.relq)]
        if self.cfg.mirror_release_on:
            fields += self._plan_fields()
        return fields + self._revoke_fields()

    def _drain_apply(self, red: list[int]) -> tuple[int, int]:
        # _drain_revoke first, as the seed's drain does (the readiness of each prefetch
        # rides at the end of the round: the prefetch queue is the same length everywhere)
        red = self._retire_revoked(red)
        nb, nr = red[0], red[1]
        sdone = self._drain_sdone
        mirror = self.cfg.mirror_release_on
        completed = sdone[:nb]
        if self.cfg.single_writer and nb:
            # Synced ack slots: followers send the sentinel, so MIN is the writer's count.
            wire = [INT64_MAX if a == SKIP else a for a in completed]
            completed = [0 if v == INT64_MAX else v for v in self._reduce(wire, "min", "drain_ack_slots")]
        self.drain_round += 1
        ps = self.layout.page_size
        for op, done, own in zip(self.sq[:nb], completed, sdone[:nb]):
            # release_host: the ack drops the host reference of the backup.
            if self.cfg.has("split-during-backup"):
                end = self.tree.node_at(op.pages[-1])
                targets = [end] if end is not None else []
            else:
                targets = self.tree.covering(op.pages)
            for n in targets:
                n.host_ref -= 1
            if own != SKIP:
                self.metrics.add(mt.BACKUPED, own * ps)
        acked = list(zip(self.sq[:nb], completed))
        self.sq = self.sq[nb:]
        freed = [s for slots in self.relq[:nr] for s in slots]
        if freed:
            self.host_pool.free(freed)
        self.relq = self.relq[nr:]
        if not mirror:
            return nb, nr
        # The agreed plan is committed before this round's acks add durable marks: a mark
        # can evict a planned entry's from a bounded durable LRU on this rank only, and the
        # live re-check would then skip a release the other ranks make.
        late = self.cfg.has("durable-evicted-while-planned") or self.cfg.has("release-no-consensus")
        if late:
            self._mark_acked(acked)
        go_on = self._release_round(red[2:])
        if not late:
            self._mark_acked(acked)
        if go_on:
            self.plan = self._prepare_plan()
        return nb, nr

    def _mark_acked(self, acked) -> None:
        """Durable: only the completed prefix of each ack (an ack is not success)."""
        for op, done in acked:
            k = len(op.pages) if self.cfg.has("durable-on-ack") else done
            for h in op.pages[: max(k, 0)]:
                if h in self.tree.owner:
                    self._mark_durable(h)

    # -- mirror release (seed 000) ------------------------------------------------------------

    def is_redundant_mirror(self, node: Node | None) -> bool:
        """A release candidate: device resident, host resident, every page durable, idle."""
        if node is None or node.dev != RESIDENT or node.host != RESIDENT:
            return False
        if not self._all_durable(node):
            return False
        if self.cfg.has("release-busy"):
            return True
        return node.lock_ref == 0 and node.host_ref == 0 and not node.lbp

    def _plan_triple(self) -> tuple[int, int, int]:
        """(count, tokens, digest): the plan's length, and the tokens and digest of the
        entries this rank would commit (still candidates now, before this round's acks).
        Durable marks are per rank, so a stale entry can be live on one rank only;
        agreeing on the plan alone would let one rank release a mirror the other keeps."""
        self._commit = [e for e in self.plan if self.is_redundant_mirror(self.tree.node_at(e))]
        tokens = sum(len(self.tree.node_at(e)) for e in self._commit)
        d = dg.digest_of(
            (dg.node_key(e) for e in self._commit), self.cfg.wire_bits,
            self.cfg.has("negated-pair-overflow"),
        )
        return len(self.plan), tokens, d

    def _plan_fields(self) -> list[int]:
        out: list[int] = []
        for v in self._plan_triple():
            out += dg.pair(v, self.cfg.wire_bits)
        return out

    def _release_round(self, fields: list[int]) -> bool:
        """Commit last round's plan if every rank proposed the identical (count, tokens,
        digest) triple (negated pairs: one MIN gives min and max). True when the next plan
        is to be prepared (the caller does, after this round's durable marks)."""
        bits = self.cfg.wire_bits
        if self.closed:
            return False
        if self.cfg.has("release-no-consensus"):
            self._execute_plan(self._prepare_plan())  # mutation before consensus
            return False
        if dg.wrap(-fields[1], bits) > 0:  # some rank has a plan
            agree = all(dg.pair_agrees(fields[i], fields[i + 1], bits) for i in (0, 2, 4))
            if agree:
                self._execute_plan(self._commit)  # acks never un-make a candidate
                self.mismatch = 0
            else:
                self.mismatch += 1
                self.metrics.add(mt.PLAN_MISMATCH)
                self.closed = self.mismatch >= self.cfg.fail_close_after
                self.plan = []
                if self.closed:
                    return False
        return True

    def _prepare_plan(self) -> list[str]:
        """Candidates (derived from state, in victim order) until the deficit is covered."""
        want = max(0, self.cfg.host_free_target - self.host_pool.available())
        if want == 0 or self.closed:
            return []
        cands = sorted((n for n in self.tree.nodes() if self.is_redundant_mirror(n)), key=self._order)
        plan, pages = [], 0
        for n in cands:
            if pages >= want:
                break
            plan.append(n.end)
            pages += len(n)
        return plan

    def _execute_plan(self, plan: list[str]) -> None:
        for e in plan:
            node = self.tree.node_at(e)
            if self.is_redundant_mirror(node):  # re-checked live
                got = self._free_node_host(node)
                node.released = True
                self.metrics.add(mt.MIRROR_RELEASED, got * self.layout.page_size)

    # -- the environment -------------------------------------------------------------------

    def store_lose(self, path) -> int:
        """The store drops this rank's copy of the page ending at ``path`` (eviction,
        restart). Returns the backend's code."""
        h = self.reg.of_path(path)
        key = rank_key(h, self.rank)
        b = self.backend
        res = b.evict([key]) if isinstance(b, FaultyBackend) else b.delete([key])
        self.lost.add(h)
        self.stored.discard(h)
        return res[0]

    def storage_fault(self, method: str, *args, **kwargs):
        """Arm a FaultyBackend hook on this rank (fail_from, fail_all, evict_after_ack...)."""
        if not isinstance(self.backend, FaultyBackend):
            raise ProtocolError(f"rank {self.rank}: storage faults need a FaultyBackend")
        if method not in ("fail_from", "fail_all", "evict_after_ack", "clear"):
            raise ValueError(f"unknown storage fault {method!r}")
        getattr(self.backend, method)(*args, **kwargs)
