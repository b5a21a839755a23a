"""Making room: device eviction (evict one named leaf, or LRU by tokens), _evict_backuped /
_evict_regular with pruning of a host-only subtree, the write_back staging path, and
evict_host with duplicate reclaim (seed 001) first."""

from __future__ import annotations

from . import metrics as mt
from .state import INT64_MAX
from .tree import ABSENT, RESIDENT, Node


class Eviction:
    # -- queries ----------------------------------------------------------------------------

    @staticmethod
    def is_device_leaf(node: Node, locked_too: bool = False) -> bool:
        """In evictable_leaves: resident, unlocked, and no child holds a device copy
        (``locked_too``: whatever its lock)."""
        if node.dev != RESIDENT or (node.lock_ref > 0 and not locked_too):
            return False
        return all(c.dev == ABSENT for c in node.children.values())

    @staticmethod
    def is_host_leaf(node: Node) -> bool:
        """In evictable_host_leaves: evicted, unlocked, host resident, no children."""
        return node.dev == ABSENT and node.lock_ref == 0 and node.host == RESIDENT and not node.children

    # -- device eviction --------------------------------------------------------------------

    def evict_node(self, path, fail: bool = False) -> int:
        """evict(node): evict the named device leaf. Returns device pages freed (0 when the
        node is not an evictable leaf here, or cannot be evicted now)."""
        return self._evict_one(self._by_path(path), fail)

    def evict(self, num_tokens: int) -> int:
        """evict(num_tokens): pop evictable device leaves in victim order (LRU in
        production) until ``num_tokens`` are freed. Returns the tokens freed."""
        ps = self.layout.page_size
        want = -(-num_tokens // ps)
        freed = 0
        stuck: set[int] = set()
        # A victim's parent joins the candidates once no child holds a device copy (the
        # seed's heap push); the seed pops it only if unlocked. lru-evicts-locked-parent
        # pops it whatever its lock.
        pushed: set[int] = set()
        while freed < want:
            leaves = [n for n in self.tree.nodes() if id(n) not in stuck and (
                self.is_device_leaf(n) or id(n) in pushed and self.is_device_leaf(n, locked_too=True))]
            if not leaves:
                break
            victim = min(leaves, key=self._order)
            parent = victim.parent
            got = self._evict_one(victim, False, forced=not self.is_device_leaf(victim))
            if not got:
                stuck.add(id(victim))
            elif self.cfg.has("lru-evicts-locked-parent") and parent is not self.tree.root:
                pushed.add(id(parent))
            freed += got
        return freed * ps

    def _evict_one(self, node: Node | None, fail: bool, forced: bool = False) -> int:
        leaf = node is not None and self.is_device_leaf(node, locked_too=forced)
        needs = leaf and self.cfg.write_back and node.host == ABSENT
        if not self.cfg.write_back:
            return self._evict_on_rank(node) if leaf else 0
        # write_back: write_backup(node, write_back=True), the blocking writing_check, then
        # demote. Whether some rank must write, and the host room for it, are agreed:
        # every rank takes part (its own room counts, its evict_host fallback runs) even
        # if its replica needs no write, so diverged replicas do not deadlock here.
        agree = not self.cfg.has("partial-backup-leak")
        need = len(node) if needs else 0
        if agree:
            # The size comes from the lowest rank that must write (replicas agree on it
            # unless they diverged): one MIN of (rank, pages) packed into an int64.
            wire = (self.rank << 32 | need) if needs else INT64_MAX
            got = self._reduce([wire], "min", "write_back_evict")[0]
            need = 0 if got == INT64_MAX else got & 0xFFFFFFFF
        if need == 0:
            return self._evict_on_rank(node) if leaf else 0
        ok = self._allocate_host(need, fail, agree=agree, stage="write_back")
        if not needs:
            return self._evict_on_rank(node) if leaf else 0
        if not ok:
            if not agree:
                self._reject(len(node), "host_alloc_failed", "write_back")
            return 0  # a write that cannot get host slots leaves the node on the device
        node.host_slots = self._host_take(len(node), "write_backup(write_back)")
        op = self.d2h.submit_d2h(node.dev_slots, node.host_slots)
        self.metrics.add(mt.HOST_WRITE, len(node) * self.layout.page_size)
        self.d2h.wait(op)  # blocking writing_check(write_back=True): local, no collective
        node.host = RESIDENT
        if self.cfg.storage:
            node.host_ref += 1
        self._register_dup(node)  # backup ack: a duplicate birth point
        if self.cfg.storage:
            self._start_backup(list(node.pages))
        return self._demote(node)

    def _evict_on_rank(self, node: Node) -> int:
        if node.host == RESIDENT:
            return self._demote(node)
        if self.cfg.has("orphan-host-subtree") or self._prunable(node):
            return self._delete(node)
        return 0  # a busy host-only descendant keeps the node for now

    def _demote(self, node: Node) -> int:
        """_evict_backuped: free the device copy; the host copy stays (node evicted)."""
        n = self._free_node_dev(node)
        self.metrics.add(mt.DEVICE_EVICTED, n * self.layout.page_size)
        return n

    def _prunable(self, node: Node) -> bool:
        """Every node below is host-only and free of references (seed 000's pruning)."""
        return all(d.host_ref == 0 and d.lock_ref == 0 for d in self.tree.subtree(node)[1:])

    def _delete(self, node: Node) -> int:
        """_evict_regular of a node without a host copy: free its device copy and delete
        it. Children it still has were demoted (host-only): the fixed protocol prunes that
        subtree with it (data durable in storage or recomputable); the orphan variant
        drops them from the tree without freeing their host slots."""
        below = self.tree.subtree(node)[1:]
        n = self._free_node_dev(node)
        if not self.cfg.has("orphan-host-subtree"):
            for d in below:
                self.metrics.add(mt.HOST_EVICTED, self._free_node_host(d) * self.layout.page_size)
        self._remove_nodes([node] + below)
        self.metrics.add(mt.DEVICE_EVICTED, n * self.layout.page_size)
        return n

    # -- host eviction ----------------------------------------------------------------------

    def evict_host(self, need: int) -> int:
        """evict_host: free at least ``need`` host pages if it can. Under write_back with
        duplicate reclaim the redundant host copies go first; then host leaves (evicted,
        unlocked, unreferenced, childless) in victim order, removed from the tree."""
        freed = 0
        if self.cfg.reclaims_duplicates:
            freed = self._reclaim_duplicates(need)
        while freed < need:
            leaves = [n for n in self.tree.nodes() if self.is_host_leaf(n) and n.host_ref == 0]
            if not leaves:
                break
            victim = min(leaves, key=self._order)
            got = self._free_node_host(victim)
            self._remove_nodes([victim])
            self.metrics.add(mt.HOST_EVICTED, got * self.layout.page_size)
            freed += got
        return freed

    def _can_reclaim(self, node: Node | None) -> bool:
        """_can_reclaim_full_host_duplicate: the live re-check at reclaim time."""
        if node is None or not self._is_dup(node) or node.host_ref > 0:
            return False
        return not node.lbp or self.cfg.has("reclaim-during-loadback")

    def _reclaim_duplicates(self, need: int) -> int:
        """_reclaim_full_host_duplicates: two passes over the registry in insertion order;
        the first spares evictable device leaves (about to be demoted: their host copy may
        soon be the only one). Stale entries are dropped as they are met (lazy)."""
        passes = (False,) if self.cfg.has("reclaim-demote-leaf") else (True, False)
        freed = 0
        for spare_leaves in passes:
            for end in list(self.dups):
                if freed >= need:
                    return freed
                node = self.tree.node_at(end)
                if not self._can_reclaim(node):
                    if not self._is_dup(node):
                        self.dups.pop(end, None)
                    continue
                if spare_leaves and self.is_device_leaf(node):
                    continue
                got = self._free_node_host(node)
                freed += got
                self.dups.pop(end, None)
                self._record_victim(node)
                self.metrics.add(mt.DUP_RECLAIMED, got * self.layout.page_size)
        return freed
