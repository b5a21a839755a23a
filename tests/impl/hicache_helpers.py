"""Helpers shared by the HiCache implementation tests (a uniquely named module)."""

from __future__ import annotations

from tiercheck.impl.hicache import HiCacheConfig, LockstepHiCache
from tiercheck.impl.kvdata import KVLayout

LAYOUT = KVLayout(layers=2, heads=1, head_dim=4, page_size=1)


def cfg(**kw) -> HiCacheConfig:
    base = dict(layout=LAYOUT, device_pages=8, host_pages=8, victim_order="path", manual=True)
    base.update(kw)
    return HiCacheConfig(**base)


def group(world_size: int = 1, backend=None, **kw) -> LockstepHiCache:
    """A lock-step group; ``backend``: the storage factory, ``kw``: config fields."""
    return LockstepHiCache(cfg(**kw), world_size, backend, timeout=5.0)


def nodes(g, rank: int = 0) -> dict:
    return g.snapshot(store=False)[rank]["nodes"]


def node(g, path, rank: int = 0) -> dict:
    return nodes(g, rank)[tuple(path)]


def all_ranks(g, fn, *args) -> list:
    return [fn(r, *args) for r in range(g.world_size)]


def write_all(g) -> None:
    """Finish every pending D->H copy on every rank, then commit (writing_check)."""
    for r in range(g.world_size):
        while g.write_dma_done(r) is not None:
            pass
    g.writing_check()


def load_all(g) -> None:
    for r in range(g.world_size):
        while g.load_dma_done(r) is not None:
            pass
    g.loading_check()


def backup_all(g, pages=None) -> None:
    """Finish every pending storage backup on every rank, then drain."""
    snaps = g.snapshot(store=False)
    for r, s in enumerate(snaps):
        for _ in range(len(s["sq"]) - len(s["sdone"])):
            g.storage_backup_done(r, pages)
    g.drain_storage_control_queues()


def replica(snap: dict) -> dict:
    """What TP ranks must hold identically (rank_agreement)."""
    keys = ("nodes", "dev_free", "host_free", "wq", "lq", "sq", "pq", "relq", "closed")
    return {k: snap[k] for k in keys}


def ranks_agree(g) -> bool:
    snaps = g.snapshot(store=False)
    return all(replica(s) == replica(snaps[0]) for s in snaps[1:])


def metric(g, name: str, rank: int = 0) -> int:
    return g.metrics()[rank].get(name, 0)
