"""StorageWorker over the real file store, both modes, with faults injected on top."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from storage_helpers import is_sentinel, make_pages, sentinel_like
from tiercheck.errors import UserError
from tiercheck.impl.storage import FaultyBackend, FileStore, OpResult, StorageWorker, codes, rank_key

NA = codes.NOT_ATTEMPTED


@pytest.fixture
def store(tmp_path):
    return FileStore(tmp_path / "l3", fsync=False)


def hashes(n, tag="h"):
    return [f"{tag}{i:04x}" for i in range(n)]


def test_threaded_backup_then_prefetch_round_trip(store):
    pages, hs = make_pages(6, seed=10), hashes(6)
    with StorageWorker(store, rank=3, batch_pages=4) as w:
        b = w.submit_backup(hs, pages)
        assert w.wait_result(10) == OpResult(b, 6, (0,) * 6)
        # each rank writes its own shard: keys carry the rank suffix
        assert store.batch_exists([rank_key(h, 3) for h in hs]) == [1] * 6
        assert store.batch_exists([rank_key(h, 0) for h in hs]) == [0] * 6
        outs = sentinel_like(pages)
        p = w.submit_prefetch(hs, outs)
        assert w.wait_result(10) == OpResult(p, 6, (0,) * 6)
    assert all(torch.equal(a, o) for a, o in zip(pages, outs))
    assert w.stats["backup.pages_completed"] == 6 and w.stats["prefetch.pages_completed"] == 6


def test_poll_never_blocks_while_an_op_is_stuck(store):
    gate = threading.Event()
    fb = FaultyBackend(store)
    fb.on_call("put", 1, gate.wait)  # stuck until the test opens the gate
    w = StorageWorker(fb)
    op = w.submit_backup(hashes(2), make_pages(2))
    for _ in range(50):
        assert w.poll() == []  # returned while the op cannot have finished: it did not wait
    assert w.outstanding() == 1 and not gate.is_set()
    gate.set()
    assert w.wait_result(10) == OpResult(op, 2, (0, 0))
    assert w.close(timeout=10)


def test_manual_ops_run_only_when_told(store):
    pages, hs = make_pages(4, seed=11), hashes(4)
    w = StorageWorker(store, rank=0, mode="manual")
    a = w.submit_backup(hs[:2], pages[:2])
    b = w.submit_backup(hs[2:], pages[2:])
    time.sleep(0.05)
    assert w.poll() == [] and w.queued() == [a, b]
    assert store.batch_exists([rank_key(h, 0) for h in hs]) == [0] * 4
    assert w.run_next() == OpResult(a, 2, (0, 0))
    assert store.batch_exists([rank_key(h, 0) for h in hs]) == [1, 1, 0, 0]
    assert w.poll() == [OpResult(a, 2, (0, 0))] and w.queued() == [b]
    w.close(drain=False)


def test_manual_max_pages_completes_a_prefix(store):
    pages, hs = make_pages(5, seed=12), hashes(5)
    w = StorageWorker(store, mode="manual", batch_pages=2)
    op = w.submit_backup(hs, pages)
    assert w.run_next(max_pages=3) == OpResult(op, 3, (0, 0, 0, NA, NA))
    assert store.batch_exists([rank_key(h, 0) for h in hs]) == [1, 1, 1, 0, 0]
    outs = sentinel_like(pages)
    p = w.submit_prefetch(hs, outs)
    assert w.run_next(max_pages=1) == OpResult(p, 1, (0, NA, NA, NA, NA))
    assert torch.equal(outs[0], pages[0]) and all(is_sentinel(o) for o in outs[1:])
    p2 = w.submit_prefetch(hs, outs)
    r = w.run_next()  # the store has 3 pages: the 4th is a miss, the prefetch stops there
    assert r.op_id == p2 and r.completed_pages == 3
    assert r.codes[3] == codes.OBJECT_NOT_FOUND and r.codes[4] == NA
    assert all(torch.equal(a, o) for a, o in zip(pages[:3], outs[:3])) and is_sentinel(outs[4])
    assert w.stats["prefetch.OBJECT_NOT_FOUND"] == 1
    w.close()


def test_prefetch_completed_is_leading_hits_only(store):
    pages, hs = make_pages(4, seed=13), hashes(4)
    keys = [rank_key(h, 0) for h in hs]
    store.batch_put([keys[0], keys[1], keys[3]], [pages[0], pages[1], pages[3]])  # hole at 2
    w = StorageWorker(store, mode="manual")  # one batch: page 3 is read but not counted
    outs = sentinel_like(pages)
    w.submit_prefetch(hs, outs)
    r = w.run_next()
    assert r.completed_pages == 2 and r.codes[:3] == (0, 0, codes.OBJECT_NOT_FOUND)
    assert is_sentinel(outs[2])
    w.close()


def test_injected_partial_batch_failure(store):
    pages, hs = make_pages(6, seed=14), hashes(6)
    fb = FaultyBackend(store)
    fb.fail_from(2, codes.RPC_FAIL, op="put")
    w = StorageWorker(fb, mode="manual")
    op = w.submit_backup(hs, pages)
    r = w.run_next()
    # an ack is not success: only the leading 2 pages count, and only they reached the store
    assert r == OpResult(op, 2, (0, 0) + (codes.RPC_FAIL,) * 4)
    assert store.batch_exists([rank_key(h, 0) for h in hs]) == [1, 1, 0, 0, 0, 0]
    assert fb.stats["injected.put.RPC_FAIL"] == 4 and w.stats["backup.RPC_FAIL"] == 4
    # the rule fired once: the retry goes through
    w.submit_backup(hs, pages)
    assert w.run_next().completed_pages == 6
    fb.fail_from(4, codes.TRANSFER_FAIL, op="get")
    outs = sentinel_like(pages)
    w.submit_prefetch(hs, outs)
    r = w.run_next()
    assert r.completed_pages == 4 and r.codes[4:] == (codes.TRANSFER_FAIL,) * 2
    assert all(is_sentinel(o) for o in outs[4:])
    assert fb.stats["injected.get.TRANSFER_FAIL"] == 2
    w.close()


def test_failure_in_a_middle_chunk_stops_the_backup(store):
    pages, hs = make_pages(6, seed=15), hashes(6)
    fb = FaultyBackend(store)
    w = StorageWorker(fb, mode="manual", batch_pages=2)
    fb.on_call("put", 2, lambda: fb.fail_all(codes.NO_SPACE, ops=["put"], calls=1))
    w.submit_backup(hs, pages)
    r = w.run_next()
    assert r.completed_pages == 2 and r.codes == (0, 0, codes.NO_SPACE, codes.NO_SPACE, NA, NA)
    assert fb.calls("put") == 2  # later chunks cannot extend the prefix: not sent
    assert fb.stats["injected.put.NO_AVAILABLE_HANDLE"] == 2
    w.close()


def test_corrupt_page_ends_the_prefetch_and_is_not_served(store):
    pages, hs = make_pages(3, seed=16), hashes(3)
    w = StorageWorker(store, mode="manual")
    w.submit_backup(hs, pages)
    assert w.run_next().completed_pages == 3
    path = store.path_of(rank_key(hs[1], 0))
    with open(path, "r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)[0]
        f.seek(-1, 2)
        f.write(bytes([last ^ 0xFF]))
    outs = sentinel_like(pages)
    w.submit_prefetch(hs, outs)
    r = w.run_next()
    assert r.completed_pages == 1 and r.codes[1] == codes.CHECKSUM_MISMATCH
    assert torch.equal(outs[0], pages[0]) and is_sentinel(outs[1])
    assert store.stats["corrupt"] == 1 and w.stats["prefetch.CHECKSUM_MISMATCH"] == 1
    w.close()


def test_eviction_after_ack_shows_up_as_a_miss(store):
    pages, hs = make_pages(4, seed=17), hashes(4)
    fb = FaultyBackend(store)
    fb.evict_after_ack(keys=[rank_key(hs[2], 0)])
    w = StorageWorker(fb, mode="manual")
    w.submit_backup(hs, pages)
    assert w.run_next().completed_pages == 4  # acked: durable at ack time ...
    assert fb.stats["evicted_after_ack"] == 1
    outs = sentinel_like(pages)
    w.submit_prefetch(hs, outs)
    r = w.run_next()  # ... but gone later: the prefetch must report the miss
    assert r.completed_pages == 2 and r.codes[2] == codes.OBJECT_NOT_FOUND
    assert is_sentinel(outs[2])
    w.close()


def test_evict_now_and_misuse_of_faults(store):
    pages, hs = make_pages(2, seed=19), hashes(2)
    fb = FaultyBackend(store)
    keys = [rank_key(h, 0) for h in hs]
    assert fb.batch_put(keys, pages) == [0, 0]
    assert fb.evict([keys[1], "never-stored"]) == [0, codes.OBJECT_NOT_FOUND]
    assert fb.stats["evicted"] == 1 and store.batch_exists(keys) == [1, 0]
    with pytest.raises(ValueError, match="negative code"):
        fb.fail_all(0)
    with pytest.raises(ValueError, match="unknown storage op"):
        fb.fail_from(1, codes.RPC_FAIL, op="write")


def test_outage_then_recovery(store):
    pages, hs = make_pages(2, seed=18), hashes(2)
    fb = FaultyBackend(store)
    fb.fail_all(codes.RPC_TIMEOUT, seconds=0.3)
    w = StorageWorker(fb)
    w.submit_backup(hs, pages)
    r = w.wait_result(10)
    assert r.completed_pages == 0 and r.codes == (codes.RPC_TIMEOUT,) * 2
    assert codes.is_unknown(r.codes[0])  # unknown outcome: not "absent", not durable
    time.sleep(0.35)
    w.submit_backup(hs, pages)
    assert w.wait_result(10).completed_pages == 2
    assert fb.stats["injected.put.RPC_TIMEOUT"] == 2
    w.close()


def test_backend_exception_does_not_kill_the_worker(store):
    fb = FaultyBackend(store)

    def boom():
        raise RuntimeError("backend exploded")

    fb.on_call("put", 1, boom)
    w = StorageWorker(fb)
    w.submit_backup(hashes(2), make_pages(2))
    r = w.wait_result(10)
    assert r.completed_pages == 0 and r.codes == (codes.INTERNAL_ERROR,) * 2
    w.submit_backup(hashes(2), make_pages(2))
    assert w.wait_result(10).completed_pages == 2
    assert w.stats["exceptions"] == 1
    w.close()


def test_close_cancel_posts_a_result_for_every_op(store):
    gate = threading.Event()
    fb = FaultyBackend(store)
    fb.on_call("put", 1, lambda: gate.wait(10))
    w = StorageWorker(fb)
    ids = [w.submit_backup(hashes(2, tag=f"o{i}"), make_pages(2)) for i in range(3)]
    time.sleep(0.05)  # op 0 is inside the backend now
    threading.Timer(0.2, gate.set).start()
    assert w.close(drain=False, timeout=10)
    res = {r.op_id: r for r in w.poll()}
    assert res[ids[0]].completed_pages == 2  # the in-flight op finishes
    for i in ids[1:]:
        assert res[i] == OpResult(i, 0, (codes.CANCELLED,) * 2)
    assert w.outstanding() == 0
    with pytest.raises(RuntimeError, match="after close"):
        w.submit_backup(hashes(1), make_pages(1))


def test_close_drain_runs_manual_ops(store):
    w = StorageWorker(store, mode="manual")
    ids = [w.submit_backup(hashes(2, tag=f"d{i}"), make_pages(2)) for i in range(2)]
    assert w.close(drain=True, timeout=10)
    assert sorted((r.op_id, r.completed_pages) for r in w.poll()) == [(i, 2) for i in ids]


def test_misuse(store):
    with pytest.raises(UserError, match="mode"):
        StorageWorker(store, mode="async")
    with pytest.raises(UserError, match="batch_pages"):
        StorageWorker(store, batch_pages=0)
    w = StorageWorker(store)
    with pytest.raises(RuntimeError, match="manual"):
        w.run_next()
    with pytest.raises(ValueError, match="contiguous"):
        w.submit_backup(["h"], [torch.zeros(3, 3).t()])
    w.close()
    m = StorageWorker(store, mode="manual")
    with pytest.raises(RuntimeError, match="no queued op"):
        m.run_next()
    m.close()
