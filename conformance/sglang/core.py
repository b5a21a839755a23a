"""One TP rank of upstream SGLang HiCache (0.5.18 onwards), driven by spec actions.

Builds a ``UnifiedRadixCache`` with ``init_hicache`` (Python TreeCore, FULL component
only, page size 1 so that a spec page is one token) from a model's constants, performs
one spec action at a time through the cache's own methods, and reports the cache as the
plain-data snapshot of docs/plugging-in.md. Only imported inside an SGLang lane. The
calls whose shape changed between releases go through ``self.shim`` (shims.py).

What the adapter does as the *scheduler* (SGLang leaves it to its caller):
* insert: match the request, allocate device slots for what is not on device (a step
  without room is refused, the scheduler would evict first), write the KV rows, insert.
* load_back: only when the device has room for the whole evicted chain (the spec's
  scheduler makes room with evict steps; SGLang's own evict_for_alloc is not reached).
* sync actions: the fused per-iteration round ``_sync_hicache_ready_counts`` (one MIN
  all-reduce of ready counts, queue sizes and the reclaim digest pair), then only the
  part of ``check_hicache_events`` the action names.
* prefetch (0.5.23): ``prefetch_from_storage`` as the scheduler calls it, the hit query
  (the prefetch thread's MIN vote), then the storage-hit part of the fused round (host
  slots at hit time); ``prefetch_io`` lets the read thread run one operation; a
  ``check_prefetch_progress`` step drains the completion acks (the sync thread's MIN
  votes) once every rank's read ran, else cuts the read with the timeout policy's MAX vote.

The refinement (what each snapshot field reads) is documented on ``snapshot``.
"""

from __future__ import annotations

import contextlib
import json
import os
from array import array

import torch

from . import controls as ctl
from . import paths, shims

FULL = None  # ComponentType.FULL, bound at build time (sglang imports are lazy)


def full_component():
    return shims.component_type().FULL


def rank_server_args(exit_stack, rank: int, world: int, storage_dir, **hicache):
    """The ServerArgs of one TP rank of a CPU HiCache (page size 1, direct io, layer-first
    host layout, the file L3 backend in ``storage_dir`` when given), with the rank's
    parallel context and storage directory entered on ``exit_stack``; ``hicache``
    overrides or adds hicache_* settings. Installed as the scheduler's global args."""
    from sglang.kernels.ops.attention.fla.chunk_delta_h import CHUNK_SIZE
    from sglang.srt.environ import envs
    from sglang.srt.runtime_context import get_parallel
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    exit_stack.enter_context(get_parallel().override(
        tp_rank=rank, tp_size=world, attn_tp_rank=rank, attn_tp_size=world, moe_tp_size=world,
        pp_rank=0, pp_size=1))
    settings = dict(hicache_io_backend="direct", hicache_mem_layout="layer_first",
                    hicache_storage_backend=None, hicache_storage_prefetch_policy="wait_complete")
    if storage_dir is not None:
        exit_stack.enter_context(envs.SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR.override(storage_dir))
        settings.update(hicache_storage_backend="file",
                        hicache_storage_backend_extra_config=json.dumps({"prefetch_threshold": 1}))
    settings.update(hicache)
    args = ServerArgs(model_path="dummy", page_size=1, **settings)
    args._mamba_cache_chunk_size = max(CHUNK_SIZE, 1)
    set_global_server_args_for_scheduler(args)
    return args


