"""The context-parallel (CP) shared-KV page layout and its per-owner device lanes.

Under CP the device KV pool is one logical page space striped over ``cp_size`` ranks:
logical page ``p`` lives on (is "owned" by) lane ``(p - 1) mod cp_size``. Page 0 is the
reserved padding slot; it still maps somewhere, and with Python/torch floor-modulo
``(0 - 1) mod cp == cp - 1`` -- the "zero-location edge" every histogram must agree on.

A load-back needs a given number of pages on each owner lane; a lane that has fewer free
pages has an exact deficit. On top of that a free-room watermark (a ratio of the lane
capacity, with a lower trigger ratio for hysteresis) can ask for more room.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Iterable, List, Sequence, Tuple

import torch

from tiercheck.errors import UserError


def check_cp_size(cp_size: int) -> int:
    if isinstance(cp_size, bool) or not isinstance(cp_size, int) or cp_size < 1:
        raise UserError(f"cp_size must be a positive integer, got {cp_size!r}")
    return cp_size


def check_page_size(page_size: int) -> int:
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
        raise UserError(f"page_size must be a positive integer, got {page_size!r}")
    return page_size


def owner_of_page(page: int, cp_size: int) -> int:
    """Owner lane of one logical page (page 0, the padding slot, maps to cp_size - 1)."""
    if page < 0:
        raise ValueError(f"logical page must be >= 0, got {page}")
    return (int(page) - 1) % cp_size


def owners_of_pages(pages: torch.Tensor, cp_size: int) -> torch.Tensor:
    """Owner lane of every logical page, on the tensor's device (no host sync)."""
    # torch.remainder is floor-modulo like Python's %, so page 0 -> cp_size - 1.
    return torch.remainder(pages - 1, cp_size)


def pages_of_token_locs(locs: torch.Tensor, page_size: int) -> torch.Tensor:
    """Logical page of each page-run in a node's token locations (first loc of each page).

    A node's locations cover whole pages except possibly a partial last one; the first
    location of every page-sized run names the page (padding the tail would not change it).
    """
    return torch.div(locs[::page_size], page_size, rounding_mode="floor")


