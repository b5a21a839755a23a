"""The reference HiCache implementation: a radix tree over pages with device, host and
storage tiers, real torch pools and copies, real storage backends, and TP ranks that agree
only through the collective interface (impl/collective.py).

    cfg = HiCacheConfig(policy="write_through", storage=True, ...)
    group = LockstepHiCache(cfg, world_size=2, storage=FileStorage(dir))  # or GlooHiCache
    group.insert(tokens); group.write_dma_done(0); group.writing_check(); ...
    group.snapshot(); group.verify()

Never imports tiercheck.spec or tiercheck.models.
"""

from .config import HiCacheConfig
from .errors import (
    DeviceFullError,
    HiCacheError,
    ProtocolError,
    RemoteRankError,
    ReplicaDivergenceError,
)
from .gloo import GlooHiCache
from .group import ACTIONS, LockstepHiCache
from .rank import HiCacheRank
from .storage_setup import FileStorage, MooncakeStorage
from .variants import VARIANT_NAMES

__all__ = [
    "ACTIONS", "DeviceFullError", "FileStorage", "GlooHiCache", "HiCacheConfig", "HiCacheError",
    "HiCacheRank", "LockstepHiCache", "MooncakeStorage", "ProtocolError", "RemoteRankError",
    "ReplicaDivergenceError", "VARIANT_NAMES",
]
