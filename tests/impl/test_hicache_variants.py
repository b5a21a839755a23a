"""Every bug variant of domain.md section 5, switched on by name in the implementation:
the same scenario runs with the variant (the implementation visibly misbehaves: wrong
bytes, leaked slots, diverged ranks, rejections that never recover, a collective error)
and without it (it does not)."""

from __future__ import annotations

import pytest

from hicache_helpers import backup_all, group, load_all, metric, node, nodes, ranks_agree, write_all
from tiercheck.errors import UserError
from tiercheck.impl.collective import RankMissingError
from tiercheck.impl.hicache import (
    FileStorage,
    HiCacheConfig,
    ReplicaDivergenceError,
)
from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.hicache.digest import node_key
from tiercheck.impl.hicache.pages import PageRegistry
from tiercheck.impl.storage import codes

BUG = [pytest.param(False, id="correct"), pytest.param(True, id="variant")]


def variants(name, bug):
    return [name] if bug else []


def test_unknown_variant_is_a_user_error():
    with pytest.raises(UserError, match="unknown variant 'no-such-bug'"):
        HiCacheConfig(variants={"no-such-bug"})


@pytest.mark.parametrize("bug", BUG)
def test_host_starvation(bug, file_storage):
    """Write-through + storage, host pool smaller than the device pool: without mirror
    release the pinned mirrors reject every later backup, round after round."""
    with group(1, file_storage, device_pages=6, host_pages=2, storage=True, mirror_release=True,
               variants=variants("host-starvation", bug)) as g:
        g.insert([1, 2])
        write_all(g)
        backup_all(g)
        g.drain_storage_control_queues()
        for _ in range(3):  # the hot node is hit again every round
            g.insert([3])
            write_all(g)
            backup_all(g)
            g.drain_storage_control_queues()
        rejected = metric(g, mt.rejected("host_alloc_failed", "write_through"))
        assert (rejected, node(g, [3])["host"]) == ((3, "absent") if bug else (0, "resident"))
        assert g.verify() == []


@pytest.mark.parametrize("bug", BUG)
def test_durable_on_ack(bug, file_storage):
    """A backup that stored 1 of 2 pages: marking both durable releases a mirror whose
    second page storage does not hold."""
    with group(1, file_storage, device_pages=4, host_pages=2, storage=True, mirror_release=True,
               variants=variants("durable-on-ack", bug)) as g:
        g.insert([1, 2])
        write_all(g)
        backup_all(g, pages=1)
        g.drain_storage_control_queues()  # commits the plan prepared at the last drain
        problems = g.verify()
        if bug:
            assert node(g, [1, 2])["released"]
            assert any("durable pages [(1, 2)] are not in the store" in p for p in problems)
        else:
            assert node(g, [1, 2])["host"] == "resident" and problems == []


@pytest.mark.parametrize("bug", BUG)
def test_release_busy(bug, tmp_path):
    """The mirror of a prefetch anchor (host-referenced) is released; the anchor is then
    evicted and deleted, and the prefetched pages have nowhere to go."""
    storage = FileStorage(str(tmp_path / "l3"))
    kw = dict(device_pages=6, host_pages=2, storage=True, prefetch=True, mirror_release=True,
              host_free_target=1)
    with group(1, storage, **kw) as seed:  # another engine sharing the store wrote [1, 2]
        seed.insert([1, 2])
        write_all(seed)
        backup_all(seed)
    with group(1, storage, variants=variants("release-busy", bug), **kw) as g:
        g.insert([1])
        write_all(g)
        backup_all(g)
        assert g.prefetch_from_storage([1, 2]) == [0]  # anchor (1,), host now full
        g.drain_storage_control_queues()  # prepares a plan under pressure
        g.drain_storage_control_queues()  # commits it
        assert node(g, [1])["released"] == bug
        g.evict_node([1])
        g.prefetch_io(0, 0)
        g.check_prefetch_progress(0)
        if bug:
            assert (1,) not in nodes(g) and (1, 2) not in nodes(g)
            assert metric(g, mt.PREFETCH_ORPHANED) == 1 and metric(g, mt.PREFETCHED) == 0
        else:
            assert node(g, [1, 2])["host"] == "resident" and metric(g, mt.PREFETCHED) == 1
            assert g.load_back([1, 2]) == [2]
            load_all(g)
        assert g.verify() == []


