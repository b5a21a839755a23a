"""HiCache mirror release for write-through with a storage backend (opt-in).

Installed into an SGLang release by tiercheck's ``mirror-release`` patch (one call at the
end of ``UnifiedRadixCache.init_hicache``); written from the design of the proposed
upstream fix for write-through host-pool starvation, not from its code.

The problem: under write_through every inserted node pins a host mirror, the storage
ack only drops a host reference, and host eviction only takes nodes whose device copy
is gone. With a host pool smaller than the device pool it fills with mirrors of data
already in storage, and every later D->H backup (hence every storage write) and every
storage prefetch is rejected.

The mechanism, off unless SGLANG_HICACHE_MIRROR_RELEASE=1:

* durable tracking: at each drained storage ack, the pages of its ``completed_tokens``
  prefix (never the whole request: an ack is not success) are marked durable in a
  bounded LRU keyed by page hash, so the mark survives a node split.
* release candidates, derived from state every time: device copy resident, host copy
  resident, every page durable, no lock, no host reference, no copy in flight.
* TP-consistent release: only under host-pool pressure (free host tokens below
  _FREE_FRAC of the pool). After a round's storage acks each rank prepares a plan from
  its candidates (covering its deficit); at the next round it adds the plan's triple
  (count, tokens and digest of the entries still candidates) to the existing fused
  ready-count MIN all-reduce as negated pairs, so one MIN yields min and max. The plan
  runs only when every rank reported the identical triple; mutation never precedes that
  agreement. Repeated mismatch fail-closes the feature (back to the release's behaviour).
* eviction: a device leaf whose mirror was released and whose children were demoted is
  evicted with its host-only subtree (its data is durable), so eviction progresses;
  durable marks of nodes that leave the tree are revoked.
* prefetch: the scheduler's L3 gate (``is_backuped`` of the match's anchor) also takes a
  node whose pages are all durable, and a refill below such a released mirror becomes a
  host-only child (SGLang drops a refill below a node without a host copy).
* anti-churn: a node whose pages are all durable and whose mirror was released is not
  staged to host again (unless its mark is older than _REFRESH_ROUNDS drain rounds).
"""

from __future__ import annotations

import collections
import math
import os

import torch

ENV = "SGLANG_HICACHE_MIRROR_RELEASE"
ENV_FREE_FRAC = "SGLANG_HICACHE_MIRROR_RELEASE_FREE_FRAC"
ENV_CAPACITY = "SGLANG_HICACHE_DURABLE_CAPACITY"
ENV_REFRESH = "SGLANG_HICACHE_MIRROR_RELEASE_REFRESH_ROUNDS"
MISMATCH_LIMIT = 8  # consecutive disagreeing rounds before the feature closes
_DIGEST_MASK = (1 << 62) - 1  # keeps -digest representable in int64


def enabled() -> bool:
    return os.environ.get(ENV, "0").strip().lower() not in ("", "0", "false", "no", "off")


def maybe_install(cache):
    """Attach the mechanism to ``cache`` when the flag is on and the cache is a
    write-through cache-mode HiCache with storage; returns it (or None)."""
    if not enabled():
        return None
    if (cache.cache_controller is None or not cache.enable_storage or cache.is_write_back
            or cache.host_memory_mode != "cache"):
        return None
    cache.mirror_release = MirrorRelease(cache)
    return cache.mirror_release


