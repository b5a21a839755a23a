"""Device->host sync counts: O(distinct nodes) for the memo/fast planners,
O(victims x candidates x cp_size) for the naive one."""

import pytest
import torch

from tiercheck.impl.cp import (
    CpNode, FastPlanner, MemoPlanner, NaivePlanner, OwnerLanes, SyncCounter, default_device,
)
from tiercheck.impl.cp.histogram import counts_bincount, counts_per_owner_syncs


def flat_tree(leaves: int, cp: int, page_size: int = 2):
    """root -> ``leaves`` leaves, each with exactly one page on every owner lane."""
    lanes = OwnerLanes(leaves * cp + 1, cp, page_size)
    dev = default_device()
    root = CpNode(0, torch.empty(0, dtype=torch.int64, device=dev), lock_ref=1)
    for i in range(leaves):
        pages = lanes.alloc_contiguous_run(cp)
        # access order reversed against ids, so the tie-break is visible in the plan
        root.add_child(CpNode(i + 1, lanes.token_locs(pages, dev), access_seq=leaves - i))
    return root


@pytest.mark.parametrize("cp", [1, 2, 4, 8])
@pytest.mark.parametrize("leaves,victims", [(10, 1), (30, 7), (60, 20)])
def test_sync_counts_follow_the_formulas(cp, leaves, victims):
    root = flat_tree(leaves, cp)
    deficits = [victims] * cp  # every leaf frees one page per lane: exactly `victims` victims
    plans = {}
    for cls in (NaivePlanner, MemoPlanner, FastPlanner):
        syncs = SyncCounter()
        plans[cls.name] = (cls(cp, 2).plan(root, deficits, syncs=syncs), syncs.count)
    (naive, naive_syncs), (memo, memo_syncs), (fast, fast_syncs) = plans.values()
    assert naive == memo == fast
    # all gains tie, so victims go least-recently-used first: ids leaves, leaves-1, ...
    assert fast.victims == tuple(range(leaves, leaves - victims, -1))
    assert fast.satisfied
    # naive: iteration i rescans (leaves - i) candidates, cp syncs each
    assert naive_syncs == cp * sum(leaves - i for i in range(victims))
    assert naive.stats.syncs == naive_syncs
    # memo and fast: one sync per distinct node read
    assert memo_syncs == fast_syncs == leaves


def test_fast_syncs_stay_flat_as_victims_grow():
    root = flat_tree(80, 4)
    counts = []
    for victims in (1, 10, 40, 80):
        for cls in (NaivePlanner, FastPlanner):
            syncs = SyncCounter()
            cls(4, 2).plan(root, [victims] * 4, syncs=syncs)
            counts.append((cls.name, victims, syncs.count))
    fast = [c for name, _, c in counts if name == "fast"]
    naive = [c for name, _, c in counts if name == "naive"]
    assert fast == [80] * 4
    assert naive == [4 * sum(80 - i for i in range(v)) for v in (1, 10, 40, 80)]


def test_syncs_bounded_by_distinct_nodes_on_a_deep_tree():
    # A chain of prefixes, each with two leaves; ancestors get read through unlock credit.
    cp, dev = 3, default_device()
    lanes = OwnerLanes(400, cp, 1)
    root = CpNode(0, torch.empty(0, dtype=torch.int64, device=dev), lock_ref=1)
    parent, next_id, nodes = root, 1, 0
    for depth in range(12):
        prefix = parent.add_child(CpNode(next_id, lanes.token_locs(lanes.alloc(0, 2), dev),
                                         access_seq=next_id))
        next_id += 1
        for _ in range(2):
            prefix.add_child(CpNode(next_id, lanes.token_locs(lanes.alloc(1, 1), dev),
                                    access_seq=next_id))
            next_id += 1
        parent = prefix
    distinct = next_id - 1
    results = {}
    for cls in (NaivePlanner, MemoPlanner, FastPlanner):
        syncs = SyncCounter()
        results[cls.name] = (cls(cp, 1).plan(root, [10, 0, 0], syncs=syncs), syncs.count)
    plans = [p for p, _ in results.values()]
    assert plans[0] == plans[1] == plans[2]
    assert plans[0].satisfied and len(plans[0].victims) > 5  # had to dig through leaves
    assert results["fast"][1] <= distinct and results["memo"][1] <= distinct
    assert results["naive"][1] == cp * results["naive"][0].stats.histogram_reads
    assert results["naive"][1] > 10 * results["fast"][1]


def test_histogram_readers_agree_and_count_their_syncs():
    dev = default_device()
    for cp in range(1, 9):
        for page_size in (1, 3):
            pages = [0, 1, cp, cp + 1, 2 * cp, 5, 0]
            locs = torch.tensor([p * page_size + o for p in pages for o in range(page_size)],
                                dtype=torch.int64, device=dev)
            expected = [0] * cp
            for p in pages:
                expected[(p - 1) % cp] += 1
            a, b = SyncCounter(), SyncCounter()
            assert counts_per_owner_syncs(locs, page_size, cp, a) == tuple(expected)
            assert counts_bincount(locs, page_size, cp, b) == tuple(expected)
            assert (a.count, b.count) == (cp, 1)
    empty, none = SyncCounter(), SyncCounter()
    assert counts_bincount(torch.empty(0, dtype=torch.int64, device=dev), 1, 4, empty) == (0,) * 4
    assert counts_per_owner_syncs(None, 1, 4, none) == (0,) * 4
    assert empty.count == none.count == 0