@pytest.mark.parametrize("bug", BUG)
def test_release_no_consensus(bug, file_storage):
    """Rank 1 stored only part of a backup, so the ranks' plans differ: executing a plan
    before all ranks agree makes the replicas diverge; the fixed protocol counts the
    mismatch and fail-closes instead."""
    with group(2, file_storage, device_pages=4, host_pages=2, storage=True, mirror_release=True,
               variants=variants("release-no-consensus", bug)) as g:
        g.insert([1, 2])
        write_all(g)
        g.storage_backup_done(0)
        g.storage_backup_done(1, 1)
        for _ in range(3):
            g.drain_storage_control_queues()
        snaps = g.snapshot(store=False)
        assert ranks_agree(g) != bug
        if bug:
            assert node(g, [1, 2], 0)["host"] == "absent" and node(g, [1, 2], 1)["host"] == "resident"
        else:
            assert [s["closed"] for s in snaps] == [True, True]
            assert metric(g, mt.PLAN_MISMATCH) == 2
        assert g.verify() == []


@pytest.mark.parametrize("bug", BUG)
def test_split_during_backup(bug, file_storage):
    """Write-back + storage: a split while the H->L3 backup is in flight leaves the upper
    half without a host reference; duplicate reclaim frees its slot, another copy reuses
    it, and the backup writes those bytes to storage."""
    with group(1, file_storage, device_pages=6, host_pages=2, policy="write_back", storage=True,
               duplicate_reclaim=True, variants=variants("split-during-backup", bug)) as g:
        g.insert([1, 2])
        g.evict_node([1, 2])  # staged, backup queued (manual), demoted
        g.insert([1])  # splits (1, 2) during the backup; (1,) un-evicted: a duplicate
        assert node(g, [1])["host_ref"] == (0 if bug else 1)
        g.insert([3])
        freed = g.evict_node([3])  # needs a host page: reclaim the upper half's copy?
        assert freed == ([1] if bug else [0])
        backup_all(g)
        problems = g.verify()
        assert any("store: page (1,) holds wrong bytes" in p for p in problems) == bug
        if not bug:
            assert problems == []


@pytest.mark.parametrize("bug", BUG)
def test_reclaim_demote_leaf(bug):
    """One reclaim pass: the host copy of an evictable device leaf goes first, although a
    non-leaf duplicate was available; evicting that leaf then needs a new host copy, and
    when host allocation fails it cannot be evicted at all."""
    with group(1, device_pages=6, host_pages=2, policy="write_back", duplicate_reclaim=True,
               variants=variants("reclaim-demote-leaf", bug)) as g:
        g.insert([5])
        g.evict_node([5])
        g.insert([5])  # un-evicted: a duplicate and a device leaf, registered first
        g.insert([1])
        g.evict_node([1])
        g.insert([1, 2])  # (1,) un-evicted: a duplicate with a resident child
        assert g.evict_node([1, 2]) == [1]  # host full: reclaim one duplicate
        assert g.snapshot(store=False)[0]["reclaimed"] == ([(5,)] if bug else [(1,)])
        freed = g.evict_node([5], fail_ranks=[0])  # a host allocation would fail now
        assert freed == ([0] if bug else [1])
        assert g.verify() == []


@pytest.mark.parametrize("bug", BUG)
def test_reclaim_during_loadback(bug):
    """Reclaiming a node whose host slots an H->D load-back still reads: the slot is
    reused by the next staging, and the load delivers those bytes to the device."""
    with group(1, device_pages=4, host_pages=1, policy="write_back", duplicate_reclaim=True,
               variants=variants("reclaim-during-loadback", bug)) as g:
        g.insert([1])
        g.evict_node([1])
        assert g.load_back([1]) == [1]  # H->D pending; (1,) is a registered duplicate
        g.insert([2])
        assert g.evict_node([2]) == ([1] if bug else [0])
        load_all(g)
        problems = g.verify()
        assert any("node (1,): wrong bytes in the device pool" in p for p in problems) == bug
        if not bug:
            assert problems == []


