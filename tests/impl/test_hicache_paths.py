"""The protocol paths with real tensors: write-through staging, eviction and load-back,
write_back, host eviction and duplicate reclaim; bytes verified after every copy."""

import pytest

from hicache_helpers import group, load_all, metric, node, nodes, ranks_agree, write_all
from tiercheck.errors import UserError
from tiercheck.impl.hicache import DeviceFullError, HiCacheConfig
from tiercheck.impl.hicache import metrics as mt


def test_write_through_stages_on_first_hit_and_host_bytes_match():
    with group(2) as g:
        g.insert([1, 2])
        assert node(g, [1, 2]) | {} == node(g, [1, 2], 1)
        n = node(g, [1, 2])
        assert (n["host"], n["lock_ref"], n["hit_count"]) == ("writing", 1, 1)
        g.write_dma_done(0)
        assert g.writing_check() == [0, 0]  # MIN: rank 1's copy has not finished
        g.write_dma_done(1)
        assert g.writing_check() == [1, 1]
        n = node(g, [1, 2])
        assert (n["host"], n["lock_ref"]) == ("resident", 0)
        assert g.verify() == [] and ranks_agree(g)


def test_write_through_selective_waits_for_the_second_hit():
    with group(1, policy="write_through_selective") as g:
        g.insert([1])
        assert node(g, [1])["host"] == "absent"
        g.insert([1])
        assert node(g, [1])["host"] == "writing" and node(g, [1])["hit_count"] == 2


def test_split_while_the_copy_is_in_flight_commits_both_halves():
    with group(1) as g:
        g.insert([1, 2, 3])
        g.insert([1, 4])  # splits (1,2,3) at (1,) while its D->H copy runs
        assert nodes(g)[(1,)]["host"] == "writing" and nodes(g)[(1,)]["lock_ref"] == 1
        write_all(g)
        assert node(g, [1])["host"] == "resident" and node(g, [1, 2, 3])["host"] == "resident"
        assert node(g, [1, 4])["host"] == "resident"
        assert all(n["lock_ref"] == 0 for n in nodes(g).values())
        assert g.verify() == []


def test_evict_demotes_backed_nodes_and_load_back_restores_the_bytes():
    with group(1, device_pages=3) as g:
        g.insert([1, 2])
        write_all(g)
        assert g.evict_node([1, 2]) == [2]
        assert node(g, [1, 2])["dev"] == "absent" and node(g, [1, 2])["host"] == "resident"
        g.insert([7, 8, 9])  # takes every device page (and their old bytes)
        write_all(g)
        assert g.evict_node([7, 8, 9]) == [3]
        assert g.load_back([1, 2]) == [2]
        n = node(g, [1, 2])
        assert (n["dev"], n["load_back_pending"], n["lock_ref"]) == ("loading", True, 1)
        g.load_dma_done(0)
        g.loading_check()
        n = node(g, [1, 2])
        assert (n["dev"], n["load_back_pending"], n["lock_ref"]) == ("resident", False, 0)
        assert g.verify() == []
        assert metric(g, mt.LOAD_BACK) == 2


def test_load_back_loads_the_whole_evicted_chain_and_locks_the_path():
    with group(1, device_pages=6) as g:
        g.insert([1, 2])
        g.insert([1, 2, 3])
        write_all(g)
        g.evict_node([1, 2, 3])
        g.evict_node([1, 2])
        g.insert([5])
        assert g.load_back([1, 2, 3]) == [3]  # (1,2) and (1,2,3), one copy
        s = g.snapshot(store=False)[0]
        assert s["lq"] == [((1,), (1, 2, 3))]
        assert [node(g, p)["lock_ref"] for p in ([1, 2], [1, 2, 3])] == [1, 1]
        assert g.evict_node([1, 2, 3]) == [0]  # loading and locked: not a device leaf
        load_all(g)
        assert g.verify() == []


