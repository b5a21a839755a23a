"""The CP page layout: owner lanes, the zero-location edge, watermark and deficits."""

import pytest
import torch

from tiercheck.errors import UserError
from tiercheck.impl.cp import (
    CpNode, FastPlanner, OwnerLanes, default_device, free_room_deficit, owner_of_page, owners_of_pages,
    page_aligned_room, pages_of_token_locs,
)


@pytest.mark.parametrize("cp", range(1, 9))
def test_owner_lane_and_the_zero_location_edge(cp):
    assert owner_of_page(0, cp) == cp - 1  # (-1) mod cp, the reserved padding page
    assert owner_of_page(1, cp) == 0
    assert owner_of_page(cp, cp) == cp - 1
    assert owner_of_page(cp + 1, cp) == 0
    pages = torch.arange(0, 5 * cp + 3, device=default_device())
    owners = owners_of_pages(pages, cp).tolist()
    assert owners == [(p - 1) % cp for p in range(0, 5 * cp + 3)]
    assert min(owners) >= 0 and max(owners) < cp  # bincount-safe
    with pytest.raises(ValueError):
        owner_of_page(-1, cp)


def test_pages_of_token_locs_takes_the_first_loc_of_each_page():
    locs = torch.tensor([8, 9, 10, 11, 0, 1, 2, 3, 20, 21])  # pages 2, 0 and a partial 5
    assert pages_of_token_locs(locs, 4).tolist() == [2, 0, 5]
    assert pages_of_token_locs(locs, 1).tolist() == locs.tolist()


def test_page_aligned_room():
    assert page_aligned_room(31507, 0.25, 1) == 7877  # the incident's watermark
    assert page_aligned_room(10, 0.25, 1) == 3  # ceil(2.5)
    assert page_aligned_room(10, 0.25, 4) == 4  # rounded up to a whole page
    assert page_aligned_room(16, 0.25, 4) == 4  # already aligned
    assert page_aligned_room(0, 0.5, 4) == 0
    assert page_aligned_room(100, 0.0, 4) == 0
    with pytest.raises(UserError):
        page_aligned_room(100, 0.1, 0)


def test_free_room_deficit_trigger_and_target():
    kw = dict(capacity=100, page_size=1, target_ratio=0.2, trigger_ratio=0.1)
    # enough left after the load (>= trigger room): nothing to do, boundary included
    assert free_room_deficit(required=5, available=15, **kw) == 0
    # one page short of the trigger room: ask for the whole target room
    assert free_room_deficit(required=5, available=14, **kw) == 20
    # a shortfall bigger than the target room: the exact shortfall wins
    assert free_room_deficit(required=50, available=10, **kw) == 40
    # no watermark: the exact deficit only
    assert free_room_deficit(required=5, available=3, capacity=100, page_size=1,
                             target_ratio=0, trigger_ratio=0) == 2
    assert free_room_deficit(required=5, available=9, capacity=100, page_size=1,
                             target_ratio=0, trigger_ratio=0) == 0


def test_owner_lanes_capacity_allocation_and_free():
    lanes = OwnerLanes(10, 4, 2)  # pages 1..9 -> owners 0,1,2,3,0,1,2,3,0
    assert lanes.capacity_pages() == (3, 2, 2, 2)
    assert lanes.available_pages() == (3, 2, 2, 2)
    assert lanes.alloc(0, 2) == [1, 5]  # lowest first, page 0 never handed out
    assert lanes.alloc_contiguous_run(3) == [9, 2, 3]
    assert lanes.available_pages() == (0, 1, 1, 2)
    with pytest.raises(MemoryError):
        lanes.alloc(0, 1)
    with pytest.raises(MemoryError):  # all or nothing
        lanes.alloc_with_owners([3, 3, 3])
    assert lanes.available_pages() == (0, 1, 1, 2)
    lanes.free([5, 2])
    assert lanes.available_pages() == (1, 2, 1, 2)
    with pytest.raises(ValueError, match="twice"):
        lanes.free([5])
    with pytest.raises(ValueError):
        lanes.free([0])  # the reserved page
    assert lanes.token_locs([2, 0]).tolist() == [4, 5, 0, 1]


def test_owner_lanes_stats_exact_and_free_room():
    lanes = OwnerLanes(41, 4, 1, target_ratio=0.3, trigger_ratio=0.2)  # 10 pages per lane
    lanes.alloc(0, 9)
    lanes.alloc(1, 5)
    stats = lanes.stats([0, 0, 1, 2, 3, 1])
    assert stats.required == (2, 2, 1, 1)
    assert stats.available == (1, 5, 10, 10)
    assert stats.deficit == (1, 0, 0, 0)
    # lane 0: short -> target 3; lane 1: 5 >= 2 + 2 -> 0; lanes 2, 3: plenty
    assert stats.free_room_deficit == (3, 0, 0, 0)
    with pytest.raises(ValueError):
        lanes.stats([4])


def test_bad_configuration_is_a_user_error():
    for kwargs in (dict(num_pages=10, cp_size=0), dict(num_pages=0, cp_size=2),
                   dict(num_pages=10, cp_size=2, page_size=0),
                   dict(num_pages=10, cp_size=2, target_ratio=1.5),
                   dict(num_pages=10, cp_size=2, target_ratio=0.1, trigger_ratio=0.2)):
        with pytest.raises(UserError):
            OwnerLanes(**kwargs)
    with pytest.raises(UserError, match="expected 4 per-owner deficits"):
        FastPlanner(4).plan(_root(), [1, 2])
    with pytest.raises(UserError, match="integers"):
        FastPlanner(2).plan(_root(), [1.5, 0])


def _root():
    return CpNode(0, torch.empty(0, dtype=torch.int64))