@pytest.mark.parametrize("bug", BUG)
def test_split_drops_pending_mark(bug):
    """Splitting a node under load-back without passing load_back_pending to the upper
    half: the upper half is reclaimed under the H->D copy."""
    with group(1, device_pages=6, host_pages=2, policy="write_back", duplicate_reclaim=True,
               variants=variants("split-drops-pending-mark", bug)) as g:
        g.insert([1, 2])
        g.evict_node([1, 2])
        g.load_back([1, 2])
        g.insert([1])  # splits the loading node
        assert node(g, [1])["load_back_pending"] != bug
        g.insert([3])
        g.evict_node([3])
        load_all(g)
        problems = g.verify()
        assert any("node (1,): wrong bytes in the device pool" in p for p in problems) == bug
        if not bug:
            assert problems == []


def _skewed_reclaim(g):
    """Two duplicates on both ranks, rank 1's registry order drifted, then host pressure:
    the ranks reclaim different victims."""
    for t in (1, 2):
        g.insert([t])
        g.evict_node([t])
        g.insert([t])
    g.registry_skew(1)
    g.insert([3])
    g.evict_node([3])


@pytest.mark.parametrize("bug", BUG)
def test_digest_unchecked(bug):
    with group(2, device_pages=6, host_pages=2, policy="write_back", duplicate_reclaim=True,
               variants=variants("digest-unchecked", bug)) as g:
        _skewed_reclaim(g)
        assert not ranks_agree(g)
        if bug:
            g.writing_check()  # the next ready-count round: nobody notices
            g.loading_check()
            assert not ranks_agree(g)
        else:
            with pytest.raises(ReplicaDivergenceError, match="victims diverged"):
                g.writing_check()


def _overflowing_token(bits: int) -> int:
    """A token whose one-page node's digest is the most negative ``bits``-bit value."""
    reg = PageRegistry(1)
    for t in range(100, 100000):
        if (node_key(reg.hashes([t])[0]) + 1) % (1 << bits) == 1 << (bits - 1):
            return t
    raise AssertionError("no token found")


@pytest.mark.parametrize("bug", BUG)
def test_negated_pair_overflow(bug):
    """Digests over the full signed width: a rank whose digest is the most negative value
    makes MIN of [d, -d] pass against any other digest."""
    t = _overflowing_token(8)
    with group(2, device_pages=6, host_pages=2, policy="write_back", duplicate_reclaim=True,
               digest_bits=8, variants=variants("negated-pair-overflow", bug)) as g:
        for tok in (t, 7):
            g.insert([tok])
            g.evict_node([tok])
            g.insert([tok])
        g.registry_skew(1)  # rank 0 reclaims (t,), rank 1 reclaims (7,)
        g.insert([3])
        g.evict_node([3])
        if bug:
            g.writing_check()
            assert not ranks_agree(g)
        else:
            with pytest.raises(ReplicaDivergenceError):
                g.writing_check()


@pytest.mark.parametrize("bug", BUG)
def test_early_return_collective(bug):
    """writing_check returning early on a rank whose copy has not finished: the peer in
    the all-reduce gets a clear error naming the sync point instead of hanging."""
    with group(2, variants=variants("early-return-collective", bug)) as g:
        g.insert([1])
        g.write_dma_done(0)
        if bug:
            with pytest.raises(RankMissingError, match="writing_check"):
                g.writing_check()
        else:
            assert g.writing_check() == [0, 0]
            g.write_dma_done(1)
            assert g.writing_check() == [1, 1]
            assert node(g, [1])["host"] == "resident" and g.verify() == []


@pytest.mark.parametrize("bug", BUG)
def test_partial_backup_leak(bug):
    """Host allocation fails on rank 1 only: without agreement rank 0 stages alone, the
    replicas diverge, and its copy is never committed (MIN with rank 1's empty queue), so
    its lock and host slot leak; agreed, both reject and the next hit stages on both."""
    with group(2, host_pages=2, variants=variants("partial-backup-leak", bug)) as g:
        g.insert([1], fail_ranks=[1])
        if bug:
            assert not ranks_agree(g)
            assert node(g, [1], 0)["lock_ref"] == 1 and node(g, [1], 1)["lock_ref"] == 0
            g.write_dma_done(0)
            for _ in range(3):  # MIN with rank 1's empty queue: never committed
                assert g.writing_check() == [0, 0]
            assert node(g, [1], 0)["host"] == "writing"  # lock and host slot leaked
        else:
            assert ranks_agree(g) and node(g, [1])["host"] == "absent"
            assert metric(g, mt.rejected("host_alloc_failed", "write_through"), 1) == 1
            g.insert([1])  # the next hit
            write_all(g)
            assert ranks_agree(g) and node(g, [1])["host"] == "resident"
            assert g.verify() == []


