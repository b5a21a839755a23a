"""The Mooncake lane: a REAL mooncake_master on loopback and a real client.

Faults are real where the system can produce them (store full, lease-expiry eviction,
master SIGKILL / SIGSTOP, master restart losing metadata, a foreign object under a key);
FaultyBackend only adds what cannot be provoked on demand (a failure at position k).
"""

from __future__ import annotations

import time

import pytest
import torch

from storage_helpers import (MOONCAKE_LEASE_MS, is_sentinel, make_client, make_pages,
                             require_mooncake, sentinel_like, start_master)
from tiercheck.errors import UserError
from tiercheck.impl.storage import FaultyBackend, OpResult, StorageWorker, codes, completed_prefix, rank_key
from tiercheck.impl.storage.mooncake import TRAILER

pytestmark = pytest.mark.mooncake

UNKNOWN = (codes.RPC_FAIL, codes.RPC_TIMEOUT)


def keys_of(ns, n, rank=0):
    return [rank_key(f"{ns}-{i}", rank) for i in range(n)]


def test_put_get_exists_round_trip(mooncake_backend, ns):
    b = mooncake_backend
    pages = make_pages(5, seed=20)
    keys = keys_of(ns, 5)
    assert b.batch_put(keys, pages) == [0] * 5
    assert b.batch_put(keys[:1], pages[1:2]) == [0]  # already exists: 0, not overwritten
    outs = sentinel_like(pages)
    nbytes = pages[0].numel() * pages[0].element_size()
    assert b.batch_get(keys, outs) == [nbytes] * 5
    assert all(torch.equal(p, o) for p, o in zip(pages, outs))
    assert b.batch_exists(keys + [f"{ns}-absent"]) == [1] * 5 + [0]
    miss = sentinel_like(pages[:1])
    assert b.batch_get([f"{ns}-absent"], miss) == [codes.OBJECT_NOT_FOUND] and is_sentinel(miss[0])
    assert b.delete(keys[:2]) == [0, 0]
    assert b.batch_exists(keys[:3]) == [0, 0, 1]


def test_batch_larger_than_staging_is_chunked(mooncake_backend, ns):
    pages = make_pages(6, shape=(1024, 512), dtype=torch.float32, seed=21)  # 6 x 2 MiB > 4 MiB
    keys = keys_of(ns, 6)
    try:
        assert mooncake_backend.batch_put(keys, pages) == [0] * 6
        outs = sentinel_like(pages)
        assert mooncake_backend.batch_get(keys, outs) == [2 << 20] * 6
        assert all(torch.equal(p, o) for p, o in zip(pages, outs))
    finally:
        mooncake_backend.delete(keys)


def test_store_full_fails_partway_prefix_is_right(mooncake_backend, ns):
    """A real partial batch failure: a batch bigger than the store answers -200 on its tail."""
    pages = make_pages(20, shape=(1 << 20,), dtype=torch.uint8, seed=22)  # 20 MiB > 16 MiB
    hs = [f"{ns}-{i}" for i in range(20)]
    fb = FaultyBackend(mooncake_backend)  # no fault armed: it only counts what the store says
    w = StorageWorker(fb, mode="manual")
    try:
        w.submit_backup(hs, pages)
        r = w.run_next(timeout=30)
        assert codes.NO_SPACE in r.codes
        assert 0 < r.completed_pages < 20 and r.completed_pages == completed_prefix(r.codes)
        assert fb.stats["observed.put.NO_AVAILABLE_HANDLE"] == r.codes.count(codes.NO_SPACE)
        assert w.stats["backup.NO_AVAILABLE_HANDLE"] == r.codes.count(codes.NO_SPACE)
        outs = sentinel_like(pages)
        w.submit_prefetch(hs, outs)
        p = w.run_next(timeout=30)
        # A store this full may evict acked objects before the read (Mooncake's high
        # watermark eviction; seen once in CI as -704 on the first keys): the read's prefix
        # can be shorter than the write's, never longer, and never serves a wrong byte.
        assert p.completed_pages <= r.completed_pages and p.completed_pages == completed_prefix(p.codes)
        for i, (page, out, c) in enumerate(zip(pages, outs, p.codes)):
            if c == codes.OK:
                assert r.codes[i] == codes.OK, f"page {i} served although its write failed"
                assert torch.equal(page, out), f"page {i} served with wrong bytes"
            else:
                assert is_sentinel(out), f"failed page {i} touched its destination"
    finally:
        w.close(drain=False)
        mooncake_backend.delete([rank_key(h, 0) for h in hs])


