"""Storage -> host: prefetch_from_storage (protect the anchor, reserve host slots, read
through a StorageWorker), the read finishing per rank, and check_prefetch_progress
(termination agreed with MAX, completed pages with MIN; fetched prefix inserted as
host-only nodes; what the tree had freed; the unused tail queued for release). How else
a prefetch ends: the timeout policy's timer, a read failing on one rank (mark_terminate),
and revoke, retired by the drain round once every rank's read has settled."""

from __future__ import annotations

import hashlib
import time

from tiercheck.impl.storage import StorageWorker, rank_key
from tiercheck.impl.storage import codes

from . import metrics as mt
from .errors import ProtocolError
from .state import PrefetchOp
from .tree import ABSENT, RESIDENT

STORAGE_TIMEOUT = 120.0


def _anchor_key(k: int, end: str | None) -> int:
    h = hashlib.blake2b(f"{k}|{end}".encode(), digest_size=8).hexdigest()
    return int(h, 16) >> 4


class Prefetch:
    def _anchor(self, hashes: list[str]):
        """(matched pages, anchor end or None) when the request can prefetch, else None:
        the fetched pages hang below the last matched node, which must end exactly where
        the match ends and hold a host copy (or be the root)."""
        k = self.tree.matched(hashes)
        if k == len(hashes):
            return None
        if k == 0:
            return 0, None
        node = self.tree.owner[hashes[k - 1]]
        if node.end != hashes[k - 1] or node.host != RESIDENT:
            return None
        return k, node.end

    def prefetch_from_storage(self, tokens, fail: bool = False) -> int | None:
        """Start a prefetch for the request ``tokens``; its index in the prefetch queue,
        or None when the ranks agree not to (nothing to fetch, no storage hit, no room)."""
        if not (self.cfg.storage and self.cfg.prefetch):
            return None
        hashes = self.reg.hashes(self.reg.whole_pages(tokens))
        req = tuple(int(t) for t in tokens)
        anchor = None if any(op.req == req for op in self.pq) else self._anchor(hashes)
        exists = 0
        if anchor is not None:
            key = rank_key(hashes[anchor[0]], self.source_rank)
            exists = int(self.backend.batch_exists([key])[0] == codes.EXISTS)
        ident = _anchor_key(*anchor) if anchor is not None else 0
        mins, maxs = self._min_max([int(anchor is not None), ident, exists], "prefetch_hit_query")
        if mins[0] == 0 or mins[1] != maxs[1] or maxs[2] == 0:
            return None
        k, anchor_end = anchor
        n = len(hashes) - k
        anchor_node = self.tree.node_at(anchor_end) if anchor_end else None
        # protect_host first: the fallback host eviction must not take the anchor away.
        if anchor_node is not None:
            anchor_node.host_ref += 1
        if not self._allocate_host(n, fail, stage="storage_prefetch"):
            if anchor_node is not None:
                anchor_node.host_ref -= 1
            return None
        slots = self._host_take(n, "prefetch_from_storage")
        op = PrefetchOp(req, anchor_end, k, hashes[k:], slots, start=time.monotonic())
        outs = [self.host_pool.page(s) for s in slots]
        if self.cfg.manual:
            # One worker per read, so reads finish in any order the driver chooses.
            op.worker = StorageWorker(self.backend, rank=self.source_rank, mode="manual",
                                      batch_pages=self.cfg.storage_batch_pages)
            op.op_id = op.worker.submit_prefetch(op.pages, outs)
        else:
            op.worker = self.prefetch_worker
            op.op_id = self.prefetch_worker.submit_prefetch(op.pages, outs)
        self.pq.append(op)
        return len(self.pq) - 1

    def prefetch_io(self, index: int) -> int:
        """Manual mode: this rank's read for prefetch ``index`` finishes now: it gets the
        leading pages the store holds. Returns the pages read."""
        op = self._prefetch_op(index)
        if op.settled:
            raise ProtocolError(f"rank {self.rank}: prefetch {index} already finished")
        res = op.worker.run_next(timeout=STORAGE_TIMEOUT)
        op.worker.close()
        op.done, op.settled = res.completed_pages, True
        return op.done

    def _prefetch_op(self, index: int) -> PrefetchOp:
        if not 0 <= index < len(self.pq):
            raise ProtocolError(f"rank {self.rank}: no prefetch {index} ({len(self.pq)} in flight)")
        return self.pq[index]

    def _settle(self, op: PrefetchOp) -> None:
        """No IO may touch the reserved slots once the op is terminated: cancel a read that
        has not run (manual) or wait for the one in flight (threaded)."""
        if op.settled:
            return
        if self.cfg.manual:
            op.worker.close(drain=False)
            op.worker.poll()
        else:
            while not op.settled:
                res = op.worker.wait_result(timeout=STORAGE_TIMEOUT)
                if res is None:
                    raise ProtocolError(f"rank {self.rank}: prefetch read {op.op_id} did not finish")
                match = next((o for o in self.pq if o.op_id == res.op_id), None)
                if match is not None:
                    match.done, match.settled = res.completed_pages, True
            return
        op.settled = True

    def check_prefetch_progress(self, index: int) -> bool:
        """Terminate prefetch ``index`` (MAX vote: under wait_complete a rank whose read is
        still running keeps it going), agree on the completed pages (MIN), insert them as
        host-only nodes, free what the tree already had, queue the unused tail on the host
        release queue, release the anchor. True when the prefetch was retired. The
        prefetch-vote-skipped variant lets each rank's own vote decide (a rank still
        reading returns while its peers wait in the MIN all-reduce)."""
        self._poll()
        op = self._prefetch_op(index)
        if op.revoked:
            raise ProtocolError(f"rank {self.rank}: prefetch {index} was revoked (the drain retires it)")
        finished = op.settled and op.done is not None
        if not self._vote_terminate(op, finished):
            return False
        # A read terminated before it finished has brought nothing usable.
        local = op.done if finished else 0
        self._settle(op)
        completed = self._reduce([local], "min", "prefetch_completed")[0]
        fetched = op.pages[:completed]
        have = self.tree.matched(fetched) if fetched else 0
        # Attach below the page before the fetched run (the anchor, or a page inserted since).
        attach = fetched[have - 1] if have else (self.reg.parent[op.pages[0]])
        parent = None
        orphan = False
        if attach is not None:
            if attach not in self.tree.owner:
                orphan = True  # the anchor left the tree (only a buggy release lets it)
            else:
                self._ensure_boundary(attach)
                parent = self.tree.owner[attach]
        ps = self.layout.page_size
        used = have
        if have < len(fetched) and not orphan:
            node = self.tree.add(parent, fetched[have:])
            node.dev, node.host = ABSENT, RESIDENT
            node.host_slots = op.slots[have:completed]
            used = completed
            self.metrics.add(mt.PREFETCHED, (completed - have) * ps)
        elif orphan:
            self.metrics.add(mt.PREFETCH_ORPHANED, (completed - have) * ps)
        # What the tree already had (and what an orphaned fetch cannot use) is freed now.
        free_now = op.slots[:have] + (op.slots[have:completed] if used < completed else [])
        tail = op.slots[completed:]
        if self.cfg.has("prefetch-double-free"):
            free_now = free_now + tail  # the bug: freed now AND queued for release
        if free_now:
            self.host_pool.free(free_now)
        if tail:
            self.relq.append(tail)
        self.metrics.add(mt.PREFETCH_COMPLETED, completed * ps)
        self.pq.pop(index)
        if op.anchor_end is not None:
            anchor = self.tree.node_at(op.anchor_end)
            if anchor is not None:
                anchor.host_ref -= 1  # release_host
        return True

    def _can_terminate(self, op: PrefetchOp, finished: bool) -> bool:
        """can_terminate_prefetch: best_effort at once; wait_complete once the read
        completed (finished, not failed); timeout: completed or the timer fired."""
        policy = self.cfg.prefetch_stop_policy
        if policy == "best_effort":
            return True
        completed = finished and not op.terminated
        if policy == "wait_complete":
            return completed
        if not op.timed_out and not self.cfg.manual:
            limit = self.cfg.prefetch_timeout_base + len(op.pages) * self.cfg.timeout_per_page
            op.timed_out = time.monotonic() - op.start > limit
        return completed or op.timed_out

    def _vote_terminate(self, op: PrefetchOp, finished: bool) -> bool:
        """The MAX all-reduce of [1 - can_terminate, terminated]: terminate when every
        rank can or the operation is terminated on some rank. Variants: each rank's own
        vote decides (prefetch-vote-skipped), a rank's own timer decides
        (timeout-local-vote), the vote carries can_terminate only (terminated-half-dropped)."""
        keep_going = int(not self._can_terminate(op, finished))
        if self.cfg.has("prefetch-vote-skipped"):
            return not keep_going  # the bug: no MAX all-reduce
        if self.cfg.has("timeout-local-vote") and op.timed_out:
            return True  # the bug: straight to the completed-pages all-reduce
        if self.cfg.has("terminated-half-dropped"):
            return not self._reduce([keep_going], "max", "prefetch_terminate")[0]
        go_on, terminated = self._reduce([keep_going, int(op.terminated)], "max", "prefetch_terminate")
        return not go_on or bool(terminated)

    # -- how else a prefetch ends ----------------------------------------------------------

    def prefetch_timeout(self, index: int) -> int:
        """Manual mode: this rank's timer for prefetch ``index`` fires. Returns 1."""
        op = self._prefetch_op(index)
        if op.timed_out or op.revoked or (op.settled and op.done is not None and not op.terminated):
            raise ProtocolError(f"rank {self.rank}: prefetch {index}: its timer fired, it was revoked "
                                "or its read completed")
        op.timed_out = True
        return 1

    def prefetch_read_fails(self, index: int) -> int:
        """Fault injection (manual mode): this rank's read fails midway (a storage batch
        comes back short); the IO thread marks the operation terminated. Returns 0 pages."""
        op = self._prefetch_op(index)
        if op.settled:
            raise ProtocolError(f"rank {self.rank}: prefetch {index} already finished")
        op.worker.run_next(max_pages=0, timeout=STORAGE_TIMEOUT)
        op.worker.close()
        op.done, op.settled, op.terminated = 0, True, True
        return 0

    def prefetch_revoke(self, index: int) -> int:
        """The scheduler revokes prefetch ``index`` (terminate_prefetch) and the next drain
        round retires it once every rank's read has settled (a threaded read runs to its
        end: the worker has no mid-read cancel). Variant revoke-frees-in-flight: its host
        slots are freed now, while the read may still write into them."""
        op = self._prefetch_op(index)
        if op.revoked:
            raise ProtocolError(f"rank {self.rank}: prefetch {index} already revoked")
        op.revoked = op.terminated = True
        if self.cfg.has("revoke-frees-in-flight"):
            self.host_pool.free(op.slots)
            op.freed = True
        return 1

    def _revoke_fields(self) -> list[int]:
        """Per prefetch, 1 when revoked and its read has settled here (_drain_revoke)."""
        return [int(op.revoked and op.settled) for op in self.pq]

    def _retire_revoked(self, red: list[int]) -> list[int]:
        """Retire the revoked prefetches whose read settled on every rank (the MIN of the
        readiness fields): release the anchor, free the host slots. Returns the rest."""
        n = len(self.pq)
        red, ready = red[: len(red) - n], red[len(red) - n :]
        for i in reversed([i for i, r in enumerate(ready) if r]):
            op = self.pq.pop(i)
            if not op.freed:
                self.host_pool.free(op.slots)
            if op.anchor_end is not None:
                anchor = self.tree.node_at(op.anchor_end)
                if anchor is not None:
                    anchor.host_ref -= 1  # release_host
        return red

    def _ensure_boundary(self, page: str) -> None:
        node = self.tree.owner[page]
        if node.end != page:
            self._split(node, self.tree.offset(node, page) + 1)