@pytest.mark.parametrize("bug", BUG)
def test_prefetch_double_free(bug, tmp_path):
    """The unused tail of a prefetch freed at once and again by the release queue: the
    slot is reused by a backup first, then freed under it."""
    storage = FileStorage(str(tmp_path / "l3"))
    kw = dict(device_pages=6, host_pages=3, storage=True, prefetch=True)
    with group(1, storage, **kw) as seed:  # the store holds (1,) only
        seed.insert([1])
        write_all(seed)
        backup_all(seed)
    with group(1, storage, variants=variants("prefetch-double-free", bug), **kw) as g:
        assert g.prefetch_from_storage([1, 2]) == [0]
        g.prefetch_io(0, 0)
        g.check_prefetch_progress(0)  # (1,) inserted host-only, the tail slot queued
        g.insert([5])  # staging takes a host slot (the tail's, if it was freed)
        g.drain_storage_control_queues()  # frees the release queue
        problems = g.verify()
        assert any("owned but free" in p for p in problems) == bug
        if not bug:
            assert problems == [] and g.snapshot(store=False)[0]["host_free"] == 1


@pytest.mark.parametrize("bug", BUG)
def test_failed_batch_acked(bug, faulty_storage):
    """A storage batch fails after its first page but the ack reports the whole node:
    the backed-up metric over-counts and the mirror is released though storage lacks
    the second page."""
    with group(1, faulty_storage, device_pages=4, host_pages=2, storage=True, mirror_release=True,
               variants=variants("failed-batch-acked", bug)) as g:
        g.storage_fault(0, "fail_from", 1, codes.TRANSFER_FAIL)
        g.insert([1, 2])
        write_all(g)
        backup_all(g)
        g.drain_storage_control_queues()
        assert metric(g, mt.BACKUPED) == (2 if bug else 1)
        assert metric(g, mt.STORAGE_FAILED_PAGES) == 1
        problems = g.verify()
        assert node(g, [1, 2])["released"] == bug
        assert any("durable pages [(1, 2)] are not in the store" in p for p in problems) == bug
        if not bug:
            assert problems == []


@pytest.mark.parametrize("bug", BUG)
def test_orphan_host_subtree(bug):
    """Evicting a non-backed leaf whose child was demoted: the fixed protocol prunes the
    host-only child, the variant detaches it and leaks its host slot for good."""
    with group(1, device_pages=6, host_pages=1, variants=variants("orphan-host-subtree", bug)) as g:
        g.insert([1, 2])  # 2 pages > host pool: staging rejected
        g.insert([1, 2, 3])  # (1,2) rejected again, the new leaf staged
        write_all(g)
        assert node(g, [1, 2])["host"] == "absent" and node(g, [1, 2, 3])["host"] == "resident"
        g.evict_node([1, 2, 3])  # demoted: host-only
        assert g.evict_node([1, 2]) == [2]  # deleted (regular eviction)
        assert nodes(g) == {}
        problems = g.verify()
        assert any("owned by nobody (leak)" in p for p in problems) == bug
        if not bug:
            assert problems == []


@pytest.mark.parametrize("bug", BUG)
def test_planner_local_tiebreak(bug):
    """CP load-back on two ranks: (2,) and (3,) tie for the one page (1,) needs. Rank 0
    alone touched (2,) (its local clock); ordering ties by that clock makes rank 0 evict
    (3,) and rank 1 evict (2,), the replicated order makes both evict (2,)."""
    with group(2, device_pages=2, host_pages=3, cp_planner=True,
               variants=variants("planner-local-tiebreak", bug)) as g:
        g.insert([1])
        write_all(g)
        g.evict_node([1])
        g.insert([2])
        g.insert([3])
        write_all(g)
        assert g.local_access(0, [2]) == 1
        assert g.load_back([1]) == [1, 1]
        load_all(g)
        plans = [s["cp_last_plan"] for s in g.snapshot(store=False)]
        assert plans == ([[(3,)], [(2,)]] if bug else [[(2,)], [(2,)]])
        assert ranks_agree(g) != bug
        assert g.verify() == []


