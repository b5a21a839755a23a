"""Transfer engine: bytes move at completion; early free/reuse shows as wrong bytes; FIFO acks."""

import pytest
import torch

from tiercheck.impl.kvdata import KVLayout, fill_pages, verify, verify_pages
from tiercheck.impl.pools import DevicePool, ForeignSlotError, HostPool, SlotError
from tiercheck.impl.transfer import DeferredTransferEngine, make_engine

L = KVLayout(layers=2, heads=2, head_dim=4, page_size=2)
R = 0


def setup(mode="manual", dev_pages=8, host_pages=8):
    dev = DevicePool(L, dev_pages, device="cpu")
    host = HostPool(L, host_pages)
    return dev, host, make_engine(dev, host, mode=mode)


def test_d2h_copies_only_at_completion_then_bytes_are_right():
    dev, host, eng = setup()
    d = dev.alloc(3)
    fill_pages(dev, d, [1, 2, 3], R)
    h = host.alloc(3)
    op = eng.submit_d2h(d, h)
    assert op == 0 and eng.completed() == 0
    assert verify_pages(host, h, [1, 2, 3], R) == h  # nothing copied yet
    assert eng.complete_next() == 0
    assert verify_pages(host, h, [1, 2, 3], R) == []
    assert eng.completed() == 1 and eng.complete_next() is None


def test_host_slot_freed_and_reused_before_d2h_completes_gets_wrong_bytes():
    dev, host, eng = setup()
    d = dev.alloc(2)
    fill_pages(dev, d, [1, 2], R)
    h = host.alloc(2)
    eng.submit_d2h(d, h)
    host.free(h)  # bug: freed while the D->H copy is in flight
    h2 = host.alloc(2)
    assert h2 == h
    fill_pages(host, h2, [50, 51], R)  # new owner writes its pages (e.g. a prefetch)
    eng.complete_all()
    # the late copy clobbers the new owner's pages
    assert verify_pages(host, h2, [50, 51], R) == h2


def test_device_slot_reused_before_d2h_completes_backs_up_wrong_bytes():
    dev, host, eng = setup()
    d = dev.alloc(1)
    fill_pages(dev, d, [7], R)
    h = host.alloc(1)
    eng.submit_d2h(d, h)
    dev.free(d)
    d2 = dev.alloc(1)
    fill_pages(dev, d2, [8], R)
    eng.complete_all()
    assert not verify(host, h[0], 7, R)  # the backup holds page 8, not 7
    assert verify(host, h[0], 8, R)


def test_h2d_right_bytes_unless_host_slot_reused_first():
    dev, host, eng = setup()
    h = host.alloc(2)
    fill_pages(host, h, [30, 31], R)
    d = dev.alloc(2)
    ok = eng.submit_h2d(h, d)
    eng.complete_through(ok)
    assert verify_pages(dev, d, [30, 31], R) == []
    # now the bug: host slots reclaimed and reused while the load-back is in flight
    d_new = dev.alloc(2)
    eng.submit_h2d(h, d_new)
    host.free(h)
    h_new = host.alloc(2)
    fill_pages(host, h_new, [40, 41], R)
    eng.complete_all()
    assert verify_pages(dev, d_new, [30, 31], R) == d_new


def test_manual_completion_is_fifo_and_poll_reports_new_prefix():
    dev, host, eng = setup()
    d = dev.alloc(4)
    fill_pages(dev, d, [1, 2, 3, 4], R)
    h = host.alloc(4)
    ids = [eng.submit_d2h([d[i]], [h[i]]) for i in range(4)]
    assert ids == [0, 1, 2, 3] and eng.completed() == 0
    assert eng.poll() == []
    assert eng.complete_through(1) == [0, 1]
    assert eng.completed() == 2
    assert verify_pages(host, h, [1, 2, 3, 4], R) == h[2:]
    assert eng.poll() == [0, 1] and eng.poll() == []
    eng.wait(2)  # waiting lets the stream catch up to op 2, no further
    assert eng.completed() == 3 and eng.poll() == [2]
    eng.wait(3)
    assert eng.poll() == [3] and eng.completed() == 4
    assert verify_pages(host, h, [1, 2, 3, 4], R) == []
    assert eng.op(3).kind == "d2h" and eng.op(3).src_slots == (d[3],)
    with pytest.raises(ValueError, match="unknown transfer op"):
        eng.wait(4)


def test_auto_mode_completes_at_the_next_query_not_at_submit():
    dev, host, eng = setup(mode="auto")
    assert isinstance(eng, DeferredTransferEngine)
    d = dev.alloc(1)
    fill_pages(dev, d, [9], R)
    h = host.alloc(1)
    op = eng.submit_d2h(d, h)
    assert not verify(host, h[0], 9, R)  # still in flight
    assert eng.poll() == [op]
    assert verify(host, h[0], 9, R)


def test_submit_validation():
    dev, host, eng = setup()
    d = dev.alloc(2)
    h = host.alloc(2)
    with pytest.raises(SlotError, match="not allocated"):
        eng.submit_d2h(d, [h[0], host.base + 5])
    with pytest.raises(ForeignSlotError):
        eng.submit_d2h(h, d)  # sides swapped
    with pytest.raises(ValueError, match="2 source slots but 1"):
        eng.submit_d2h(d, h[:1])
    with pytest.raises(SlotError, match="twice"):
        eng.submit_h2d(h, [d[0], d[0]])
    with pytest.raises(ValueError, match="unknown transfer op"):
        eng.wait(0)  # nothing was submitted
    with pytest.raises(ValueError, match="mode"):
        make_engine(dev, host, mode="sometimes")
    with pytest.raises(ValueError, match="delay_cycles"):
        make_engine(dev, host, mode="auto", delay_cycles=10)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_engine_events_and_bytes():
    from tiercheck.impl.transfer import CudaTransferEngine

    dev = DevicePool(L, 64)
    host = HostPool(L, 64)
    eng = make_engine(dev, host)
    assert isinstance(eng, CudaTransferEngine)
    d = dev.alloc(10)
    fill_pages(dev, d, list(range(10)), R)
    h = host.alloc(10)
    h = h[:5] + h[5:][::-1]  # mixed runs
    op = eng.submit_d2h(d, h)
    eng.wait(op)
    assert eng.completed() == 1 and verify_pages(host, h, list(range(10)), R) == []
    d2 = dev.alloc(10)
    op2 = eng.submit_h2d(h, d2)
    eng.wait(op2)
    assert verify_pages(dev, d2, list(range(10)), R) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_delay_exposes_host_reuse_as_wrong_bytes():
    dev = DevicePool(L, 8)
    host = HostPool(L, 8)
    eng = make_engine(dev, host, delay_cycles=200_000_000)  # ~0.1 s on the copy stream
    d = dev.alloc(2)
    fill_pages(dev, d, [1, 2], R)
    h = host.alloc(2)
    op = eng.submit_d2h(d, h)
    assert eng.completed() == 0
    host.free(h)
    h2 = host.alloc(2)
    fill_pages(host, h2, [5, 6], R)  # host write lands before the delayed copy
    eng.wait(op)
    assert verify_pages(host, h2, [5, 6], R) == h2
