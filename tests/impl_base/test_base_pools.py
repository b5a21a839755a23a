"""Page allocator accounting, all-or-nothing alloc, double-free and foreign-slot detection."""

import pytest
import torch

from tiercheck.errors import UserError
from tiercheck.impl.kvdata import KVLayout, fill_page, verify
from tiercheck.impl.pools import (
    HOST_SLOT_BASE,
    DevicePool,
    DoubleFreeError,
    ForeignSlotError,
    HostPool,
    PageAllocator,
    SlotError,
)

L = KVLayout()


def test_accounting_all_or_nothing_and_lifo_reuse():
    a = PageAllocator(6, name="dev")
    x = a.alloc(4)
    assert x == [0, 1, 2, 3]
    assert a.available() == 2 and a.allocated_count() == 4
    assert a.alloc(3) is None  # not enough: nothing taken
    assert a.available() == 2
    a.check()
    a.free([2, 0])
    assert a.alloc(2) == [2, 0]  # most recently freed first, in free order
    assert a.alloc(0) == []
    assert a.allocated_slots() == [0, 1, 2, 3]
    a.free(torch.tensor([1, 3]))  # tensors accepted
    a.check()
    assert a.available() + a.allocated_count() == a.capacity
    with pytest.raises(ValueError):
        a.alloc(-1)


def test_double_free_is_an_error_and_changes_nothing():
    a = PageAllocator(4, name="host")
    s = a.alloc(3)
    a.free([s[0]])
    with pytest.raises(DoubleFreeError, match="double free of slot 0"):
        a.free([s[1], s[0]])  # s[1] must NOT be freed by the failing call
    assert a.is_allocated(s[1])
    with pytest.raises(DoubleFreeError, match="twice"):
        a.free([s[2], s[2]])
    assert a.is_allocated(s[2])
    a.check()
    assert a.available() == 2


def test_foreign_slots_are_detected():
    dev = DevicePool(L, 4, device="cpu")
    host = HostPool(L, 4)
    h = host.alloc(2)
    assert h == [HOST_SLOT_BASE, HOST_SLOT_BASE + 1]
    d = dev.alloc(2)
    with pytest.raises(ForeignSlotError, match="does not belong to device"):
        dev.free(h)  # host slots handed to the device pool
    with pytest.raises(ForeignSlotError, match="does not belong to host"):
        host.free(d)
    with pytest.raises(ForeignSlotError):
        dev.free([4])
    with pytest.raises(ForeignSlotError, match="must be an int"):
        dev.free([1.0])
    with pytest.raises(ForeignSlotError, match="must be an int"):
        dev.free([True])
    assert dev.allocator.allocated_count() == 2 and host.allocator.allocated_count() == 2


def test_check_catches_broken_accounting():
    a = PageAllocator(3)
    a.alloc(1)
    a._free.append(0)  # simulate a corrupted free list: an allocated slot on it
    with pytest.raises(SlotError):
        a.check()


def test_pools_shape_device_and_pinning():
    dev = DevicePool(L, 5)
    host = HostPool(L, 7)
    assert tuple(dev.data.shape) == (5, *L.page_shape)
    assert dev.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert host.device.type == "cpu"
    assert host.data.is_pinned() == torch.cuda.is_available()
    assert tuple(dev.layer_view().shape) == (L.layers, 2, 5, L.page_size, L.heads, L.head_dim)
    dev.layer_view()[1, 0, 3] = 9.0  # a view: writes land in page 3
    assert bool((dev.data[3, 1, 0] == 9.0).all())
    with pytest.raises(UserError, match="capacity"):
        HostPool(L, -1)
    empty = HostPool(L, 0)  # no host tier: every allocation fails
    assert empty.available() == 0 and empty.alloc(1) is None and empty.alloc(0) == []


def test_poison_on_free_makes_freed_page_unreadable():
    pool = HostPool(L, 2, poison_on_free=True)
    (s,) = pool.alloc(1)
    fill_page(pool, s, 5, rank=0)
    assert verify(pool, s, 5, rank=0)
    pool.free([s])
    assert not verify(pool, s, 5, rank=0)
    plain = HostPool(L, 2)
    (t,) = plain.alloc(1)
    fill_page(plain, t, 5, rank=0)
    plain.free([t])
    assert verify(plain, t, 5, rank=0)  # like a GPU: stale bytes stay until reuse
