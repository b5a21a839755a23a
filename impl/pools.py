"""Page pools: a KV tensor plus an all-or-nothing page allocator with strict ownership checks.

Slots are page numbers. Each allocator owns a range of slot ids [base, base + capacity): the
device pool starts at 0 and the host pool at HOST_SLOT_BASE, so a host slot handed to the
device pool (or the reverse) is caught as a foreign slot instead of silently freeing some
other page. Misuse (double free, foreign slot, copying to a free slot) raises SlotError: these
are protocol bugs and must never be absorbed.
"""

from __future__ import annotations

import operator

import torch

from tiercheck.errors import UserError
from tiercheck.impl.kvdata import KVLayout

HOST_SLOT_BASE = 1 << 20  # host slot ids start here; device pools hold fewer pages than this
_POISON = -7777.0  # written into freed pages when poison_on_free is set (outside [-0.5, 0.5))


class SlotError(RuntimeError):
    """A slot was used in a way that is a protocol bug."""


class DoubleFreeError(SlotError):
    """A slot that is not allocated was freed."""


class ForeignSlotError(SlotError):
    """A slot id that does not belong to this pool (wrong pool, out of range, not an int)."""


class PageAllocator:
    """Free-list allocator over slot ids [base, base + capacity).

    alloc is all-or-nothing and LIFO: the most recently freed slots are handed out first,
    in the order they were freed, which makes a slot freed too early get reused (and its
    bytes overwritten) as soon as possible, like a busy real pool. Not thread-safe: one
    allocator belongs to one rank's scheduler.
    """

    def __init__(self, capacity: int, *, base: int = 0, name: str = "pool", lowest_first: bool = False) -> None:
        # 0 is a pool every allocation fails on (a HiCache without a host tier).
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 0:
            raise UserError(f"{name}: capacity must be a number of pages >= 0, got {capacity!r}")
        self.capacity = capacity
        self.base = base
        self.name = name
        # lowest_first: alloc takes the lowest free slots in ascending order, whatever
        # order they were freed in (the specification's allocator, for comparing slot
        # identities); otherwise LIFO.
        self.lowest_first = lowest_first
        self._owned = bytearray(capacity)  # 1 = allocated
        self._free = list(range(base + capacity - 1, base - 1, -1))  # pop() yields base first

    # -- queries -------------------------------------------------------------------------
    def available(self) -> int:
        """Number of free slots."""
        return len(self._free)

    def free_slots(self) -> list[int]:
        """The free slot ids, ascending."""
        return sorted(self._free)

    def allocated_count(self) -> int:
        return self.capacity - len(self._free)

    def is_allocated(self, slot: int) -> bool:
        i = self._offset(slot, "is_allocated")
        return bool(self._owned[i])

    def allocated_slots(self) -> list[int]:
        """All allocated slot ids, ascending."""
        return [self.base + i for i, o in enumerate(self._owned) if o]

    # -- mutation ------------------------------------------------------------------------
    def alloc(self, n: int) -> list[int] | None:
        """n slots, or None (and nothing taken) when fewer than n are free."""
        n = operator.index(n)
        if n < 0:
            raise ValueError(f"{self.name}: cannot allocate {n} slots")
        if n > len(self._free):
            return None
        if self.lowest_first:
            self._free.sort(reverse=True)  # pop() order: lowest first
        taken = self._free[len(self._free) - n :][::-1]
        del self._free[len(self._free) - n :]
        for s in taken:
            self._owned[s - self.base] = 1
        return taken

    def free(self, slots) -> None:
        """Return slots to the pool. Checks every slot first and changes nothing on error."""
        slots = as_slot_list(slots)
        offsets = [self._offset(s, "free") for s in slots]
        seen: set[int] = set()
        for s, i in zip(slots, offsets):
            if i in seen:
                raise DoubleFreeError(f"{self.name}: slot {s} appears twice in one free() call")
            if not self._owned[i]:
                raise DoubleFreeError(f"{self.name}: double free of slot {s} (it is not allocated)")
            seen.add(i)
        for i in offsets:
            self._owned[i] = 0
        self._free.extend(reversed(slots))  # next alloc returns them in this order

    def require_allocated(self, slots, what: str) -> list[int]:
        """The slots as a list; SlotError if any is foreign or free (``what`` names the caller)."""
        slots = as_slot_list(slots)
        for s in slots:
            if not self._owned[self._offset(s, what)]:
                raise SlotError(f"{what}: {self.name} slot {s} is not allocated")
        return slots

    def check(self) -> None:
        """Raise SlotError unless free + allocated == capacity and the free list is consistent."""
        free_offsets = [s - self.base for s in self._free]
        if len(set(free_offsets)) != len(free_offsets):
            raise SlotError(f"{self.name}: a slot is on the free list twice")
        if any(not 0 <= i < self.capacity or self._owned[i] for i in free_offsets):
            raise SlotError(f"{self.name}: an allocated or foreign slot is on the free list")
        owned = sum(self._owned)
        if owned + len(self._free) != self.capacity:
            raise SlotError(
                f"{self.name}: {owned} allocated + {len(self._free)} free != capacity {self.capacity}"
            )

    def _offset(self, slot: int, what: str) -> int:
        if isinstance(slot, bool) or not isinstance(slot, int):
            raise ForeignSlotError(f"{what}: {self.name} slot must be an int, got {slot!r}")
        i = slot - self.base
        if not 0 <= i < self.capacity:
            raise ForeignSlotError(
                f"{what}: slot {slot} does not belong to {self.name} "
                f"(slots {self.base}..{self.base + self.capacity - 1})"
            )
        return i


