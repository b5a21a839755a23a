"""L3 backend over a real Mooncake store (``mooncake.store.MooncakeDistributedStore``).

It uses the batch calls SGLang's Mooncake backend uses (batch_put_from, batch_get_into,
batch_is_exist). Those move bytes between the store and *registered* memory, so pages go
through one registered staging buffer (register_buffer once, grown on demand): a page is
copied in, its blake2b-128 digest appended, and the object is payload||digest. A get lands
in the staging buffer, and is copied to the caller's page only when the length and the
digest check out; a failed or corrupt page never touches the destination.

``mooncake`` is imported lazily: the rest of tiercheck works without the package.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Sequence

import torch

from tiercheck.errors import UserError

from . import codes
from .base import StorageBackend, byte_view, check_keys, check_pages
from .mooncake_master import master_health

TRAILER = 16  # bytes of payload digest stored after each page
_ALIGN = 64
INSTALL_HINT = ("apt-get install -y libibverbs1 && "
                "pip install mooncake-transfer-engine-non-cuda==0.3.13.post1")


def load_store_class():
    """``MooncakeDistributedStore``, or a one-line UserError saying what to install."""
    try:
        from mooncake.store import MooncakeDistributedStore
    except ImportError as e:  # missing package, or libibverbs.so.1 missing
        msg = (str(e).splitlines() or ["import failed"])[0]
        raise UserError(f"mooncake backend unavailable ({msg}); install: {INSTALL_HINT}") from None
    return MooncakeDistributedStore


def _digest(data) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _align(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class MooncakeBackend(StorageBackend):
    """A Mooncake client that also contributes ``segment_bytes`` of store memory.

    ``close()`` is slow (about 1 s; 7-11 s when the master is dead): share one instance.
    """

    name = "mooncake"

    def __init__(self, master_addr: str, *, segment_bytes: int = 64 << 20,
                 local_buffer_bytes: int = 16 << 20, staging_bytes: int = 8 << 20,
                 local_hostname: str = "127.0.0.1", protocol: str = "tcp",
                 rdma_devices: str = "", metadata_server: str = "P2PHANDSHAKE",
                 master_health_url: str | None = None) -> None:
        super().__init__()
        cls = load_store_class()
        if master_health_url is not None:
            h = master_health(master_health_url)
            if not (h and h.get("service_ready") is True):
                # setup() against a master that is not ready retries for ~90 s: refuse instead.
                raise UserError(f"mooncake master at {master_addr} is not healthy ({master_health_url})")
        self.master_addr = master_addr
        self._lock = threading.Lock()  # one batch at a time owns the staging buffer
        self._closed = True
        self._store = cls()
        rc = self._store.setup(local_hostname, metadata_server, segment_bytes, local_buffer_bytes,
                               protocol, rdma_devices, master_addr)
        if rc != 0:
            raise UserError(f"mooncake client setup against master {master_addr} failed (code {rc})")
        self._closed = False
        self._staging: torch.Tensor | None = None
        self._grow(staging_bytes)

    # -- staging buffer ------------------------------------------------------------------

    def _grow(self, nbytes: int) -> None:
        if self._staging is not None:
            if self._staging.numel() >= nbytes:
                return
            self._store.unregister_buffer(self._staging.data_ptr())
        buf = torch.empty(max(nbytes, _ALIGN), dtype=torch.uint8)
        rc = self._store.register_buffer(buf.data_ptr(), buf.numel())
        if rc != 0:
            raise RuntimeError(f"mooncake register_buffer of {buf.numel()} bytes failed (code {rc})")
        self._staging, self._staging_np = buf, buf.numpy()

    def _chunks(self, sizes: list[int]):
        """Index ranges [lo, hi) whose objects fit the staging buffer together, with offsets."""
        self._grow(max(sizes, default=0))
        cap, lo, offs, off = self._staging.numel(), 0, [], 0
        for i, sz in enumerate(sizes):
            if off + sz > cap and i > lo:
                yield lo, i, offs
                lo, offs, off = i, [], 0
            offs.append(off)
            off = _align(off + sz)
        if lo < len(sizes):
            yield lo, len(sizes), offs

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"mooncake backend ({self.master_addr}): {what} after close()")

    @staticmethod
    def _normalise(rc, n: int) -> list[int]:
        rc = [int(r) for r in rc]
        return rc if len(rc) == n else [codes.INTERNAL_ERROR] * n

    # -- interface -----------------------------------------------------------------------

    def batch_put(self, keys: Sequence[str], values: Sequence[torch.Tensor]) -> list[int]:
        check_pages(keys, values, "mooncake batch_put")
        keys, results = list(keys), []
        with self._lock:
            self._check_open("batch_put")
            sizes = [byte_view(v).numel() + TRAILER for v in values]
            for lo, hi, offs in self._chunks(sizes):
                base, stg, np_ = self._staging.data_ptr(), self._staging, self._staging_np
                for i, off in zip(range(lo, hi), offs):
                    n = sizes[i] - TRAILER
                    stg[off:off + n].copy_(byte_view(values[i]))
                    np_[off + n:off + n + TRAILER] = memoryview(_digest(np_[off:off + n]))
                rc = self._store.batch_put_from(keys[lo:hi], [base + o for o in offs], sizes[lo:hi])
                results += self._normalise(rc, hi - lo)
        self.stats.add_codes("put", results)
        return results

    def batch_get(self, keys: Sequence[str], outs: Sequence[torch.Tensor]) -> list[int]:
        check_pages(keys, outs, "mooncake batch_get")
        keys, results = list(keys), []
        with self._lock:
            self._check_open("batch_get")
            sizes = [byte_view(o).numel() + TRAILER for o in outs]
            for lo, hi, offs in self._chunks(sizes):
                base, stg, np_ = self._staging.data_ptr(), self._staging, self._staging_np
                rc = self._store.batch_get_into(keys[lo:hi], [base + o for o in offs], sizes[lo:hi])
                rc = self._normalise(rc, hi - lo)
                for i, off, r in zip(range(lo, hi), offs, rc):
                    n = sizes[i] - TRAILER
                    if r < 0:
                        results.append(r)
                    elif r != sizes[i]:
                        results.append(codes.LENGTH_MISMATCH)
                    elif _digest(np_[off:off + n]) != bytes(np_[off + n:off + n + TRAILER]):
                        self.stats.add("corrupt")
                        results.append(codes.CHECKSUM_MISMATCH)
                    else:
                        byte_view(outs[i]).copy_(stg[off:off + n])
                        results.append(n)
        self.stats.add_codes("get", results)
        return results

    def batch_exists(self, keys: Sequence[str]) -> list[int]:
        check_keys(keys, "mooncake batch_exists")
        with self._lock:
            self._check_open("batch_exists")
            res = self._normalise(self._store.batch_is_exist(list(keys)), len(keys)) if keys else []
        errors = sum(1 for r in res if r not in (codes.EXISTS, codes.ABSENT))
        if errors:
            self.stats.add("exists.ERROR", errors)
        return [r if r in (codes.EXISTS, codes.ABSENT) else codes.EXISTS_ERROR for r in res]

    def delete(self, keys: Sequence[str]) -> list[int]:
        """Remove objects now, lease or not (force): used to simulate store eviction."""
        check_keys(keys, "mooncake delete")
        with self._lock:
            self._check_open("delete")
            return self._normalise(self._store.batch_remove(list(keys), True), len(keys)) if keys else []

    def raw_store(self):
        """The underlying MooncakeDistributedStore (fault drills that bypass the checks)."""
        return self._store

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._staging is not None:
                self._store.unregister_buffer(self._staging.data_ptr())
            self._store.close()

    def __repr__(self) -> str:
        return f"MooncakeBackend(master={self.master_addr}, closed={self._closed})"