def test_locked_nodes_are_never_evicted_and_eviction_prunes_host_only_children():
    with group(1, device_pages=4, host_pages=4) as g:
        g.insert([1])
        assert g.evict_node([1]) == [0]  # write lock (D->H in flight)
        write_all(g)
        g.insert([1, 2])
        write_all(g)
        g.evict_node([1, 2])
        g.evict_node([1])
        assert node(g, [1])["dev"] == "absent"
        assert g.snapshot(store=False)[0]["host_free"] == 2


def test_lru_eviction_order_and_path_order():
    for order, first in (("lru", (5,)), ("path", (1,))):
        with group(1, device_pages=3, victim_order=order) as g:
            g.insert([5])
            g.insert([1])
            g.insert([9])
            write_all(g)
            g.match_prefix([9])
            assert g.evict(1) == [1]
            assert node(g, first)["dev"] == "absent"


def test_insert_evicts_by_itself_and_refuses_when_nothing_can_go():
    with group(1, device_pages=2) as g:
        g.insert([1])
        g.insert([2])  # locked by their D->H copies
        with pytest.raises(DeviceFullError, match="needs 1 device pages"):
            g.insert([3])
        write_all(g)
        g.insert([3])  # evicts (1,) (path order) to make room
        assert node(g, [1])["dev"] == "absent" and node(g, [3])["dev"] == "resident"


def test_evict_host_takes_host_leaves_in_order_and_spares_referenced_ones():
    with group(1, device_pages=4, host_pages=2) as g:
        for t in (1, 2):
            g.insert([t])
            write_all(g)
            g.evict_node([t])
        g.insert([3])  # host full: evict_host removes (1,) (path order), then stages
        assert (1,) not in nodes(g) and node(g, [2])["host"] == "resident"
        assert metric(g, mt.HOST_EVICTED) == 1
        write_all(g)
        assert g.verify() == []


def test_write_back_stages_on_eviction_and_reclaims_duplicates_first():
    with group(1, device_pages=6, host_pages=2, policy="write_back", duplicate_reclaim=True) as g:
        g.insert([1])
        g.insert([1, 2])
        assert node(g, [1])["host"] == "absent"  # write_back: nothing staged on insert
        assert g.evict_node([1, 2]) == [1]  # blocking D->H, then demote
        assert node(g, [1, 2])["host"] == "resident" and metric(g, mt.HOST_WRITE) == 1
        g.evict_node([1])
        g.insert([1])  # un-evicted: a duplicate (device + host)
        g.insert([1, 2])
        # Registered at their write-back acks, kept (lazily) through the demotions.
        assert g.snapshot(store=False)[0]["dups"] == [(1, 2), (1,)]
        g.insert([3])
        # Host full: pass 1 spares the evictable leaf (1,2) and reclaims the non-leaf (1,).
        assert g.evict_node([3]) == [1]
        s = g.snapshot(store=False)[0]
        assert s["reclaimed"] == [(1,)] and node(g, [1])["host"] == "absent"
        assert g.verify() == []


def test_duplicate_reclaim_spares_nodes_under_load_back():
    with group(1, device_pages=4, host_pages=1, policy="write_back", duplicate_reclaim=True) as g:
        g.insert([1])
        g.evict_node([1])
        g.load_back([1])
        g.insert([2])
        assert g.evict_node([2]) == [0]
        assert metric(g, mt.rejected("host_alloc_failed", "write_back")) == 1
        load_all(g)
        assert g.evict_node([2]) == [1]  # the load is done: (1,) is reclaimable now
        assert g.verify() == []


def test_host_allocation_failure_is_agreed_across_ranks():
    with group(2, host_pages=2) as g:
        g.insert([1], fail_ranks=[0])
        assert ranks_agree(g) and node(g, [1])["host"] == "absent"
        for r in (0, 1):
            assert metric(g, mt.rejected("host_alloc_failed", "write_through"), r) == 1


def test_bad_configuration_is_a_user_error():
    with pytest.raises(UserError, match="policy must be one of"):
        HiCacheConfig(policy="write_sometimes")
    with pytest.raises(UserError, match="prefetch needs storage"):
        HiCacheConfig(prefetch=True)
    with pytest.raises(UserError, match="victim_order"):
        HiCacheConfig(victim_order="random")
    with pytest.raises(ValueError, match="unknown step"):
        group(1).apply("teleport")