@pytest.mark.parametrize("bug", BUG)
def test_page_ceil_match(bug):
    """Pages of two tokens; request (1,2,3,5,6,7) diverges from (1,2,3,4) inside its
    second page. The fixed match stops at the page boundary; the variant takes page 3,4
    for 3,5 and hangs page 6,7 below it (KV computed for other tokens)."""
    from dataclasses import replace

    from hicache_helpers import LAYOUT

    with group(1, layout=replace(LAYOUT, page_size=2), device_pages=6, host_pages=1,
               variants=variants("page-ceil-match", bug)) as g:
        g.insert([1, 2, 3, 4])
        g.insert([1, 2, 3, 5, 6, 7, 8])  # token 8: a partial last page, never cached
        snap = nodes(g)
        assert (1, 2, 3, 5, 6, 7, 8) not in snap
        detached = [p for p, n in snap.items() if n["parent"] is not None and p[: len(n["parent"])] != n["parent"]]
        assert detached == ([(1, 2, 3, 5, 6, 7)] if bug else [])
        assert snap[(1, 2, 3, 5, 6, 7)]["start"] == ((1, 2, 3, 5, 6, 7) if bug else (1, 2, 3, 5))


@pytest.mark.parametrize("bug", BUG)
def test_lru_local_clock(bug):
    """LRU host eviction on two ranks; rank 0 alone touches host leaf 1 (a probe). Keyed on
    the replicated logical clock both ranks evict leaf 1 (least recently used by the
    replicated steps); keyed on each rank's wall clock rank 0 evicts leaf 2 instead."""
    with group(2, device_pages=2, host_pages=2, victim_order="lru",
               variants=variants("lru-local-clock", bug)) as g:
        g.insert([1])
        g.insert([2])
        write_all(g)
        g.evict_node([1])
        g.evict_node([2])
        assert g.local_access(0, [1]) == 1
        g.insert([3])  # its backup needs a host page: evict_host takes the LRU host leaf
        left = [sorted(p for p in nodes(g, r) if p != (3,)) for r in range(2)]
        assert left == ([[(1,)], [(2,)]] if bug else [[(2,)], [(2,)]])
        assert ranks_agree(g) != bug


@pytest.mark.parametrize("bug", BUG)
def test_split_slice_off_by_one(bug):
    """A split slices the lower half's device slots one page early: the upper half's last
    slot gets a second owner and the lower half's own last slot none. The free counts
    balance; slot ownership (verify) does not, and evicting both halves frees one slot twice."""
    from tiercheck.impl.pools import DoubleFreeError

    with group(1, device_pages=4, host_pages=1, slot_order="lowest",
               variants=variants("split-slice-off-by-one", bug)) as g:
        g.insert([1, 2, 3])  # slots 0, 1, 2
        g.insert([1, 4])  # splits after page 1
        assert node(g, [1])["dev_slots"] == [0]
        assert node(g, [1, 2, 3])["dev_slots"] == ([0, 1] if bug else [1, 2])
        problems = g.verify()
        assert any("more than one owner" in p for p in problems) == bug
        assert any("owned by nobody" in p for p in problems) == bug
        assert g.evict_node([1, 2, 3]) == [2]
        write_all(g)
        g.evict_node([1, 4])
        if bug:
            with pytest.raises(DoubleFreeError):
                g.evict_node([1])  # the shared slot 0 again
        else:
            assert problems == []


@pytest.mark.parametrize("bug", BUG)
def test_split_write_lock_leak(bug):
    """Seed 004: inserting (1, 3) splits (1, 2) while its D->H write is in flight; the
    split copies the write lock to the upper half (1,), and with the bug the ack unlocks
    only (1, 2), the node the write was registered with: (1,) stays locked for good."""
    with group(1, device_pages=3, host_pages=3, variants=variants("split-write-lock-leak", bug)) as g:
        g.insert([1, 2])
        g.insert([1, 3])  # splits the writing node
        write_all(g)
        assert node(g, [1])["lock_ref"] == (1 if bug else 0)
        assert node(g, [1, 2])["lock_ref"] == 0
        assert g.verify() == []