class MirrorRelease:
    def __init__(self, cache):
        from sglang.srt.mem_cache.unified_cache.components.base import ComponentType

        self.cache = cache
        self.cc = cache.cache_controller
        self.core = cache.tree_core
        self.FULL = ComponentType.FULL
        self.page_size = cache.page_size
        self.capacity = self.cc.mem_pool_host.size
        frac = float(os.environ.get(ENV_FREE_FRAC, "0.25"))
        self.target_free = max(1, math.ceil(frac * self.capacity))
        self.durable_capacity = int(os.environ.get(ENV_CAPACITY, str(1 << 20)))
        refresh = os.environ.get(ENV_REFRESH, "")
        self.refresh_rounds = int(refresh) if refresh else None
        self.durable: collections.OrderedDict = collections.OrderedDict()  # hash -> round marked
        self.round = 0
        self.plan: list = []  # nodes prepared after last round's acks
        # Candidate order: least recently used first (a harness may set its own).
        self.order = lambda node: (node.last_access_time, node.id)
        self.mismatches = 0
        self.mismatch_limit = MISMATCH_LIMIT
        self.closed = False
        # Counters (observation): tokens released, plans committed, plans refused.
        self.released_tokens = 0
        self.committed = 0
        self.refused = 0
        self.skipped_restage = 0
        self.grafted_tokens = 0
        self._install()

    # -- hooks --------------------------------------------------------------------------

    def _install(self):
        cache, core = self.cache, self.core
        sync = cache._sync_hicache_ready_counts
        drain = cache._drain_storage_control_queues_impl
        evict_leaf = cache._evict_device_leaf
        backup = cache._execute_and_commit_kv_backup
        remove = core._remove_leaf_from_parent
        is_backuped = cache.is_backuped
        insert_host = core.insert_host

        def synced_round():
            return self._ride(sync)

        def drain_and_mark(*args, **kwargs):
            n_backup = kwargs.get("n_backup")
            acked = self._acks_at_head(n_backup)
            out = drain(*args, **kwargs)
            for op in acked:
                self._mark_durable(op)
            self.prepare()
            return out

        def evict_leaf_or_prune(node_id, tracker):
            node = core.node_by_id(node_id)
            if not self.closed and not node.backuped and node.children:
                # A released mirror whose children were demoted: prune the host-only
                # subtree with it (deleting only the leaf would orphan the children).
                cache._drop_subtree_no_host(node_id, tracker)
                return None
            return evict_leaf(node_id, tracker)

        def backup_unless_durable(action, write_back=False):
            if not write_back and not self.closed:
                keep = [n for n in action.node_ids if not self._restage_skipped(n)]
                if len(keep) != len(action.node_ids):
                    action = type(action)(node_ids=keep)
            return backup(action, write_back=write_back)

        def remove_and_revoke(node):
            for h in node.hash_value or ():
                self.durable.pop(h, None)
            return remove(node)

        def backuped_or_durable(node_id):
            # The scheduler's L3 prefetch gate: a released mirror's pages are in storage,
            # so its hash chain anchors a prefetch as a host copy would.
            return is_backuped(node_id) or (not self.closed and self._all_durable(core.node_by_id(node_id)))

        def insert_host_under_durable(node_id, key, host_value, hash_value):
            res = insert_host(node_id, key, host_value, hash_value)
            if res.host_insert_dropped and not self.closed:
                self._graft_prefetch(node_id, key, host_value, hash_value, res)
            if not res.host_insert_dropped:
                self._mark_hashes(hash_value)  # read back from storage: they are there
            return res

        cache._sync_hicache_ready_counts = synced_round
        core.insert_host = insert_host_under_durable
        cache.is_backuped = backuped_or_durable
        cache._drain_storage_control_queues_impl = drain_and_mark
        cache._evict_device_leaf = evict_leaf_or_prune
        cache._execute_and_commit_kv_backup = backup_unless_durable
        core._remove_leaf_from_parent = remove_and_revoke

    def _graft_prefetch(self, node_id, key, host_value, hash_value, res):
        """A prefetch refill dropped because its anchor holds no host copy (SGLang keeps
        host nodes under backed-up parents only): under a released mirror whose pages
        are durable, attach it as a host-only child instead. A drop means the walk
        matched no child of the anchor, so the whole refill hangs below the anchor."""
        from sglang.srt.disaggregation.kv_events import StorageMedium

        core = self.core
        anchor = core.node_by_id(node_id)
        child_key = key.child_key(self.page_size)
        if not self._all_durable(anchor) or child_key in anchor.children:
            return
        node = core._new_node(priority=anchor.priority)
        node.parent, node.key, node.hash_value = anchor, key, list(hash_value)
        node.component_data[self.FULL].host_value = host_value.clone()
        anchor.children[child_key] = node
        core._update_evictable_leaf_sets(node)
        core._update_evictable_leaf_sets(anchor)
        core.kv_events.record_store(node, medium=StorageMedium.CPU)
        res.host_insert_dropped = False
        res.inserted_host_node = node.id
        self.grafted_tokens += len(key)

    # -- durable tracking -----------------------------------------------------------------

    def _acks_at_head(self, n):
        """The storage acks the drain is about to take (the first n of the queue; the
        storage thread only appends, so the head is stable)."""
        q = self.cc.ack_backup_queue
        if q is None:
            return []
        with q.mutex:
            items = list(q.queue)
        return items if n is None else items[:n]

    def _mark_durable(self, op):
        self._mark_hashes(list(op.hash_value or ())[: op.completed_tokens // self.page_size])

    def _mark_hashes(self, hashes):
        for h in hashes:
            self.durable[h] = self.round
            self.durable.move_to_end(h)
        while len(self.durable) > self.durable_capacity:
            self.durable.popitem(last=False)

    def _all_durable(self, node) -> bool:
        hashes = node.hash_value
        return bool(hashes) and all(h in self.durable for h in hashes)

    def _restage_skipped(self, node_id) -> bool:
        node = self.core.node_by_id(node_id)
        cd = node.component_data[self.FULL]
        if cd.host_value is not None or not self._all_durable(node):
            return False
        if self.refresh_rounds is not None:
            oldest = min(self.durable[h] for h in node.hash_value)
            if self.round - oldest >= self.refresh_rounds:
                return False  # old enough: the store may have evicted it, stage again
        self.skipped_restage += 1
        return True

    # -- candidates ------------------------------------------------------------------------

    def _is_candidate(self, node) -> bool:
        if node is self.core.root_node:
            return False
        cd = node.component_data[self.FULL]
        if cd.value is None or cd.host_value is None:
            return False
        if node.write_through_pending_id is not None or node.load_back_pending_id is not None:
            return False
        if any(c.lock_ref > 0 or c.host_lock_ref > 0 for c in node.component_data):
            return False
        return self._all_durable(node)

    def candidates(self) -> list:
        """Release candidates, least recently used first (ties by node id)."""
        out, stack = [], list(self.core.root_node.children.values())
        while stack:
            node = stack.pop()
            if self._is_candidate(node):
                out.append(node)
            stack.extend(node.children.values())
        out.sort(key=self.order)
        return out

    # -- the consensus round ------------------------------------------------------------------

    def _ride(self, sync):
        """Run the fused ready-count round with this rank's plan triple appended to its
        one MIN all-reduce, then commit the plan if every rank reported the same."""
        if self.closed:
            return sync()
        self.round += 1
        entries = self._committable()
        triple = self._triple(entries)
        extra = torch.tensor([v for x in triple for v in (x, -x)], dtype=torch.int64)
        reduced = {}
        cache = self.cache
        all_reduce = cache._all_reduce

        def all_reduce_with_fields(data, op):
            if op != torch.distributed.ReduceOp.MIN or "out" in reduced:
                return all_reduce(data, op)
            joined = torch.cat([data.to(torch.int64), extra])
            all_reduce(joined, op)
            data.copy_(joined[: len(data)].to(data.dtype))
            reduced["out"] = joined[len(data):].tolist()
            return None

        cache._all_reduce = all_reduce_with_fields
        try:
            out = sync()
        finally:
            del cache._all_reduce  # back to the class method
        if "out" in reduced:
            vals = reduced["out"]
            self._agree(entries, tuple(vals[0::2]), tuple(-v for v in vals[1::2]))
        return out

    def _committable(self) -> list:
        """The entries of the prepared plan still release candidates on this rank."""
        return [n for n in self.plan if n.parent is not None and self._is_candidate(n)]

    def _triple(self, entries) -> tuple:
        """(plan length, tokens and digest of the committable entries): agreeing on the
        plan alone would let one rank free a mirror another rank keeps."""
        tokens, digest = 0, 0
        for node in entries:
            tokens += len(node.component_data[self.FULL].host_value)
            digest = (digest * 1000003 + node.id + 1) & _DIGEST_MASK
        return (len(self.plan), tokens, digest)

    def _agree(self, entries, plan_min: tuple, plan_max: tuple) -> None:
        if plan_max[0] == 0:
            return  # no rank prepared a plan
        if plan_min != plan_max:
            self.refused += 1
            self.mismatches += 1
            if self.mismatches >= self.mismatch_limit:
                self.closed = True  # fail closed: the release's own behaviour from now on
        else:
            self.mismatches = 0
            self._commit(entries)
        self.plan = []

    def prepare(self) -> None:
        """After the storage acks of a round: plan releases covering this rank's host
        deficit, candidates in ``order`` (committed at the next round if all agree)."""
        deficit = self.target_free - self.cc.mem_pool_host.available_size()
        self.plan = []
        if self.closed or deficit <= 0:
            return
        tokens = 0
        for node in self.candidates():
            if tokens >= deficit:
                break
            self.plan.append(node)
            tokens += len(node.component_data[self.FULL].host_value)

    def _commit(self, entries) -> None:
        """Free the agreed entries' mirrors (each still a candidate: re-checked by the
        caller on this rank's state, which the agreement showed identical)."""
        from sglang.srt.disaggregation.kv_events import StorageMedium
        from sglang.srt.mem_cache.unified_cache.components import EvictLayer
        from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
            DriveHostEvictionResult,
        )

        core = self.core
        result = DriveHostEvictionResult()
        comp = core.components_by_type[self.FULL]
        for node in entries:
            n = len(node.component_data[self.FULL].host_value)
            core.kv_events.record_remove(node, medium=StorageMedium.CPU)
            core._evict_component_and_detach_lru(
                node, comp, target=EvictLayer.HOST, tracker=result.tracker,
                device_frees=result.device_frees, host_frees=result.host_frees,
                cache_actions=result.cache_actions)
            self.released_tokens += n
        self.cache._apply_eviction_result(result)
        self.committed += 1