def page_aligned_room(capacity: int, ratio: float, page_size: int) -> int:
    """Room the watermark asks for: ceil(capacity * ratio), rounded up to whole pages."""
    check_page_size(page_size)
    if capacity <= 0 or ratio <= 0:
        return 0
    raw = int(math.ceil(float(capacity) * float(ratio)))
    return -(-raw // page_size) * page_size


def free_room_deficit(
    *, required: int, available: int, capacity: int, page_size: int,
    target_ratio: float, trigger_ratio: float,
) -> int:
    """Deficit of one lane under the free-room watermark (same rule as the seed).

    Nothing is asked while the lane keeps ``trigger`` room after the load; once it would
    not, the planner is asked for at least ``target`` room (and never less than the exact
    shortfall). Note the rule asks for the whole target room, not "target minus what is
    already free": that is the seed's behaviour and the source of the incident's large
    single-owner deficit.
    """
    target = page_aligned_room(capacity, target_ratio, page_size)
    trigger = page_aligned_room(capacity, trigger_ratio, page_size)
    if available >= required + trigger:
        return 0
    return max(max(0, required - available), target)


def check_ratio(name: str, ratio: float) -> float:
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not (0.0 <= ratio < 1.0):
        raise UserError(f"{name} must be a number in [0, 1), got {ratio!r}")
    return float(ratio)


@dataclass(frozen=True)
class LaneStats:
    """Per-owner figures for one load: pages needed, free, and the two deficits."""

    required: Tuple[int, ...]
    available: Tuple[int, ...]
    deficit: Tuple[int, ...]
    free_room_deficit: Tuple[int, ...]


class OwnerLanes:
    """Free logical pages of the CP device pool, one lane per owner.

    Pages ``1 .. num_pages - 1`` are allocatable (page 0 is reserved). Allocation is
    lowest-page-first, so replicas that apply the same requests get the same pages.
    Capacities and the watermark are in pages (``page_size`` only converts to tokens).
    """

    def __init__(
        self, num_pages: int, cp_size: int, page_size: int = 1, *,
        target_ratio: float = 0.0, trigger_ratio: float = 0.0,
    ) -> None:
        self.cp_size = check_cp_size(cp_size)
        self.page_size = check_page_size(page_size)
        if isinstance(num_pages, bool) or not isinstance(num_pages, int) or num_pages < 1:
            raise UserError(f"num_pages must be a positive integer, got {num_pages!r}")
        self.target_ratio = check_ratio("target_ratio", target_ratio)
        self.trigger_ratio = check_ratio("trigger_ratio", trigger_ratio)
        if self.trigger_ratio > self.target_ratio:
            raise UserError(
                f"trigger_ratio {trigger_ratio} must not exceed target_ratio {target_ratio}"
            )
        self.num_pages = num_pages
        self._free: List[List[int]] = [[] for _ in range(cp_size)]
        self._free_set: List[set] = [set() for _ in range(cp_size)]
        for page in range(1, num_pages):
            owner = owner_of_page(page, cp_size)
            self._free[owner].append(page)  # ascending, so already a heap
            self._free_set[owner].add(page)
        self._capacity = tuple(len(lane) for lane in self._free)

    def capacity_pages(self) -> Tuple[int, ...]:
        return self._capacity

    def available_pages(self) -> Tuple[int, ...]:
        return tuple(len(lane) for lane in self._free_set)

    def alloc(self, owner: int, count: int) -> List[int]:
        """Take ``count`` free pages of one owner lane (lowest first)."""
        if not 0 <= owner < self.cp_size:
            raise ValueError(f"owner {owner} outside [0, {self.cp_size})")
        if count > len(self._free_set[owner]):
            raise MemoryError(
                f"owner lane {owner}: {count} pages wanted, {len(self._free_set[owner])} free"
            )
        pages = [heapq.heappop(self._free[owner]) for _ in range(count)]
        self._free_set[owner].difference_update(pages)
        return pages

    def alloc_with_owners(self, page_owners: Sequence[int]) -> List[int]:
        """One page per entry, each on the named owner lane; all or nothing."""
        required = self.required_by_owner(page_owners)
        short = [o for o, need in enumerate(required) if need > len(self._free_set[o])]
        if short:
            raise MemoryError(f"owner lanes {short} lack room for {list(required)} pages")
        return [self.alloc(owner, 1)[0] for owner in page_owners]

    def alloc_contiguous_run(self, count: int) -> List[int]:
        """``count`` pages whose owners follow the round-robin stripe 0, 1, 2, ..."""
        return self.alloc_with_owners([i % self.cp_size for i in range(count)])

    def free(self, pages: Iterable[int]) -> None:
        pages = [int(p) for p in pages]
        for page in pages:
            if not 1 <= page < self.num_pages:
                raise ValueError(f"page {page} is not an allocatable page")
            if page in self._free_set[owner_of_page(page, self.cp_size)]:
                raise ValueError(f"page {page} freed twice")
        if len(set(pages)) != len(pages):
            raise ValueError("the same page appears twice in one free")
        for page in pages:
            owner = owner_of_page(page, self.cp_size)
            heapq.heappush(self._free[owner], page)
            self._free_set[owner].add(page)

    def token_locs(self, pages: Sequence[int], device: torch.device | str = "cpu") -> torch.Tensor:
        """Token locations covering the given pages, in order (what a tree node holds)."""
        base = torch.as_tensor(list(pages), dtype=torch.int64, device=device) * self.page_size
        offs = torch.arange(self.page_size, dtype=torch.int64, device=device)
        return (base[:, None] + offs[None, :]).reshape(-1)

    def required_by_owner(self, page_owners: Sequence[int]) -> Tuple[int, ...]:
        required = [0] * self.cp_size
        for owner in page_owners:
            owner = int(owner)
            if not 0 <= owner < self.cp_size:
                raise ValueError(f"page owner {owner} outside [0, {self.cp_size})")
            required[owner] += 1
        return tuple(required)

    def stats(self, page_owners: Sequence[int]) -> LaneStats:
        """Exact and free-room deficits, per owner, for loading pages with these owners."""
        required = self.required_by_owner(page_owners)
        available = self.available_pages()
        deficit = tuple(max(0, r - a) for r, a in zip(required, available))
        free_room = tuple(
            free_room_deficit(
                required=r, available=a, capacity=c, page_size=1,
                target_ratio=self.target_ratio, trigger_ratio=self.trigger_ratio,
            )
            for r, a, c in zip(required, available, self._capacity)
        )
        return LaneStats(required, available, deficit, free_room)
