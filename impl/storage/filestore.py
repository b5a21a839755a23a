"""The default L3 backend: an embedded content-addressed file store in one directory.

One file per key. A file is written to a temp file in the same directory, fsynced and
renamed over the final name, so a reader sees either no file or a complete one. Each file
starts with a header (magic, version, key, payload length, payload digest); a file whose
header, length or digest does not check out is never served: the get answers
CHECKSUM_MISMATCH, counts it and removes the file so that the next backup rewrites it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import tempfile
import threading
import time
from typing import Sequence

import torch

from tiercheck.errors import UserError

from . import codes
from .base import StorageBackend, byte_view, check_keys, check_pages

MAGIC = b"TCKV"
VERSION = 1
# magic, version, key length, payload length, blake2b-128 digest of the payload
HEADER = struct.Struct("<4sHHQ16s")
SUFFIX = ".kv"
TEMP_PREFIX = ".tmp-"


def _digest(data) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


class _Corrupt(Exception):
    """The file exists but is not a complete, well-formed object for this key."""


class FileStore(StorageBackend):
    """Directory-backed store. ``capacity_bytes`` (optional) bounds the total file size;
    a put that would exceed it answers NO_SPACE (-200). Capacity is accounted per
    instance (the directory is scanned at open)."""

    name = "file"

    def __init__(self, root: str | os.PathLike, capacity_bytes: int | None = None,
                 fsync: bool = True, stale_temp_age_s: float = 300.0) -> None:
        super().__init__()
        self.root = os.fspath(root)
        if capacity_bytes is not None and (not isinstance(capacity_bytes, int) or capacity_bytes < 0):
            raise UserError(f"file store: capacity_bytes must be a non-negative int, got {capacity_bytes!r}")
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as e:
            raise UserError(f"file store: cannot create directory {self.root}: {e.strerror}") from None
        if not os.path.isdir(self.root) or not os.access(self.root, os.W_OK | os.X_OK):
            raise UserError(f"file store: {self.root} is not a writable directory")
        self.capacity_bytes = capacity_bytes
        self.fsync = fsync
        self._lock = threading.Lock()  # serialises writers and the capacity account
        self._closed = False
        self._used = self._scan(stale_temp_age_s)

    # -- helpers -------------------------------------------------------------------------

    @property
    def used_bytes(self) -> int:
        return self._used

    def path_of(self, key: str) -> str:
        """File of ``key``: a hash of the key, so any key maps to a safe fixed-length name."""
        return os.path.join(self.root, hashlib.sha256(key.encode("utf-8")).hexdigest() + SUFFIX)

    def _scan(self, stale_temp_age_s: float) -> int:
        used, now = 0, time.time()
        with os.scandir(self.root) as it:
            for e in it:
                try:
                    if e.name.startswith(TEMP_PREFIX):
                        # A writer that died between write and rename; never served anyway.
                        if now - e.stat().st_mtime > stale_temp_age_s:
                            os.unlink(e.path)
                            self.stats.add("stale_temp_removed")
                    elif e.name.endswith(SUFFIX):
                        used += e.stat().st_size
                except FileNotFoundError:
                    pass
        return used

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise RuntimeError(f"file store {self.root}: {what} after close()")

    @staticmethod
    def _read_header(f, key_bytes: bytes) -> tuple[int, bytes, int]:
        """Validate header, key and total size of an open file: (payload_len, digest, size)."""
        raw = f.read(HEADER.size)
        if len(raw) != HEADER.size:
            raise _Corrupt("short header")
        magic, version, klen, plen, digest = HEADER.unpack(raw)
        if magic != MAGIC or version != VERSION:
            raise _Corrupt("bad magic/version")
        if f.read(klen) != key_bytes:
            raise _Corrupt("key mismatch")
        size = os.fstat(f.fileno()).st_size
        if size != HEADER.size + klen + plen:
            raise _Corrupt("length mismatch (truncated or padded)")
        return plen, digest, size

    def _probe(self, path: str, key_bytes: bytes) -> bool | None:
        """True: a well-formed object; False: no file; None: a corrupt file."""
        try:
            with open(path, "rb") as f:
                self._read_header(f, key_bytes)
            return True
        except FileNotFoundError:
            return False
        except _Corrupt:
            return None

    def _quarantine(self, path: str, ino: int) -> None:
        """Remove a corrupt file, unless a writer already replaced it with a new one."""
        with self._lock:
            try:
                st = os.stat(path)
                if st.st_ino == ino:
                    os.unlink(path)
                    self._used -= st.st_size
                    self.stats.add("corrupt_removed")
            except FileNotFoundError:
                pass

    def _fsync_dir(self) -> None:
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- interface -----------------------------------------------------------------------

    def batch_put(self, keys: Sequence[str], values: Sequence[torch.Tensor]) -> list[int]:
        self._check_open("batch_put")
        check_pages(keys, values, "file store batch_put")
        results, wrote = [], False
        with self._lock:
            for key, value in zip(keys, values):
                code, written = self._put_one(key, value)
                wrote |= written
                results.append(code)
            if wrote and self.fsync:
                self._fsync_dir()  # make the renames durable before acking the batch
        self.stats.add_codes("put", results)
        return results

    def _put_one(self, key: str, value: torch.Tensor) -> tuple[int, bool]:
        """(code, whether a file was written). Caller holds the lock."""
        path, kb = self.path_of(key), key.encode("utf-8")
        state = self._probe(path, kb)
        if state is True:
            self.stats.add("put_already_exists")  # content-addressed: never rewritten
            return codes.OK, False
        old_size = 0
        if state is None:
            self.stats.add("corrupt_replaced")
            try:
                old_size = os.stat(path).st_size
            except FileNotFoundError:
                pass
        payload = byte_view(value).numpy()
        size = HEADER.size + len(kb) + payload.nbytes
        if self.capacity_bytes is not None and self._used - old_size + size > self.capacity_bytes:
            return codes.NO_SPACE, False
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=self.root)
            with os.fdopen(fd, "wb") as f:
                f.write(HEADER.pack(MAGIC, VERSION, len(kb), payload.nbytes, _digest(payload)))
                f.write(kb)
                f.write(memoryview(payload))
                f.flush()
                if self.fsync:
                    os.fdatasync(f.fileno())  # data + size; the rename is synced via the dir
            os.replace(tmp, path)
            tmp = None
        except OSError as e:
            self.stats.add("io_error")
            code = codes.NO_SPACE if e.errno in (errno.ENOSPC, errno.EDQUOT) else codes.INTERNAL_ERROR
            return code, False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        self._used += size - old_size
        return codes.OK, True

    def batch_get(self, keys: Sequence[str], outs: Sequence[torch.Tensor]) -> list[int]:
        self._check_open("batch_get")
        check_pages(keys, outs, "file store batch_get")
        results = [self._get_one(k, o) for k, o in zip(keys, outs)]
        self.stats.add_codes("get", results)
        return results

    def _get_one(self, key: str, out: torch.Tensor) -> int:
        path = self.path_of(key)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            return codes.OBJECT_NOT_FOUND
        except OSError:
            self.stats.add("io_error")
            return codes.INTERNAL_ERROR
        with f:
            ino = os.fstat(f.fileno()).st_ino
            try:
                plen, digest, _ = self._read_header(f, key.encode("utf-8"))
                dst = byte_view(out)
                if plen != dst.numel():
                    return codes.LENGTH_MISMATCH
                # Read into scratch and verify before touching ``out``: a bad page is never served.
                buf = bytearray(plen)
                if f.readinto(buf) != plen:
                    raise _Corrupt("short payload")
                if _digest(buf) != digest:
                    raise _Corrupt("digest mismatch")
            except _Corrupt:
                self.stats.add("corrupt")
                corrupt = True
            except OSError:
                self.stats.add("io_error")
                return codes.INTERNAL_ERROR
            else:
                corrupt = False
        if corrupt:
            self._quarantine(path, ino)
            return codes.CHECKSUM_MISMATCH
        if plen:
            dst.copy_(torch.frombuffer(buf, dtype=torch.uint8))
        return plen

    def batch_exists(self, keys: Sequence[str]) -> list[int]:
        self._check_open("batch_exists")
        check_keys(keys, "file store batch_exists")
        results = []
        for key in keys:
            try:
                state = self._probe(self.path_of(key), key.encode("utf-8"))
            except OSError:
                self.stats.add("io_error")
                results.append(codes.EXISTS_ERROR)
                continue
            if state is None:
                self.stats.add("corrupt")
            results.append(codes.EXISTS if state else codes.ABSENT)
        return results

    def delete(self, keys: Sequence[str]) -> list[int]:
        self._check_open("delete")
        check_keys(keys, "file store delete")
        results = []
        with self._lock:
            for key in keys:
                path = self.path_of(key)
                try:
                    size = os.stat(path).st_size
                    os.unlink(path)
                except FileNotFoundError:
                    results.append(codes.OBJECT_NOT_FOUND)
                    continue
                except OSError:
                    self.stats.add("io_error")
                    results.append(codes.INTERNAL_ERROR)
                    continue
                self._used -= size
                results.append(codes.OK)
        return results

    def close(self) -> None:
        self._closed = True

    def __repr__(self) -> str:
        return f"FileStore({self.root!r}, used={self._used}, capacity={self.capacity_bytes})"
