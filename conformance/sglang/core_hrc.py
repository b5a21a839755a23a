"""One TP rank of upstream SGLang HiRadixCache (0.5.10 - 0.5.17), driven by spec actions.

Up to 0.5.18 HiCache's default cache for an MHA model is ``HiRadixCache`` (``mem_cache/hiradix_cache.py``):
one class holds the tree (``radix_cache.TreeNode``: ``value``, ``host_value``, ``lock_ref``,
``host_ref_counter``, ``write_through_pending_id``) and the protocol, and builds its host
pool and controller itself from ``(CacheInitParams, ServerArgs)``. ``HiRadixRank`` keeps
``core.SGLangRank``'s actions, byte verification, controls and snapshot format and
replaces only what reads or builds that shape.

The sync actions call the release's own ``writing_check()`` / ``loading_check()`` (0.5.17:
after the fused ready-count round, as its ``check_hicache_events`` does), whose MIN
all-reduce (and, up to 0.5.13.post1, the early return before it when this rank has no
write-through in flight) run unchanged: a rank that skips the collective its peers
entered is a gloo timeout, which the driver reports as a hung collective.

Mapped: write_through and write_through_selective without L3 storage. Not mapped:
write_back (the spec's write_back models need the duplicate reclaim HiRadixCache lacks)
and storage (HiRadixCache's L3 bookkeeping differs; no snapshot mapping yet).
"""

from __future__ import annotations

from tiercheck.errors import UserError

from . import controls as ctl
from . import paths
from .core import SGLangRank
from .versions import parse

# The first release whose host pool frees lazily (pool_host/base.py: ``release_slots``,
# ``slot_used``): its ``free_slots`` alone misses slots freed since the last merge.
LAZY_HOST_FREE = "0.5.16"


def check_supported(cfg, version: str) -> None:
    """The model features this core maps (one-line error otherwise)."""
    if cfg.write_back:
        raise UserError(f"sglang {version} (HiRadixCache): no write_back duplicate reclaim, which the spec's "
                        "write_back models need")
    if cfg.storage:
        raise UserError(f"sglang {version} (HiRadixCache): L3 storage is not mapped by the HiRadixCache core")


class OneRankGroup:
    """The TP group of a single in-process rank. HiRadixCache only asks a group for its
    size and issues a collective when it exceeds 1; a real default gloo group in this
    process would be inherited by the gloo ranks forked later (which then crash)."""

    def size(self) -> int:
        return 1

    def rank(self) -> int:
        return 0


class HiRadixRank(SGLangRank):
    PATHS = paths.HRC_PATHS

    # -- construction ------------------------------------------------------------------

    def _build(self, group, storage_dir):
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.hiradix_cache import HiRadixCache
        from sglang.srt.mem_cache.radix_cache import TreeNode
        from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

        cfg = self.cfg
        check_supported(cfg, self.version)
        group = group if group is not None else OneRankGroup()
        TreeNode.counter = 0  # node ids as in a fresh rank process
        # Host pool size = int(device * ratio) + 1 padding page, all allocatable. The pool
        # asserts it is larger than the device pool (a construction-time check; nothing
        # reads the size later), so a model with fewer host pages gets a device-sized
        # pool whose surplus slots the adapter takes out before the first step.
        ratio = max((max(cfg.host_pages, 1) - 0.5) / cfg.device_pages, 1.0)
        args = ServerArgs(model_path="dummy", page_size=1, hicache_io_backend="direct",
                          hicache_mem_layout="layer_first", hicache_write_policy=cfg.policy,
                          hicache_ratio=ratio)
        set_global_server_args_for_scheduler(args)
        self._device_pools()
        params = CacheInitParams(
            disable=False, req_to_token_pool=self.req_to_token_pool,
            token_to_kv_pool_allocator=self.allocator, page_size=1, **self.shim.group_params(group))
        self.cache = HiRadixCache(params=params, server_args=args)
        import atexit

        atexit.unregister(self.cache.shutdown)
        self.cc = self.cache.cache_controller
        self.core = self.cache  # the tree lives in the cache itself
        self.host_pool = self.cc.mem_pool_host
        surplus = self.host_pool.available_size() - cfg.host_pages
        self.host_reserved = self.host_pool.alloc(surplus).tolist() if surplus > 0 else []
        if self.host_pool.available_size() != cfg.host_pages:
            raise RuntimeError(f"SGLang host pool has {self.host_pool.available_size()} slots, "
                               f"the model {cfg.host_pages}")
        self.cache.load_back_threshold = cfg.load_back_threshold
        self.order = ctl.PathOrder()
        self.cache.eviction_strategy = self.order
        ctl.hold_copy_acks(self.cc, unmerged=False)  # write() submits each backup at once
        self.gate = None

    def _wrap_observers(self):
        return None  # no storage, no duplicate reclaim: nothing beyond the tree to record

    def close(self):
        self._exit.close()

    # -- shape differences ---------------------------------------------------------------

    def _key(self, tokens):
        from sglang.srt.mem_cache.radix_cache import RadixKey

        return RadixKey(list(tokens))

    def _copies(self, x):
        return x.value, x.host_value

    def _host_slots(self):
        host = self.host_pool
        if parse(self.version) >= parse(LAZY_HOST_FREE):
            # Freed slots wait in release_slots until an allocation merges them; slot_used
            # is the pool's own ownership record (the reserved surplus is allocated).
            free = [i for i in range(host.size) if not bool(host.slot_used[i])] + self.host_reserved
        else:
            free = host.free_slots.tolist() + self.host_reserved
        return host.k_buffer[0], free, host.size

    def _node_state(self, x, loading: bool, anchor_holds: int) -> dict:
        return {
            "dev": "absent" if x.value is None else "loading" if loading else "resident",
            "host": "absent" if x.host_value is None
            else "writing" if self.shim.host_writing(self.cache, x) else "resident",
            "lock_ref": x.lock_ref,
            "host_ref": x.host_ref_counter,
            "hit_count": x.hit_count,
            "load_back_pending": False,  # HiRadixCache has no load-back pending mark
            "released": False,
        }

    def _write_span(self, ack_id):
        return self.shim.write_span(self.cache, ack_id)

    def _load_anchor_holds(self):
        return {}  # load_back takes no host lock in HiRadixCache

    def _start_load_back(self, x) -> bool:
        return self.cache.load_back(x) is not None

    # -- actions ---------------------------------------------------------------------------

    def do_evict(self, node, fail=False):
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams

        x = self.node_at(node)
        if x is None or x not in self.cache.evictable_leaves:
            return  # not an evictable leaf on this replica
        # HiRadixCache's heap pops the target first (PathOrder) and stops once len(x.key)
        # tokens are freed: exactly this victim.
        self.order.target = x.id
        try:
            with ctl.failing_host_alloc(self.cc, fail):
                self.cache.evict(EvictParams(num_tokens=len(x.key)))
        finally:
            self.order.target = None

    def _round(self, part: str):
        """The release's own check, collective included (shims.HiRadix13.sync)."""
        self.shim.sync(self.cache, part)
        if part == "loading_check":
            for anchor in [a for a in self.load_spans if a not in self.cache.ongoing_load_back]:
                del self.load_spans[anchor]
