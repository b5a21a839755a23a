"""How each rank gets its storage backend: small picklable factories (gloo processes build
their own), optionally wrapped in a FaultyBackend for fault injection."""

from __future__ import annotations

from dataclasses import dataclass

from tiercheck.impl.storage import FaultyBackend, FileStore, StorageBackend


@dataclass(frozen=True)
class FileStorage:
    """The embedded file store: every rank opens the same directory (keys carry the rank)."""

    root: str
    faulty: bool = False
    capacity_bytes: int | None = None
    fsync: bool = False  # tests and the demo do not need power-loss durability

    def make(self, rank: int) -> StorageBackend:
        b: StorageBackend = FileStore(self.root, capacity_bytes=self.capacity_bytes, fsync=self.fsync)
        return FaultyBackend(b) if self.faulty else b


@dataclass(frozen=True)
class MooncakeStorage:
    """A Mooncake client per rank against a running master, mounting segment_bytes (16 MiB default) of store memory."""

    master_addr: str
    health_url: str | None = None
    segment_bytes: int = 16 << 20
    local_buffer_bytes: int = 4 << 20
    staging_bytes: int = 4 << 20
    faulty: bool = False

    def make(self, rank: int) -> StorageBackend:
        from tiercheck.impl.storage.mooncake import MooncakeBackend

        b: StorageBackend = MooncakeBackend(
            self.master_addr, segment_bytes=self.segment_bytes,
            local_buffer_bytes=self.local_buffer_bytes, staging_bytes=self.staging_bytes,
            master_health_url=self.health_url,
        )
        return FaultyBackend(b) if self.faulty else b


def backend_for(storage, rank: int) -> tuple[StorageBackend | None, bool]:
    """(backend, owned): a factory makes one per rank (owned); an instance is shared."""
    if storage is None:
        return None, False
    if isinstance(storage, StorageBackend):
        return storage, False
    if hasattr(storage, "make"):
        return storage.make(rank), True
    if callable(storage):
        return storage(rank), True
    raise TypeError(f"storage must be a StorageBackend, a factory or None, got {type(storage).__name__}")