def as_slot_list(slots) -> list[int]:
    """Accept a list/tuple of ints or a 1-D integer tensor; return a list of Python ints."""
    if isinstance(slots, torch.Tensor):
        if slots.dim() != 1 or slots.dtype.is_floating_point:
            raise ForeignSlotError(f"slots tensor must be 1-D integer, got {slots.dtype} {tuple(slots.shape)}")
        return slots.tolist()
    return list(slots)


class KVPool:
    """A page-major KV tensor (num_pages, layers, 2, page_size, heads, head_dim) plus its allocator.

    Page-major because every page (all layers, K and V) is then one contiguous block: a run of
    consecutive pages is a single async memcpy between device and pinned host memory.
    ``layer_view()`` gives the classic layers x 2 x slots x ... order as a view.
    """

    def __init__(
        self,
        layout: KVLayout,
        num_pages: int,
        *,
        device: torch.device | str,
        pin_memory: bool = False,
        base: int = 0,
        name: str = "pool",
        poison_on_free: bool = False,
        lowest_first: bool = False,
    ) -> None:
        self.layout = layout
        self.name = name
        self.poison_on_free = poison_on_free
        self.allocator = PageAllocator(num_pages, base=base, name=name, lowest_first=lowest_first)
        self.data = torch.zeros(
            (num_pages, *layout.page_shape), dtype=layout.dtype, device=device, pin_memory=pin_memory
        )

    @property
    def num_pages(self) -> int:
        return self.allocator.capacity

    @property
    def base(self) -> int:
        return self.allocator.base

    @property
    def device(self) -> torch.device:
        return self.data.device

    def alloc(self, n: int) -> list[int] | None:
        return self.allocator.alloc(n)

    def free(self, slots) -> None:
        slots = as_slot_list(slots)
        self.allocator.free(slots)
        if self.poison_on_free and slots:
            # A freed page reads as garbage at once (on a GPU it keeps stale bytes until reuse).
            self.data[self.index(slots)] = _POISON

    def available(self) -> int:
        return self.allocator.available()

    def index(self, slots, *, require_allocated: bool = False, what: str = "index") -> torch.Tensor:
        """Row indices into ``data`` for the slots, as an int64 tensor on the pool's device."""
        if require_allocated:
            slots = self.allocator.require_allocated(slots, what)
        else:
            slots = as_slot_list(slots)
            for s in slots:
                self.allocator._offset(s, what)
        return torch.tensor([s - self.base for s in slots], dtype=torch.int64, device=self.device)

    def page(self, slot: int) -> torch.Tensor:
        """View of one page: layout.page_shape."""
        return self.data[self.allocator._offset(slot, "page")]

    def layer_view(self) -> torch.Tensor:
        """A view (layers, 2, num_pages, page_size, heads, head_dim) of the same memory, in the
        classic layer-first order (row p is slot base + p). Writes through it land in the pool."""
        return self.data.permute(1, 2, 0, 3, 4, 5)


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def DevicePool(
    layout: KVLayout,
    num_pages: int,
    *,
    device: torch.device | str | None = None,
    name: str = "device",
    poison_on_free: bool = False,
    lowest_first: bool = False,
) -> KVPool:
    """The device (L1) pool: on CUDA when available, else CPU. Slot ids start at 0."""
    if num_pages > HOST_SLOT_BASE:
        raise UserError(f"{name}: at most {HOST_SLOT_BASE} device pages, got {num_pages}")
    return KVPool(
        layout, num_pages, device=device or default_device(), base=0, name=name,
        poison_on_free=poison_on_free, lowest_first=lowest_first,
    )


def HostPool(
    layout: KVLayout,
    num_pages: int,
    *,
    pin_memory: bool | None = None,
    name: str = "host",
    poison_on_free: bool = False,
    lowest_first: bool = False,
) -> KVPool:
    """The host (L2) pool: CPU memory, pinned when CUDA is available (needed for async DMA).
    Slot ids start at HOST_SLOT_BASE."""
    pin = torch.cuda.is_available() if pin_memory is None else pin_memory
    return KVPool(
        layout, num_pages, device="cpu", pin_memory=pin, base=HOST_SLOT_BASE, name=name,
        poison_on_free=poison_on_free, lowest_first=lowest_first,
    )
