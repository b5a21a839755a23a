"""Host -> device: load_back (lock the path, take device slots, one H->D copy for the
evicted chain, load_back_pending marks), the H->D copy finishing, loading_check."""

from __future__ import annotations

from tiercheck.impl.kvdata import verify_pages

from . import metrics as mt
from .errors import ProtocolError
from .state import LoadOp
from .tree import ABSENT, LOADING, RESIDENT, Node


class LoadPath:
    def nodes_to_load(self, node: Node) -> list[Node]:
        """The evicted chain from ``node`` up to (not including) the first resident
        ancestor, top-down."""
        chain = []
        while node is not None and node is not self.tree.root and node.dev == ABSENT:
            chain.append(node)
            node = node.parent
        chain.reverse()
        return chain

    def load_back(self, path, evict_if_needed: bool | None = None) -> int:
        """load_back(node): returns the pages submitted for loading, 0 when it cannot load
        (not an evicted node, a chain member without a host copy, no device room)."""
        node = self._by_path(path)
        if node is None or node.dev != ABSENT:
            return 0
        chain = self.nodes_to_load(node)
        if any(x.host != RESIDENT for x in chain):
            return 0
        total = sum(len(x) for x in chain)
        if total * self.layout.page_size < self.cfg.load_back_threshold:
            return 0  # too short to be worth a copy: the request recomputes it
        if evict_if_needed is None:
            evict_if_needed = self.cfg.load_back_evicts
        # The chain's host copies are taken before any eviction (the seed's host_indices).
        host = [slot for x in chain for slot in x.host_slots]
        deficits = self.lane_deficits(self.chain_lanes(chain))
        if any(deficits) and self.cfg.cp_planner:
            if not self._cp_make_room(node, deficits):  # seed 004: each rank plans its victims
                return 0
        elif total > self.device_pool.available() and evict_if_needed:
            # The chain and its resident ancestors stay meanwhile; the seed locks only the
            # first resident ancestor (load-back-evicts-chain-unlocked).
            held = chain[0].parent if self.cfg.has("load-back-evicts-chain-unlocked") else node
            self._lock_path(held, +1)
            try:
                self.evict((total - self.device_pool.available()) * self.layout.page_size)
            finally:
                self._lock_path(held, -1)
        if any(self.lane_deficits(self.chain_lanes(chain))):
            return 0
        # All or nothing: one copy for the whole chain.
        dev = self._dev_take(total, "load_back")
        pages, off = [], 0
        for x in chain:
            x.dev_slots = dev[off : off + len(x)]
            off += len(x)
            x.dev = LOADING
            x.lbp = True
            pages += x.pages
            self.tree.touch(x)
        self._lock_path(node, +1)
        op = self.h2d.submit_h2d(host, dev)
        self.lq.append(LoadOp(pages, node.end, op))
        self.metrics.add(mt.LOAD_BACK, total * self.layout.page_size)
        return total

    def load_dma_done(self) -> int | None:
        """Manual mode: the head H->D copy finishes."""
        return self.h2d.complete_next()

    def loading_check(self) -> int:
        """MIN of finished loads (with the digest pair): device copies usable, path
        unlocked, finish_load_back clears the marks. Returns the loads acked."""
        n = self._round([self._ldone()], "loading_check")[0]
        self._ack_loads(n)
        return n

    def _ack_loads(self, n: int) -> None:
        for op in self.lq[:n]:
            for x in self.tree.covering(op.pages):
                x.dev = RESIDENT
                x.lbp = False
            anchor = self.tree.node_at(op.anchor_end)
            if anchor is not None:
                self._lock_path(anchor, -1)
            if self.cfg.verify_loads:
                self._verify_loaded(op)
        self.lq = self.lq[n:]

    def _verify_loaded(self, op: LoadOp) -> None:
        for x in self.tree.covering(op.pages):
            bad = verify_pages(self.device_pool, x.dev_slots, x.pages, self.content_rank)
            if bad:
                raise ProtocolError(
                    f"rank {self.rank}: load-back of {self.tree.path(x)} delivered wrong bytes "
                    f"in device slots {bad}"
                )
