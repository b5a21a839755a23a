"""The owner-lane planner bound into the reference HiCache's load_back (cp_planner=True):
which victims it plans (contribution first, then the replicated order), what it may not
touch (the load's own path, locked or unfreeable nodes), all-or-nothing when it cannot
make room, and the per-rank local access clock."""

from __future__ import annotations

from tiercheck.impl.hicache import HiCacheConfig, LockstepHiCache
from tiercheck.impl.kvdata import KVLayout

LAYOUT = KVLayout(layers=1, heads=1, head_dim=4, page_size=1)


def cp_group(world_size=1, **kw):
    base = dict(layout=LAYOUT, device_pages=2, host_pages=8, victim_order="path", manual=True,
                cp_planner=True, device="cpu")
    base.update(kw)
    return LockstepHiCache(HiCacheConfig(**base), world_size, timeout=5.0)


def finish_writes(g):
    for r in range(g.world_size):
        while g.write_dma_done(r) is not None:
            pass
    g.writing_check()


def snap(g, rank=0):
    return g.snapshot(store=False)[rank]


def devices(g, rank=0):
    return {p: n["dev"] for p, n in snap(g, rank)["nodes"].items()}


def test_victims_by_contribution_before_order():
    """(1,) comes first in the replicated order, but (2, 3, 4) alone covers the 2 pages."""
    with cp_group(device_pages=4) as g:
        g.insert([5, 6])
        finish_writes(g)
        g.evict_node([5, 6])
        g.insert([1])
        g.insert([2, 3, 4])
        finish_writes(g)
        assert g.load_back([5, 6]) == [2]
        assert snap(g)["cp_last_plan"] == [(2, 3, 4)]
        assert devices(g)[(1,)] == "resident" and devices(g)[(2, 3, 4)] == "absent"
        assert g.verify() == []


def test_the_loads_own_path_is_never_a_victim():
    """(1,) is a device leaf and first in order, but it is the parent of the node loaded."""
    with cp_group() as g:
        g.insert([1, 2])
        g.insert([1])  # splits: (1,) over (1, 2)
        finish_writes(g)
        g.evict_node([1, 2])
        g.insert([3])
        finish_writes(g)
        assert g.load_back([1, 2]) == [1]
        assert snap(g)["cp_last_plan"] == [(3,)]
        assert devices(g)[(1,)] == "resident"
        assert g.verify() == []


def test_an_unbacked_write_through_leaf_is_deleted():
    with cp_group() as g:
        g.insert([2], fail_ranks=[0])  # its backup is rejected: no host copy
        g.insert([1])
        finish_writes(g)
        g.evict_node([1])
        g.insert([3])
        finish_writes(g)
        assert snap(g)["nodes"][(2,)]["host"] == "absent"
        assert g.load_back([1]) == [1]
        assert snap(g)["cp_last_plan"] == [(2,)]
        assert (2,) not in snap(g)["nodes"]  # deleted, not demoted
        assert g.verify() == []


def test_no_room_no_eviction():
    """write_back: the resident nodes have no host copy, so no victim can free its device
    copy without a write; the plan falls short and nothing is evicted."""
    with cp_group(policy="write_back") as g:
        g.insert([5])
        g.evict_node([5])  # written to host, demoted
        g.insert([1])
        g.insert([2])
        before = devices(g)
        assert g.load_back([5]) == [0]
        assert devices(g) == before and snap(g)["dev_free"] == 0
        assert snap(g)["cp_last_plan"] == []
        assert g.verify() == []


def test_lru_order_is_the_replicated_clock_not_the_local_one():
    """victim_order lru: a request hit on (2,) (replicated) protects it; a local access of
    (3,) on the one rank does not."""
    with cp_group(victim_order="lru") as g:
        g.insert([1])
        finish_writes(g)
        g.evict_node([1])
        g.insert([2])
        g.insert([3])
        finish_writes(g)
        g.match_prefix([2])
        g.local_access(0, [3])
        g.load_back([1])
        assert snap(g)["cp_last_plan"] == [(3,)]


def test_local_access_clock():
    """Most recent last; an access to the most recent node or to no node changes
    nothing; entries of removed nodes stay until the next access drops them."""
    with cp_group(world_size=2, device_pages=4) as g:
        g.insert([1])
        g.insert([2], fail_ranks=[0, 1])  # unbacked: deleted when evicted
        finish_writes(g)
        assert g.local_access(0, [2]) == 1
        assert g.local_access(0, [1]) == 1
        assert g.local_access(0, [1]) == 0
        assert g.local_access(0, [9]) == 0
        assert snap(g, 0)["clock"] == [(2,), (1,)] and snap(g, 1)["clock"] == []
        g.evict_node([2])
        assert (2,) not in snap(g, 0)["nodes"] and snap(g, 0)["clock"] == [(2,), (1,)]
        g.insert([3])
        assert g.local_access(0, [3]) == 1
        assert snap(g, 0)["clock"] == [(1,), (3,)]
