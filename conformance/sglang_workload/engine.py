"""One upstream SGLang HiCache on CPU, built the way the scheduler builds it, for workloads.

The same construction as the conformance adapter (``UnifiedRadixCache.init_hicache`` on
an MHA device pool, the CPU patches of ``sglang_patches``, the file L3 backend), but with
SGLang's own decisions left in place: its LRU eviction, its copy completions (on CPU a
copy is done when submitted), its storage thread and batching. Only the sizes and the
HiCache options of a run are chosen here. Imported only inside an SGLang lane.

KV bytes carry their token: token id t is written as K = (t >> 15, t & 0x7fff) and
V = -K (exact in float32), so any copy on any tier can be checked against the token the
tree says it holds (``verify``), and a storage page against its page's tokens.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from dataclasses import dataclass

import torch

from ..sglang import patches as sglang_patches
from ..sglang.core import rank_server_args

SPLIT = 1 << 15


@dataclass(frozen=True)
class CacheSetup:
    """A HiCache configuration in tokens (page size 1, as the adapter)."""

    device_tokens: int = 512
    host_tokens: int = 128
    policy: str = "write_through"  # write_through | write_through_selective | write_back
    storage: bool = True
    host_memory_mode: str = "cache"  # cache | buffer_only
    hicache_size_gb: int = 0  # >0: SGLang sizes the host pool from GB (overrides the ratio)
    io_backend: str = "direct"  # the only one with a CPU path (kernel needs sgl_kernel)
    mem_layout: str = "layer_first"

    @property
    def ratio(self) -> float:
        # SGLang: host size = int(device * ratio) (+ a padding page it keeps allocatable).
        return (max(self.host_tokens, 1) - 0.5) / self.device_tokens


def encode(tokens) -> torch.Tensor:
    """K rows (n, 1, 2) for token ids."""
    t = torch.as_tensor(list(tokens), dtype=torch.int64)
    return torch.stack([(t // SPLIT), (t % SPLIT)], dim=1).to(torch.float32).view(-1, 1, 2)


def decode(k_rows: torch.Tensor) -> list[int]:
    flat = k_rows.reshape(-1, 2).to(torch.int64)
    return (flat[:, 0] * SPLIT + flat[:, 1]).tolist()


class Engine:
    """The cache, its pools and the helpers a scheduler needs (alloc with eviction,
    KV writes, page keys), plus byte verification of every tier."""

    def __init__(self, setup: CacheSetup, storage_dir: str | None = None, rank: int = 0,
                 world: int = 1, group=None):
        sglang_patches.apply()
        self.setup = setup
        self.rank, self.world = rank, world
        self._exit = contextlib.ExitStack()
        try:
            self._build(storage_dir, group)
        except BaseException:
            self._exit.close()
            raise

    def _build(self, storage_dir, group):
        from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
        from sglang.srt.mem_cache.unified_cache.components.base import ComponentType
        from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

        s = self.setup
        self.FULL = ComponentType.FULL
        if s.storage and storage_dir is None:
            raise ValueError("a storage run needs a storage directory")
        args = rank_server_args(self._exit, self.rank, self.world, storage_dir if s.storage else None,
                                hicache_io_backend=s.io_backend, hicache_mem_layout=s.mem_layout,
                                hicache_write_policy=s.policy, hicache_ratio=s.ratio,
                                hicache_size=s.hicache_size_gb, hicache_host_memory_mode=s.host_memory_mode)
        self.kv_pool = MHATokenToKVPool(size=s.device_tokens, page_size=1, dtype=torch.float32,
                                        head_num=1, head_dim=2, layer_num=1, device="cpu",
                                        enable_memory_saver=False)
        self.allocator = TokenToKVPoolAllocator(size=s.device_tokens, dtype=torch.float32,
                                                device="cpu", kvcache=self.kv_pool, need_sort=False)
        params = CacheInitParams(
            disable=False,
            req_to_token_pool=ReqToTokenPool(size=4, max_context_len=64, device="cpu",
                                             enable_memory_saver=False),
            token_to_kv_pool_allocator=self.allocator, page_size=1, tp_cache_group=group,
            tree_components=(ComponentType.FULL,), tree_core_backend="python",
        )
        self.cache = UnifiedRadixCache(params=params)
        self.cache.init_hicache(args, params)
        import atexit

        atexit.unregister(self.cache.shutdown)
        self.cc = self.cache.cache_controller
        self.core = self.cache.tree_core
        self.host_pool = self.cc.mem_pool_host
        self.host_capacity = self.host_pool.available_size()
        self.buffer_mode = s.host_memory_mode == "buffer_only"

    def close(self):
        try:
            if self.cc is not None and self.cc.enable_storage:
                self.cc._stop_storage_threads()
        finally:
            self._exit.close()

    # -- scheduler helpers ---------------------------------------------------------------

    @staticmethod
    def key(tokens):
        from sglang.srt.mem_cache.radix_cache import RadixKey

        return RadixKey(array("q", tokens))

    def page_keys(self, tokens) -> list[str]:
        """SGLang's chained L3 key of every page (token) of ``tokens``."""
        from sglang.srt.mem_cache.utils import get_storage_hash_str

        out, parent = [], None
        for t in tokens:
            parent = get_storage_hash_str(self.key([t]), parent, page_size=1)[0]
            out.append(parent)
        return out

    def alloc(self, n: int):
        """Device slots, evicting with SGLang's own policy first; None if it cannot."""
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams

        if n == 0:
            return torch.empty(0, dtype=torch.int64)
        short = n - self.allocator.available_size()
        if short > 0:
            self.cache.evict(EvictParams(num_tokens=short))
        if self.allocator.available_size() < n:
            return None
        return self.allocator.alloc(n).to(torch.int64)

    def write_kv(self, slots, tokens) -> None:
        if not len(slots):
            return
        k, v = self.kv_pool.get_key_buffer(0), self.kv_pool.get_value_buffer(0)
        rows = encode(tokens)
        k[slots] = rows
        v[slots] = -rows

    # -- verification ---------------------------------------------------------------------

    def nodes(self):
        """(node, tokens from the root to its end) for every node below the root."""
        out, stack = [], [(self.core.root_node, ())]
        while stack:
            node, path = stack.pop()
            for child in node.children.values():
                end = path + tuple(child.key.token_ids)
                out.append((child, end))
                stack.append((child, end))
        return out

    def verify(self) -> list[str]:
        """Every device and host copy in the tree holds its tokens' KV (K and V); no slot
        is owned twice or both owned and free."""
        out = []
        kd, vd = self.kv_pool.get_key_buffer(0), self.kv_pool.get_value_buffer(0)
        host = self.host_pool.anchor_entry.host_pool
        kh, vh = host.k_buffer[0], host.v_buffer[0]
        dev_owned, host_owned = [], []
        for x, end in self.nodes():
            cd = x.component_data[self.FULL]
            toks = list(x.key.token_ids)
            for tier, idx, kb, vb, owned in (("device", cd.value, kd, vd, dev_owned),
                                             ("host", cd.host_value, kh, vh, host_owned)):
                if idx is None:
                    continue
                slots = idx.to(torch.int64)
                owned += slots.tolist()
                if decode(kb[slots]) != toks or not torch.equal(vb[slots], -kb[slots]):
                    out.append(f"node of {len(end)} tokens: {tier} KV does not hold its tokens")
        for what, owned in (("device", dev_owned), ("host", host_owned)):
            if len(set(owned)) != len(owned):
                out.append(f"{what} slot owned twice")
        free_dev = set(self.allocator.free_pages.tolist() + self.allocator.release_pages.tolist())
        if set(dev_owned) & free_dev:
            out.append("device slots both owned and free")
        return out

    def verify_store(self, tokens_by_key: dict) -> tuple[int, list[str]]:
        """Read back every stored page the workload knows the key of; returns (pages
        read, problems). A page file holds the page's K then V rows."""
        backend = self.cc.storage_backend
        problems, n = [], 0
        for key, tok in tokens_by_key.items():
            path = os.path.join(backend.file_path, backend._get_suffixed_key(key) + ".bin")
            try:
                data = torch.from_file(path, size=os.path.getsize(path) // 4, dtype=torch.float32)
            except (FileNotFoundError, RuntimeError):
                continue
            n += 1
            k = data[:2]
            if decode(k) != [tok] or not torch.equal(data[2:4], -k):
                problems.append(f"stored page {key[:12]}: bytes are not token {tok}'s KV")
        return n, problems
