"""The storage tier (L3): backends keyed by per-page content hash, fault injection on top of
them, and the per-rank worker that runs backups and prefetches off the scheduler thread.

``mooncake`` is imported lazily (``from tiercheck.impl.storage.mooncake import
MooncakeBackend``): nothing here needs the Mooncake package.
"""

from . import codes
from .base import Counters, StorageBackend, completed_prefix, rank_key
from .faults import FaultyBackend
from .filestore import FileStore
from .worker import OpResult, StorageWorker

__all__ = ["codes", "Counters", "StorageBackend", "completed_prefix", "rank_key",
           "FaultyBackend", "FileStore", "OpResult", "StorageWorker"]
