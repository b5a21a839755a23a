"""The same HiCache scenarios on 2 real gloo processes and in lock-step: identical final
snapshots and metrics, identical replicas on both ranks, and the same clear errors."""

import pytest

from hicache_helpers import backup_all, cfg, load_all, replica, write_all
from tiercheck.impl.collective import CollectiveTimeoutError
from tiercheck.impl.hicache import FileStorage, GlooHiCache, LockstepHiCache, ReplicaDivergenceError

pytestmark = pytest.mark.gloo

STORAGE_CFG = dict(device_pages=6, host_pages=4, storage=True, prefetch=True, mirror_release=True,
                   host_free_target=2, fail_close_after=3)


def storage_scenario(g):
    """Write-through + storage + prefetch + mirror release, with per-rank differences in
    what storage completed: a plan mismatch, then consensus, pruning, a prefetch whose
    completed pages are the MIN over ranks, a load-back."""
    g.insert([1, 2, 3])
    write_all(g)
    g.storage_backup_done(0)
    g.storage_backup_done(1, 2)  # rank 1 stores a prefix only: the ranks' plans differ
    g.drain_storage_control_queues()
    g.drain_storage_control_queues()  # mismatch 1
    g.insert([1, 2, 4])  # splits (1,2,3) at (1,2)
    write_all(g)
    backup_all(g)  # mismatch 2; both ranks now propose (1,2)
    g.drain_storage_control_queues()  # consensus: (1,2) released everywhere
    g.evict_node([1, 2, 4])
    g.evict_node([1, 2, 3])
    g.evict_node([1, 2])  # released mirror: deleted with its host-only subtree
    g.prefetch_from_storage([1, 2, 3])
    for r in (0, 1):
        g.prefetch_io(r, 0)  # rank 0 reads 3 pages, rank 1 2
    g.check_prefetch_progress(0)
    g.load_back([1, 2])
    load_all(g)
    g.drain_storage_control_queues()
    assert g.verify() == []
    return g.snapshot(), g.metrics()


def test_gloo_and_lockstep_reach_the_same_state(tmp_path):
    c = cfg(**STORAGE_CFG)
    with LockstepHiCache(c, 2, FileStorage(str(tmp_path / "a"))) as g:
        lock = storage_scenario(g)
    with GlooHiCache(c, 2, FileStorage(str(tmp_path / "b")), collective_timeout=10) as g:
        gloo = storage_scenario(g)
    assert gloo == lock
    snaps = gloo[0]
    assert replica(snaps[0]) == replica(snaps[1])
    assert list(snaps[0]["nodes"]) == [(1, 2)]  # 2 of 3 pages: the MIN over ranks
    assert snaps[0]["nodes"][(1, 2)]["dev"] == "resident"
    assert gloo[1][0]["tiercheck:release_plan_mismatch_total"] == 2


def test_gloo_reports_a_skipped_collective_and_a_divergence(tmp_path):
    c = cfg(variants={"early-return-collective"})
    with GlooHiCache(c, 2, collective_timeout=2) as g:
        g.insert([1])
        g.write_dma_done(0)
        with pytest.raises(CollectiveTimeoutError, match=r"writing_check.*rank\(s\) \[1\] did not arrive"):
            g.writing_check()
    c = cfg(device_pages=6, host_pages=2, policy="write_back", duplicate_reclaim=True)
    with GlooHiCache(c, 2, collective_timeout=5) as g:
        for t in (1, 2):
            g.insert([t])
            g.evict_node([t])
            g.insert([t])
        g.registry_skew(1)
        g.insert([3])
        g.evict_node([3])
        with pytest.raises(ReplicaDivergenceError, match="victims diverged"):
            g.writing_check()