def test_injected_failure_at_position_k(mooncake_backend, ns):
    pages, hs = make_pages(6, seed=23), [f"{ns}-{i}" for i in range(6)]
    fb = FaultyBackend(mooncake_backend)
    fb.fail_from(3, codes.RPC_FAIL, op="put")
    w = StorageWorker(fb, rank=1, mode="manual")
    op = w.submit_backup(hs, pages)
    assert w.run_next(timeout=30) == OpResult(op, 3, (0, 0, 0) + (codes.RPC_FAIL,) * 3)
    assert mooncake_backend.batch_exists(keys_of(ns, 6, rank=1)) == [1, 1, 1, 0, 0, 0]
    assert fb.stats["injected.put.RPC_FAIL"] == 3
    outs = sentinel_like(pages)
    w.submit_prefetch(hs, outs)
    p = w.run_next(timeout=30)
    assert p.completed_pages == 3 and p.codes[3] == codes.OBJECT_NOT_FOUND
    assert all(torch.equal(a, o) for a, o in zip(pages[:3], outs[:3]))
    assert all(is_sentinel(o) for o in outs[3:])
    w.close()


def test_foreign_or_truncated_object_is_never_served(mooncake_backend, ns):
    page = make_pages(1, seed=24)[0]
    raw = mooncake_backend.raw_store()
    good, bad_len = rank_key(f"{ns}-c", 0), rank_key(f"{ns}-t", 0)
    payload = page.reshape(-1).view(torch.uint8).numpy().tobytes()
    # right length, wrong digest (a foreign writer / bit rot)
    assert raw.put(good, payload + b"\0" * TRAILER) == 0
    assert raw.put(bad_len, payload[:-7]) == 0
    outs = sentinel_like([page, page])
    res = mooncake_backend.batch_get([good, bad_len], outs)
    assert res == [codes.CHECKSUM_MISMATCH, codes.LENGTH_MISMATCH]
    assert all(is_sentinel(o) for o in outs)
    assert mooncake_backend.stats["corrupt"] >= 1
    mooncake_backend.delete([good, bad_len])


def test_store_evicts_acked_page_prefetch_reports_miss(mooncake_backend, ns):
    """Real eviction: after its lease expires, filling the store past the 90% watermark
    makes the master evict the acked page; the prefetch must report the miss."""
    pages, hs = make_pages(3, seed=25), [f"{ns}-{i}" for i in range(3)]
    w = StorageWorker(mooncake_backend, mode="manual")
    w.submit_backup(hs, pages)
    assert w.run_next(timeout=30).completed_pages == 3  # acked: durable at ack time
    target = rank_key(hs[0], 0)
    filler = make_pages(1, shape=(1 << 20,), dtype=torch.uint8)[0]
    fkeys = []
    try:
        # Fill the store past its size without touching the target (exists/get renew its
        # lease): probe only after a round of filling, and let the lease lapse before each.
        for _ in range(4):
            time.sleep(MOONCAKE_LEASE_MS / 1000 + 0.1)
            for _ in range(24):  # 24 MiB through a 16 MiB store
                fk = f"{ns}-fill{len(fkeys)}"
                mooncake_backend.batch_put([fk], [filler])
                fkeys.append(fk)
                time.sleep(0.01)
            if mooncake_backend.batch_exists([target]) == [0]:
                break
        else:
            pytest.fail("the store never evicted the acked page")
        outs = sentinel_like(pages)
        w.submit_prefetch(hs, outs)
        r = w.run_next(timeout=30)
        assert r.completed_pages == 0 and r.codes[0] == codes.OBJECT_NOT_FOUND
        for page, out, c in zip(pages, outs, r.codes):
            assert torch.equal(page, out) if c == codes.OK else is_sentinel(out)
    finally:
        w.close(drain=False)
        mooncake_backend.delete(fkeys)