class SGLangRank:
    PATHS = paths.PATHS  # the upstream paths this core counts

    def __init__(self, cfg, rank: int = 0, world: int = 1, group=None, storage_dir=None):
        self.version, self.shim = shims.installed()
        paths.install(self.PATHS)
        from tiercheck.spec.model import Model

        self.cfg = cfg
        self.model = Model(cfg)
        self.rank, self.world = rank, world
        self._exit = contextlib.ExitStack()
        # Prefetch bookkeeping (every core: the snapshot reads it; _build sets ``reads``).
        self.reads = None
        self.prefetches: list = []  # handles of the prefetches holding host slots, in issue order
        self.prefetch_of: dict = {}  # handle -> (tokens, anchor end path or None, first page index)
        self.released: list = []  # pages per host_mem_release_queue append, oldest first
        self._rid = 0
        try:
            self._build(group, storage_dir)
        except BaseException:
            self._exit.close()
            raise
        # Adapter bookkeeping of what SGLang was asked to do (never of its decisions):
        # the pages each in-flight load-back reads, and reclaim victims since the last
        # passing sync round (what the digest summarises).
        self.load_spans: dict = {}  # anchor node id -> (first page path, anchor end path)
        self.storage_spans: dict = {}  # storage op id -> (first page path, last page path)
        self.victims: list = []
        self.halted = ""
        self._wrap_observers()

    # -- construction ------------------------------------------------------------------

    def _build(self, group, storage_dir):
        global FULL
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeNode
        from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

        FULL = full_component()
        cfg = self.cfg
        # Node ids come from a process-global counter and feed the reclaim digest; every
        # rank starts a cache where a fresh rank process would.
        UnifiedTreeNode.counter = 0
        # host pool size = int(device * ratio) + 1 padding page (all of it allocatable):
        # pick the ratio that makes it exactly host_pages.
        ratio = (max(cfg.host_pages, 1) - 0.5) / cfg.device_pages
        # Prefetch: the timeout policy, whose MAX vote cuts a read when the adapter says the
        # wait budget ran out (the spec's "terminate any time"); wait_complete never cuts.
        policy = {"hicache_storage_prefetch_policy": "timeout"} if cfg.prefetch else {}
        args = rank_server_args(self._exit, self.rank, self.world, storage_dir if cfg.storage else None,
                                hicache_write_policy=cfg.policy, hicache_ratio=ratio, **policy)
        self._device_pools()
        params = CacheInitParams(
            disable=False, req_to_token_pool=self.req_to_token_pool,
            token_to_kv_pool_allocator=self.allocator, page_size=1,
            tp_cache_group=group, tree_components=(FULL,),
            **self.shim.python_tree_core(),
        )
        self.cache = UnifiedRadixCache(params=params)
        self.cache.init_hicache(args, params)
        import atexit

        if hasattr(self.cache, "shutdown"):  # 0.5.19+ registers it at exit; the adapter closes itself
            atexit.unregister(self.cache.shutdown)
        self.cc = self.cache.cache_controller
        self.core = self.cache.tree_core
        self.host_pool = self.cc.mem_pool_host
        if self.host_pool.available_size() != cfg.host_pages:
            raise RuntimeError(f"SGLang host pool has {self.host_pool.available_size()} slots, "
                               f"the model {cfg.host_pages}")
        # The spec's load-back threshold (pages = tokens at page size 1); SGLang's is 10.
        self.cache.load_back_threshold = cfg.load_back_threshold
        self.order = ctl.PathOrder()
        self.core.eviction_strategy = self.order
        ctl.hold_copy_acks(self.cc, unmerged=self.shim.write_is_merged())
        self.gate = ctl.StorageGate(self.cc) if cfg.storage else None
        if self.gate is not None:
            self._exit.callback(self.gate.restore)
        if cfg.storage:
            self._page_keys()
        self.reads = ctl.PrefetchGate(self.cc) if cfg.prefetch else None

    def _device_pools(self):
        """The device side the scheduler owns: request slots, one-layer KV pool, allocator
        (page size 1, so a spec page is one token)."""
        from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, MLATokenToKVPool, ReqToTokenPool

        pages = self.cfg.device_pages
        self.req_to_token_pool = ReqToTokenPool(size=4, max_context_len=64, device="cpu",
                                                enable_memory_saver=False)
        if self.cfg.single_writer:
            # An MLA-shaped pool (one latent row per token, replicated on every TP rank):
            # the controller then makes rank 0 the only storage writer (backup_skip).
            self.kv_pool = MLATokenToKVPool(size=pages, page_size=1, dtype=torch.float32, kv_lora_rank=1,
                                            qk_rope_head_dim=1, layer_num=1, device="cpu",
                                            enable_memory_saver=False)
        else:
            self.kv_pool = MHATokenToKVPool(size=pages, page_size=1, dtype=torch.float32, head_num=1,
                                            head_dim=2, layer_num=1, device="cpu", enable_memory_saver=False)
        self.allocator = TokenToKVPoolAllocator(size=pages, dtype=torch.float32, device="cpu",
                                                kvcache=self.kv_pool, need_sort=False)

    def _page_keys(self):
        """Each model page's L3 key: SGLang's chained page hash of its token path."""
        pages = self.model.pages
        self.key_of, self.path_of_key = {}, {}
        for p, path in enumerate(pages.paths):
            parent = self.key_of.get(path[:-1])
            key = self.shim.storage_key(path[-1:], parent)
            self.key_of[path] = key
            self.path_of_key[key] = path

    def _wrap_observers(self):
        """Record what SGLang itself does, for the snapshot (no decision changes)."""
        cc = self.cc
        if self.cfg.storage:
            write_storage = cc.write_storage

            def recorded_write_storage(host_indices, token_ids, hash_value=None, *args, **kwargs):
                op_id = write_storage(host_indices, token_ids, hash_value, *args, **kwargs)
                self.storage_spans[op_id] = (self.path_of_key[hash_value[0]], self.path_of_key[hash_value[-1]])
                return op_id

            cc.write_storage = recorded_write_storage
        if self.cfg.prefetch:
            append_release = cc.append_host_mem_release

            def recorded_append_release(host_indices=None, *args, **kwargs):
                if host_indices is not None and len(host_indices):
                    self.released.append(len(host_indices))
                return append_release(host_indices, *args, **kwargs)

            cc.append_host_mem_release = recorded_append_release
        release = self.core._release_full_host_duplicate

        def recorded_release(node, *args, **kwargs):
            self.victims.append(ctl.node_path(node))
            return release(node, *args, **kwargs)

        self.core._release_full_host_duplicate = recorded_release

    def close(self):
        try:
            if self.reads is not None:
                self._cut_reads()
            if self.cc is not None and self.cc.enable_storage:
                self.cc._stop_storage_threads()
        finally:
            self._exit.close()

    def path_counts(self, reset: bool = False) -> dict:
        """Upstream protocol paths reached in this process so far (conformance.sglang.paths)."""
        out = paths.counts()
        if reset:
            paths.reset()
        return out

    # -- tree lookups -----------------------------------------------------------------

    def nodes(self):
        """(node, end path, start path) for every cached node, parents first."""
        out, stack = [], [(self.core.root_node, ())]
        while stack:
            node, path = stack.pop()
            for child in node.children.values():
                key = tuple(child.key.token_ids)
                end = path + key
                out.append((child, end, path + key[:1]))
                stack.append((child, end))
        return out

    def device_prefix_walk(self, tokens) -> int:
        """Tokens of ``tokens`` whose node is device-resident, walking the tree without
        touching it (what match_full_device_prefix reads on releases that have it)."""
        node, i = self.core.root_node, 0
        while i < len(tokens):
            child = next((c for c in node.children.values() if c.key.token_ids[0] == tokens[i]), None)
            if child is None or self._copies(child)[0] is None:
                break
            key = list(child.key.token_ids)
            n = 0
            while n < len(key) and i + n < len(tokens) and key[n] == tokens[i + n]:
                n += 1
            i += n
            if n < len(key):
                break
            node = child
        return i

    def node_at(self, end_path):
        for node, end, _ in self.nodes():
            if end == tuple(end_path):
                return node
        return None

    # -- actions ------------------------------------------------------------------------

    def apply(self, name: str, params: dict, fail: bool = False) -> None:
        getattr(self, "do_" + name)(fail=fail, **params)

    def _key(self, tokens):
        from sglang.srt.mem_cache.radix_cache import RadixKey

        return RadixKey(array("q", tokens))

    def do_insert(self, tokens, fail=False):
        from sglang.srt.mem_cache.base_prefix_cache import InsertParams, MatchPrefixParams

        tokens = list(tokens)
        key = self._key(tokens)
        on_device = self.shim.device_prefix_len(self, key)  # read-only
        need = len(tokens) - on_device
        if need > self.allocator.available_size():
            return  # no room: the scheduler would evict first (separate steps)
        with ctl.failing_host_alloc(self.cc, fail):
            m = self.cache.match_prefix(MatchPrefixParams(key=key))
            prefix = self.shim.prefix_indices(self, m).to(torch.int64)
            assert len(prefix) == on_device, (len(prefix), on_device)
            fresh = self.allocator.alloc(need) if need else prefix[:0]
            self._write_kv(fresh, [tuple(tokens[: on_device + i + 1]) for i in range(need)])
            value = torch.cat([prefix, fresh])
            self.cache.insert(InsertParams(key=key, value=value, prev_prefix_len=len(prefix)))
            self.shim.flush_backups(self)

    # A completion with nothing in flight is a no-op (the spec's guard probes step it).
    def do_write_dma_done(self, fail=False):
        ctl.release_head(self.cc.ack_write_queue)

    def do_load_dma_done(self, fail=False):
        ctl.release_head(self.cc.ack_load_queue)

    def do_evict(self, node, fail=False):
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams

        x = self.node_at(node)
        if x is None or x not in self.core.evictable_device_leaves:
            return  # not an evictable leaf on this replica
        self.order.target = x.id
        try:
            with ctl.failing_host_alloc(self.cc, fail), \
                    ctl.one_victim(self.cache, self.shim.evict_walk_returns_progress):
                self.cache.evict(EvictParams(num_tokens=len(x.key)))
        finally:
            self.order.target = None

    def do_load_back(self, node, fail=False):
        x = self.node_at(node)
        if x is None or not x.evicted:
            return
        chain = []
        y = x
        while y.parent is not None and y.evicted:
            chain.append(y)
            y = y.parent
        top = chain[-1]
        first = ctl.node_path(top.parent) + tuple(top.key.token_ids[:1])
        total = sum(len(c.key) for c in chain)
        if total > self.allocator.available_size():
            return  # no room: the scheduler would evict first
        if self._start_load_back(x):
            self.load_spans[x.id] = (first, tuple(node))
            self.cache.ready_to_load_host_cache()

    def _start_load_back(self, x) -> bool:
        return bool(self.cache.load_back(x.id))

    def do_storage_backup_done(self, pages, fail=False):
        if self.gate is None:
            return
        if len(self.cache.ongoing_backup) <= self.cc.ack_backup_queue.qsize():
            return  # every started backup has already acked: nothing in flight
        self.gate.finish(pages)

    def do_store_lose(self, page, fail=False):
        """The store drops an acked key (fault injection on the real file store)."""
        backend = self.cc.storage_backend
        suffixed = backend._get_suffixed_key(self.key_of[tuple(page)])
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(backend.file_path, suffixed + ".bin"))
        if backend.metadata_cache is not None:
            backend.metadata_cache.remove(suffixed)

    def do_registry_skew(self, fail=False):
        """This rank's duplicate registry order drifts: its oldest entry moves last."""
        dups = self.core.full_host_duplicates
        if dups:
            first = next(iter(dups))
            dups[first] = dups.pop(first)

    # -- prefetch (0.5.23) ----------------------------------------------------------------

    def _prefetch_anchor(self, tokens):
        """(matched tokens, anchor node) for a prefetch of ``tokens``, else None: the match
        must end where a node ends, that node holding a finished host copy (or the root),
        and leave tokens to fetch. Read-only: the scheduler's match_prefix would also count
        a hit and split a node the match ends inside, which a prefetch step does not do."""
        node, i = self.core.root_node, 0
        while i < len(tokens):
            child = next((c for c in node.children.values() if c.key.token_ids[0] == tokens[i]), None)
            if child is None:
                break
            key = list(child.key.token_ids)
            if key != list(tokens[i: i + len(key)]):
                return None  # the match ends inside a node
            i += len(key)
            node = child
        if i == len(tokens):
            return None
        if node is not self.core.root_node:
            if self._copies(node)[1] is None or node.write_through_pending_id is not None:
                return None
        return i, node

    def do_prefetch_from_storage(self, tokens, fail=False):
        """The scheduler's _prefetch_kvcache call, then the hit query's MIN vote (prefetch
        thread) and the storage-hit part of the fused round, which takes the host slots."""
        from sglang.srt.mem_cache.base_prefix_cache import CacheRequestHandle

        tokens = list(tokens)
        found = self._prefetch_anchor(tokens)
        if found is None:
            return
        k, anchor = found
        cache = self.cache
        handle = CacheRequestHandle(f"prefetch-{self._rid}", 0)  # a new request each time
        self._rid += 1
        cache.prefetch_from_storage(
            handle, anchor.id, array("q", tokens[k:]), cache.get_last_hash_value(anchor.id),
            cache.get_prefix_hash_values(anchor.id) if cache.hicache_storage_pass_prefix_keys else None,
            matched_prefix_tokens=array("q", tokens[:k]))
        if handle not in cache.ongoing_prefetch:
            return  # declined (rate limit): nothing queued
        operation = cache.ongoing_prefetch[handle].operation
        ctl.wait_for(lambda: any(op is operation for op in ctl.queued(self.cc.prefetch_hit_queue)),
                     "the prefetch thread's storage hit query")
        _w, _l, storage, extra = cache._sync_hicache_ready_counts()
        cache._drain_storage_control_queues_impl(
            n_storage_hit=storage[0], n_ack_prefetch=0, n_backup=0, n_release=0,
            extra_release_counts=dict.fromkeys(extra, 0), log_metrics=False)
        info = cache.ongoing_prefetch.get(handle)
        if info is not None and info.host_indices is not None:
            self.prefetches.append(handle)
            anchor_path = ctl.node_path(anchor) if anchor is not self.core.root_node else None
            self.prefetch_of[handle] = (tuple(tokens), anchor_path, k)

    def _prefetch_op(self, op):
        if op >= len(self.prefetches):
            return None
        return self.cache.ongoing_prefetch[self.prefetches[op]].operation

    def do_prefetch_io(self, op, fail=False):
        operation = self._prefetch_op(op)
        if operation is not None and operation.id not in self.reads.got:
            self.reads.finish(operation.id)

    def prefetch_read_done(self, op) -> bool:
        """Whether this rank's read of prefetch ``op`` ran (the driver asks every rank)."""
        operation = self._prefetch_op(op)
        return operation is not None and operation.id in self.reads.got

    def do_check_prefetch_progress(self, op, all_read=False, fail=False):
        operation = self._prefetch_op(op)
        if operation is None:
            return
        handle = self.prefetches.pop(op)
        cache = self.cache
        if all_read:
            # Every rank's read ran: the completion acks arrive (the sync thread's MIN vote
            # per batch); their drain inserts the agreed prefix (the wait_complete path).
            self._drain_prefetch_acks(operation)
            done = cache.check_prefetch_progress(handle)
        else:
            # Some rank's read has not run: the wait budget is spent on every rank, the
            # timeout policy's MAX vote terminates, and the agreed prefix (nothing yet) is
            # inserted; the cut read then ends and its ack queues the unused host slots.
            self.shim.expire_prefetch(cache, handle, operation)
            done = cache.check_prefetch_progress(handle)
            self.reads.release(operation.id)
            self._drain_prefetch_acks(operation)
        assert done and handle not in cache.ongoing_prefetch, f"prefetch {handle.rid} still in flight"

    def _drain_prefetch_acks(self, operation):
        """The prefetch-ack part of the fused round, up to the operation's last ack."""
        last = ctl.wait_for(lambda: ctl.last_prefetch_ack(self.cc.ack_prefetch_queue, operation),
                            "the prefetch sync thread's completion ack")
        _w, _l, storage, extra = self.cache._sync_hicache_ready_counts()
        self.cache._drain_storage_control_queues_impl(
            n_storage_hit=0, n_ack_prefetch=min(storage[1], last), n_backup=0, n_release=0,
            extra_release_counts=dict.fromkeys(extra, 0), log_metrics=False)

    def _cut_reads(self):
        """Closing mid-prefetch: terminate every read on every rank (all close together) so
        the sync threads' votes complete before the threads stop."""
        for handle in self.prefetches:
            operation = self.cache.ongoing_prefetch[handle].operation
            operation.mark_terminate()
            self.reads.release(operation.id)
        for handle in self.prefetches:
            operation = self.cache.ongoing_prefetch[handle].operation
            with contextlib.suppress(TimeoutError):
                ctl.wait_for(lambda: ctl.last_prefetch_ack(self.cc.ack_prefetch_queue, operation),
                             "a cut prefetch's ack", timeout=5.0)
        self.prefetches = []

    def _round(self, part: str):
        """The fused ready-count round, then the part of check_hicache_events named."""
        try:
            w, l, storage, extra = self.cache._sync_hicache_ready_counts()
        except AssertionError as exc:
            self.halted = str(exc) or part
            return
        self.victims = []  # the digests agreed
        if part == "writing_check":
            self.cache.writing_check(finish_count=w)
        elif part == "loading_check":
            self.cache.loading_check(finish_count=l)
            for anchor in [a for a in self.load_spans if a not in self.cache.ongoing_load_back]:
                del self.load_spans[anchor]
        elif storage:
            if self.cfg.prefetch:  # prefetch hits and acks are drained by the prefetch steps
                storage = (0, 0) + tuple(storage[2:])
            self.shim.drain_storage(self.cache, storage, extra)
            for op in [o for o in self.storage_spans if o not in self.cache.ongoing_backup]:
                del self.storage_spans[op]

    def do_writing_check(self, fail=False):
        self._round("writing_check")

    def do_loading_check(self, fail=False):
        self._round("loading_check")

    def do_drain_storage_control_queues(self, fail=False):
        self._round("drain_storage_control_queues")

    # -- KV bytes -----------------------------------------------------------------------

    def _expected(self, path) -> float:
        return float(self.model.pages.index[tuple(path)] + 1)

    def _write_kv(self, slots, paths):
        if not len(slots):
            return
        vals = torch.tensor([self._expected(p) for p in paths], dtype=torch.float32)
        k = self.kv_pool.get_key_buffer(0)
        k[slots] = vals.view(-1, 1, 1).expand(-1, *k.shape[1:])
        if not self.cfg.single_writer:  # MLA's value is a view of the latent row
            v = self.kv_pool.get_value_buffer(0)
            v[slots] = -vals.view(-1, 1, 1).expand(-1, *v.shape[1:])

    # -- observation ----------------------------------------------------------------------

    def _loading(self):
        """Pages under an H->D copy not yet acked (the code already sees value set)."""
        out = set()
        pages = self.model.pages
        for anchor, (first, end) in self.load_spans.items():
            if anchor in self.cache.ongoing_load_back:
                for p in pages.chain(pages.index[first], pages.index[end]):
                    out.add(pages.paths[p])
        return out

    def _load_anchor_holds(self):
        """Host locks held by in-flight load-back anchors, per node id.

        0.5.23's load_back takes inc_host_lock_ref(anchor) next to the path lock and drops
        both at the ack; a split moves the lock's boundary up, so the segment from the
        anchor to the boundary holds it. The spec protects a loading node by its LOADING
        state, the path lock and (write_back) load_back_pending, and has no such hold, so
        the snapshot leaves it out of host_ref (it changes no decision: every check that
        reads host_lock_ref also finds the node locked or not evicted while it is held).
        """
        return self.shim.anchor_holds(self)

    def snapshot(self) -> dict:
        """The snapshot of docs/plugging-in.md, read from SGLang's own state:

        node: value None / set (loading while an H->D ack is pending) -> dev;
        host_value None / set with write_through_pending_id / set -> host; FULL lock_ref;
        FULL host_lock_ref (less load-back anchor holds, see _load_anchor_holds);
        hit_count; load_back_pending_id. Pools: allocator and host pool free slots.
        wq/lq: the copy acks in queue order, wdone/ldone their ready prefix. sq: storage
        ops not yet drained (ongoing_backup, oldest first), sdone: completed_tokens of
        the acked ones. dups: full_host_duplicates (write_back only: under write_through
        0.5.23 maintains it but nothing reads it). store: pages whose key the backend holds.
        """
        loading = self._loading()
        holds = self._load_anchor_holds()
        nodes = {}
        for x, end, start in self.nodes():
            nodes[end] = dict(start=start, **self._node_state(x, end in loading, holds.get(x.id, 0)))
        cache, cc = self.cache, self.cc
        wq = []
        for ack in cc.ack_write_queue:
            for ack_id in ack.node_ids:
                top, low = self._write_span(ack_id)
                wq.append((ctl.node_path(top.parent) + tuple(top.key.token_ids[:1]), ctl.node_path(low)))
        lq = [self.load_spans[a] for ack in cc.ack_load_queue for a in ack.node_ids]
        sq, sdone = [], []
        if self.cfg.storage:
            sq = [self.storage_spans[op] for op in cache.ongoing_backup]
            with cc.ack_backup_queue.mutex:
                acked = list(cc.ack_backup_queue.queue)
            # An MLA follower (backup_skip) acks without writing: the spec's SKIP ack (-1).
            sdone = [-1 if cc.backup_skip else op.completed_tokens for op in acked]
        pq, pdone, relq = self._prefetch_queues()
        dups = []
        if self.cfg.write_back:
            dups = [ctl.node_path(x) for x in self.core.full_host_duplicates.values()]
        track_victims = self.cfg.write_back and self.world > 1
        return {
            "rank": self.rank,
            "nodes": dict(sorted(nodes.items())),
            "dev_free": self.allocator.available_size(),
            "host_free": self.host_pool.available_size(),
            "durable": [],
            "wq": wq,
            "wdone": ctl.ready_count(cc.ack_write_queue),
            "lq": lq,
            "ldone": ctl.ready_count(cc.ack_load_queue),
            "sq": sq,
            "sdone": sdone,
            "pq": pq,
            "pdone": pdone,
            "relq": relq,
            "plan": [],
            "mismatch": 0,
            "closed": False,
            "dups": dups,
            "victims": list(self.victims) if track_victims else [],
            # An MLA follower owns no shard: it reads the writer's (the spec's store[0]).
            "store": (self._store() if not cc.backup_skip else []) if self.cfg.storage else None,
            "halted": self.halted,
        }

    def _prefetch_queues(self):
        """pq: the prefetches holding host slots (tokens, anchor end path, matched tokens,
        slots); pdone: this rank's read result per prefetch (-1: not run); relq: the host
        release queue, grouped by the call that queued each run of pages."""
        if self.reads is None:
            return [], [], []
        pq, pdone = [], []
        for handle in self.prefetches:
            info = self.cache.ongoing_prefetch[handle]
            tokens, anchor, k = self.prefetch_of[handle]
            pq.append((tokens, anchor, k, len(info.host_indices)))
            pdone.append(self.reads.got.get(info.operation.id, -1))
        drained = sum(self.released) - self.cc.host_mem_release_queue.qsize()
        while drained > 0:  # a drain round freed pages from the front
            take = min(self.released[0], drained)
            self.released[0] -= take
            drained -= take
            if not self.released[0]:
                self.released.pop(0)
        return pq, pdone, list(self.released)

    def _node_state(self, x, loading: bool, anchor_holds: int) -> dict:
        cd = x.component_data[FULL]
        return {
            "dev": "absent" if cd.value is None else "loading" if loading else "resident",
            "host": "absent" if cd.host_value is None
            else "writing" if x.write_through_pending_id is not None else "resident",
            "lock_ref": cd.lock_ref,
            "host_ref": cd.host_lock_ref - anchor_holds,
            "hit_count": x.hit_count,
            "load_back_pending": x.load_back_pending_id is not None,
            "released": False,
        }

    def _write_span(self, ack_id):
        """(top node, lowest node) of the chain one D->H ack publishes."""
        pending = self.cache.ongoing_write_through[ack_id]
        return self.core.node_by_id(pending.publish_node_ids[0]), self.core.node_by_id(ack_id)

    def _store(self):
        backend = self.cc.storage_backend
        return sorted(path for path, key in self.key_of.items() if backend.exists(key))

    # -- verification ---------------------------------------------------------------------

    def _copies(self, x):
        """(device slots, host slots) of a node, each None when it has no such copy."""
        cd = x.component_data[FULL]
        return cd.value, cd.host_value

    def _host_slots(self):
        """(layer 0 host K buffer, free host slots, host pool size)."""
        host = self.host_pool.anchor_entry.host_pool
        rows = host.kv_buffer[0] if self.cfg.single_writer else host.k_buffer[0]
        return rows, [i for i in range(host.size) if not bool(host.slot_used[i])], host.size

    def verify(self) -> list:
        """Bytes and slot ownership: every device/host copy a node holds has its pages'
        KV rows; no slot is owned twice or both owned and free; nothing leaks."""
        out = []
        k_dev = self.kv_pool.get_key_buffer(0)
        k_host, host_free, host_size = self._host_slots()
        dev_owned, host_owned = [], []
        for x, end, start in self.nodes():
            value, host_value = self._copies(x)
            paths = [end[: len(end) - len(x.key) + i + 1] for i in range(len(x.key))]
            want = torch.tensor([self._expected(p) for p in paths])
            name = "/".join(map(str, end))
            for tier, index, pool, owned in (("device", value, k_dev, dev_owned), ("host", host_value, k_host, host_owned)):
                if index is None:
                    continue
                slots = index.to(torch.int64)
                owned += slots.tolist()  # extends dev_owned / host_owned in place
                got = pool[slots][:, 0, 0]
                if not torch.equal(got, want):
                    out.append(f"rank {self.rank}: node {name}: {tier} KV {got.tolist()} != {want.tolist()}")
        if self.reads is not None:  # host slots a prefetch holds, or queued for release
            host_owned += [i for h in self.prefetches for i in self.cache.ongoing_prefetch[h].host_indices.tolist()]
            host_owned += [i for t in ctl.queued(self.cc.host_mem_release_queue) for i in t.tolist()]
        free_dev = self.allocator.free_pages.tolist() + self.allocator.release_pages.tolist()
        for what, owned, free, total in (
            ("device", dev_owned, free_dev, set(range(1, self.cfg.device_pages + 1))),
            ("host", host_owned, host_free, set(range(host_size))),
        ):
            if len(set(owned)) != len(owned):
                out.append(f"rank {self.rank}: {what} slot owned twice: {sorted(owned)}")
            if set(owned) & set(free):
                out.append(f"rank {self.rank}: {what} slots both owned and free: {sorted(set(owned) & set(free))}")
            if set(owned) | set(free) != total:
                out.append(f"rank {self.rank}: {what} slots leaked: {sorted(total - set(owned) - set(free))}")
        return out
