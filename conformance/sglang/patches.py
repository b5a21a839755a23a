"""Runtime patches that let upstream SGLang HiCache run on a CPU-only torch (0.5.13.post1 onwards).

Imported only inside an SGLang lane (`tiercheck lane setup` builds it);
nothing here changes HiCache's protocol logic. Each patch replaces a device-specific
primitive SGLang has no CPU path for. ``apply()`` is idempotent and must run before the
first sglang module that reads a patched name is imported by the adapter.
"""

from __future__ import annotations

import os
import sys
import time
import types
import unittest
from pathlib import Path

APPLIED: list[str] = []
USERS_OF_MHA_HOST_POOL_CLS = (
    "sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler",
    "sglang.srt.mem_cache.kv_cache_builder",
)


# A JIT build of the page-hash extension takes well under this; a build lock older than
# it was left by a process killed mid-build (a stopped run), and torch's FileBaton would
# wait for it forever (every later storage run of that lane hangs at its first page key).
STALE_BUILD_LOCK_S = 600.0


def _clear_stale_build_locks(root: str) -> None:
    for lock in Path(root).glob("*/lock"):
        try:
            if time.time() - lock.stat().st_mtime > STALE_BUILD_LOCK_S:
                lock.unlink()
        except FileNotFoundError:  # its builder finished meanwhile
            pass


def apply() -> list[str]:
    if APPLIED:
        return APPLIED
    os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "0")  # keep is_cpu() False: no AMX path
    # Some releases JIT-compile a C++ page-hash extension under one shared name; releases
    # differ in its source, so each lane keeps its own build (and no two lanes race on it).
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(sys.prefix, "torch_extensions"))
    _clear_stale_build_locks(os.environ["TORCH_EXTENSIONS_DIR"])
    import logging

    import torch

    # Host-pool size warnings and per-step debug lines would drown the conformance output.
    logging.getLogger("sglang").setLevel(logging.ERROR)

    # sglang.test.test_utils pulls HF datasets/benchmark deps in; only CustomTestCase of it
    # is used by the modules the cache imports.
    stub = types.ModuleType("sglang.test.test_utils")
    stub.CustomTestCase = unittest.TestCase
    sys.modules.setdefault("sglang.test.test_utils", stub)
    APPLIED.append("sglang.test.test_utils stubbed (CustomTestCase only)")

    # get_device() ends in an error path without CUDA/XPU/NPU; the pools live on "cpu".
    import sglang.srt.utils as su
    import sglang.srt.utils.common as suc

    su.get_device = suc.get_device = lambda device_id=None: "cpu"
    APPLIED.append('get_device() -> "cpu"')

    # Host pool buffers: the default allocator registers memory with cudaHostRegister.
    # memory_pool_host holds the allocator table before 0.5.14 and re-exports
    # pool_host.common's (the same dict) after.
    from sglang.srt.mem_cache import memory_pool_host as mph

    def alloc_plain(dims, dtype, device, pin_memory=False, **_):
        return torch.empty(dims, dtype=dtype, device=device)

    mph.ALLOC_MEMORY_FUNCS["cpu"] = alloc_plain
    APPLIED.append('host pool ALLOC_MEMORY_FUNCS["cpu"] = torch.empty')

    # io_backend "direct" + layout "layer_first" calls sgl_kernel.transfer_kv_direct, which
    # is only imported on CUDA/HIP/XPU: a torch index copy does the same rows. The MHA host
    # pool reads the name from pool_host.mha (0.5.16+) or memory_pool_host (before).
    def transfer_kv_direct(src_layers, dst_layers, src_indices, dst_indices, page_size):
        src_idx = src_indices.to(torch.int64)
        dst_idx = dst_indices.to(torch.int64)
        for src, dst in zip(src_layers, dst_layers):
            rows = src.index_select(0, src_idx.to(src.device)).to(dst.device)
            dst.index_copy_(0, dst_idx.to(dst.device), rows)

    import importlib
    import importlib.util

    try:
        from sglang.srt.mem_cache.pool_host import mha as ph_mha
    except ImportError:
        ph_mha = None
    if ph_mha is not None:
        ph_mha.transfer_kv_direct = transfer_kv_direct
        APPLIED.append("pool_host.mha.transfer_kv_direct = torch index_select/index_copy_")
        if importlib.util.find_spec("sglang.srt.mem_cache.pool_host.mla") is not None:
            from sglang.srt.mem_cache.pool_host import mla as ph_mla  # the MLA host pool's copy

            ph_mla.transfer_kv_direct = transfer_kv_direct
            APPLIED.append("pool_host.mla.transfer_kv_direct = torch index_select/index_copy_")
    else:  # the import there is conditional, so the name may not exist yet
        mph.transfer_kv_direct = transfer_kv_direct
        APPLIED.append("memory_pool_host.transfer_kv_direct = torch index_select/index_copy_")

    # torch.cpu.Stream has no synchronize(); the transfer engine calls it.
    if not hasattr(torch.cpu.Stream, "synchronize"):
        torch.cpu.Stream.synchronize = lambda self: None
        APPLIED.append("torch.cpu.Stream.synchronize = no-op")

    # The MHA host pool asks for pinned memory, which a CPU-only torch refuses. Every
    # module that imported the pool-class chooser gets the wrapped one (which modules
    # those are differs between releases).
    if ph_mha is None or not hasattr(ph_mha, "get_mha_host_pool_cls"):
        return APPLIED  # HiRadixCache releases: with the allocator above pinning is ignored
    orig_cls = ph_mha.get_mha_host_pool_cls

    def get_mha_host_pool_cls(device_pool):
        cls = orig_cls(device_pool)

        def build(*args, **kwargs):
            kwargs["pin_memory"] = False
            return cls(*args, **kwargs)

        return build

    for name in USERS_OF_MHA_HOST_POOL_CLS:
        if importlib.util.find_spec(name) is not None:
            mod = importlib.import_module(name)
            if getattr(mod, "get_mha_host_pool_cls", None) is orig_cls:
                mod.get_mha_host_pool_cls = get_mha_host_pool_cls
                APPLIED.append(f"{name}: MHA host pool built with pin_memory=False")

    return APPLIED