def test_evict_after_ack_injected(mooncake_backend, ns):
    pages, hs = make_pages(3, seed=26), [f"{ns}-{i}" for i in range(3)]
    fb = FaultyBackend(mooncake_backend)
    fb.evict_after_ack(keys=[rank_key(hs[1], 0)])
    w = StorageWorker(fb, mode="manual")
    w.submit_backup(hs, pages)
    assert w.run_next(timeout=30).completed_pages == 3
    outs = sentinel_like(pages)
    w.submit_prefetch(hs, outs)
    r = w.run_next(timeout=30)
    assert r.completed_pages == 1 and r.codes[1] == codes.OBJECT_NOT_FOUND and is_sentinel(outs[1])
    assert fb.stats["evicted_after_ack"] == 1
    w.close()


def test_paused_master_does_not_block_the_scheduler(mooncake_master, mooncake_backend, ns):
    pages, hs = make_pages(2, seed=27), [f"{ns}-{i}" for i in range(2)]
    w = StorageWorker(mooncake_backend)
    mooncake_master.pause()
    try:
        op = w.submit_backup(hs, pages)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.4:
            assert w.poll() == []  # the op is stuck in the store call, poll returns at once
            time.sleep(0.01)
    finally:
        mooncake_master.resume()
    assert w.wait_result(30) == OpResult(op, 2, (0, 0))
    assert w.close(timeout=30)


def test_master_killed_mid_backup(ns):
    """SIGKILL between two chunks of one backup: the first chunk is durable, the rest is
    unknown (-900), the worker neither hangs nor serves garbage; a restarted master has
    lost every object, so the acked pages later read as misses."""
    require_mooncake()
    master = start_master()
    backend = make_client(master)
    try:
        pages, hs = make_pages(8, seed=28), [f"{ns}-{i}" for i in range(8)]
        fb = FaultyBackend(backend)
        fb.on_call("put", 2, master.kill)
        w = StorageWorker(fb, mode="threaded", batch_pages=4)
        op = w.submit_backup(hs, pages)
        r = w.wait_result(120)
        assert r is not None, "worker hung after the master died"
        assert r.op_id == op and r.completed_pages == 4
        assert all(c in UNKNOWN for c in r.codes[4:])
        failed = sum(1 for c in r.codes if c in UNKNOWN)
        assert fb.stats.total("observed.put.RPC") == failed and w.stats.total("backup.RPC") == failed

        outs = sentinel_like(pages[:4])
        w.submit_prefetch(hs[:4], outs)
        # (That poll() never blocks on a stuck store is test_paused_master_does_not_block_the_scheduler.)
        p = w.wait_result(120)
        assert p is not None and p.completed_pages == 0 and p.codes[0] in UNKNOWN
        assert all(is_sentinel(o) for o in outs)

        master.restart()  # same ports, empty metadata
        # The client's first calls may still fail on its broken connection (unknown, -900):
        # wait until the store answers at all, then the acked pages must read as misses.
        deadline = time.monotonic() + 120  # a hang guard, not a speed bound
        while backend.batch_exists(keys_of(ns, 1)) != [0]:
            assert time.monotonic() < deadline, "client never reconnected to the restarted master"
            time.sleep(0.1)
        w.submit_prefetch(hs[:4], outs)
        p = w.wait_result(30)
        assert p.completed_pages == 0 and p.codes[0] == codes.OBJECT_NOT_FOUND
        assert all(is_sentinel(o) for o in outs)
        assert w.close(timeout=30)
    finally:
        if not master.alive():
            master.restart()  # close() against a dead master takes 7-11 s
        backend.close()
        master.stop()


def test_client_refuses_unhealthy_master():
    require_mooncake()
    from tiercheck.impl.storage.mooncake import MooncakeBackend
    from tiercheck.impl.storage.mooncake_master import free_port
    port = free_port()
    with pytest.raises(UserError, match="not healthy"):
        MooncakeBackend(f"127.0.0.1:{free_port()}", master_health_url=f"http://127.0.0.1:{port}/health")
