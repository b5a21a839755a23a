"""The storage tier in the protocol: backups and their acks, durable marks for the completed
prefix only, the release queue, mirror release under pressure, MLA single writer,
prefetch (bytes verified), store faults (no corrupt byte served, every failure counted)."""

import time

from hicache_helpers import backup_all, group, load_all, metric, node, nodes, ranks_agree, write_all
from tiercheck.impl.hicache import FileStorage
from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.storage import codes


def stage_and_back_up(g, tokens, pages=None):
    g.insert(tokens)
    write_all(g)
    backup_all(g, pages)


def test_backup_ack_releases_the_host_reference_and_marks_the_completed_prefix(file_storage):
    with group(1, file_storage, storage=True, mirror_release=True) as g:
        g.insert([1, 2, 3])
        write_all(g)
        assert node(g, [1, 2, 3])["host_ref"] == 1
        assert g.storage_backup_done(0, 2) == 2  # partial: 2 of 3 pages stored
        assert g.snapshot(store=False)[0]["durable"] == []  # not before the drain
        g.drain_storage_control_queues()
        s = g.snapshot()[0]
        assert node(g, [1, 2, 3])["host_ref"] == 0
        assert s["durable"] == [(1,), (1, 2)] and s["store"] == [(1,), (1, 2)]
        assert metric(g, mt.BACKUPED) == 2 and metric(g, mt.STORAGE_FAILED_PAGES) == 1
        assert g.verify() == []


def test_mirror_release_runs_only_under_pressure_and_after_agreement(file_storage):
    with group(2, file_storage, device_pages=6, host_pages=3, storage=True, mirror_release=True,
               host_free_target=1) as g:
        stage_and_back_up(g, [1])
        g.drain_storage_control_queues()
        assert g.snapshot(store=False)[0]["plan"] == []  # 2 pages free: no pressure
        stage_and_back_up(g, [2, 3])  # the ack drain prepares a plan: (1,) first (path order)
        assert [s["plan"] for s in g.snapshot(store=False)] == [[(1,)], [(1,)]]
        assert node(g, [1])["host"] == "resident"  # mutation never precedes consensus
        g.drain_storage_control_queues()  # every rank proposed the same triple: commit
        assert node(g, [1])["released"] and node(g, [1])["host"] == "absent"
        assert ranks_agree(g) and metric(g, mt.MIRROR_RELEASED) == 1
        # Anti-churn: the fully durable node is not staged again on its next hit.
        g.insert([1])
        assert node(g, [1])["host"] == "absent"
        assert g.verify() == []


def test_anti_churn_is_age_gated_when_configured(file_storage):
    with group(1, file_storage, device_pages=6, host_pages=2, storage=True, mirror_release=True,
               anti_churn_refresh_rounds=3) as g:
        stage_and_back_up(g, [1, 2])
        g.drain_storage_control_queues()
        assert node(g, [1, 2])["released"]
        g.insert([1, 2])
        assert node(g, [1, 2])["host"] == "absent"  # marks are fresh
        for _ in range(3):
            g.drain_storage_control_queues()
        g.insert([1, 2])
        assert node(g, [1, 2])["host"] == "writing"  # refreshed: staged again


def test_single_writer_followers_converge_through_synced_ack_slots(file_storage):
    with group(2, file_storage, storage=True, mirror_release=True, single_writer=True,
               prefetch=True) as g:
        g.insert([1, 2])
        write_all(g)
        assert g.storage_backup_done(1) == -1  # the follower writes nothing (backup_skip)
        g.storage_backup_done(0, 1)
        g.drain_storage_control_queues()
        snaps = g.snapshot()
        assert [s["durable"] for s in snaps] == [[(1,)], [(1,)]]  # rank 0's count on both
        assert snaps[0]["store"] == [(1,)] and snaps[1]["store"] == []
        assert ranks_agree(g) and g.verify() == []


def test_prefetch_reads_the_leading_stored_pages_and_bytes_match(tmp_path):
    storage = FileStorage(str(tmp_path / "l3"))
    with group(2, storage, storage=True) as seed:
        stage_and_back_up(seed, [1, 2, 3])
    with group(2, storage, storage=True, prefetch=True) as g:
        g.store_lose(1, [1, 2])  # rank 1's store drops its middle page
        assert g.prefetch_from_storage([1, 2, 3]) == [0, 0]
        assert [g.prefetch_io(r, 0) for r in (0, 1)] == [3, 1]
        assert g.check_prefetch_progress(0) == [True, True]
        n = node(g, [1])  # MIN of completed pages: 1
        assert (n["dev"], n["host"], n["pages"]) == ("absent", "resident", 1)
        assert g.snapshot(store=False)[0]["relq"] == [2]
        assert g.verify() == []  # the prefetched host copy holds the right bytes
        g.drain_storage_control_queues()
        assert g.snapshot(store=False)[0]["host_free"] == 7
        assert g.load_back([1]) == [1, 1]
        load_all(g)
        assert g.verify() == [] and ranks_agree(g)
        assert metric(g, mt.PREFETCHED) == 1


def test_prefetch_terminated_before_its_read_brings_nothing(tmp_path):
    storage = FileStorage(str(tmp_path / "l3"))
    with group(1, storage, storage=True) as seed:
        stage_and_back_up(seed, [1, 2])
    with group(1, storage, storage=True, prefetch=True) as g:
        g.prefetch_from_storage([1, 2])
        g.check_prefetch_progress(0)  # best effort: terminated, the read never ran
        assert nodes(g) == {} and g.snapshot(store=False)[0]["relq"] == [2]
        g.drain_storage_control_queues()
        assert g.snapshot(store=False)[0]["host_free"] == 8 and g.verify() == []


def test_prefetch_below_an_anchor_and_splits_what_the_tree_already_had(tmp_path):
    storage = FileStorage(str(tmp_path / "l3"))
    with group(1, storage, storage=True) as seed:
        stage_and_back_up(seed, [1, 2, 3])
    with group(1, storage, storage=True, prefetch=True) as g:
        g.insert([1])
        write_all(g)
        backup_all(g)
        assert g.prefetch_from_storage([1, 2, 3]) == [0]
        assert node(g, [1])["host_ref"] == 1  # the anchor is protected
        g.prefetch_io(0, 0)
        g.insert([1, 2, 4])  # meanwhile (1, 2) entered the tree
        write_all(g)
        g.check_prefetch_progress(0)
        assert node(g, [1])["host_ref"] == 0
        assert node(g, [1, 2, 3])["host"] == "resident" and node(g, [1, 2, 3])["pages"] == 1
        assert g.verify() == []


def test_failed_storage_pages_are_counted_and_never_served(faulty_storage, tmp_path):
    with group(1, faulty_storage, storage=True, prefetch=True) as g:
        g.storage_fault(0, "fail_from", 1, codes.NO_SPACE)
        g.insert([1, 2, 3])
        write_all(g)
        backup_all(g)
        assert metric(g, mt.BACKUPED) == 1 and metric(g, mt.STORAGE_FAILED_PAGES) == 2
        assert g.snapshot()[0]["store"] == [(1,)]
    with group(1, FileStorage(faulty_storage.root), storage=True, prefetch=True) as g2:
        g2.prefetch_from_storage([1, 2, 3])
        assert g2.prefetch_io(0, 0) == 1  # stops at the first miss
        g2.check_prefetch_progress(0)
        assert list(nodes(g2)) == [(1,)] and g2.verify() == []


def test_a_key_evicted_after_its_ack_is_a_miss_not_wrong_bytes(faulty_storage, tmp_path):
    with group(1, faulty_storage, storage=True, mirror_release=True) as g:
        g.storage_fault(0, "evict_after_ack", None, 1)
        stage_and_back_up(g, [1, 2])
        assert g.snapshot()[0]["store"] == [(1, 2)]
        # Durable means "present at ack time": the store lost (1,) since.
        assert any("durable pages [(1,)] are not in the store" in p for p in g.verify())
    with group(1, FileStorage(faulty_storage.root), storage=True, prefetch=True) as g2:
        assert g2.prefetch_from_storage([1, 2]) == [None]  # the first page is gone


def test_threaded_mode_end_to_end(file_storage):
    """Production mode: copies complete on their own, storage runs on worker threads,
    the scheduler just runs its rounds."""
    with group(2, file_storage, manual=False, device_pages=6, host_pages=3, storage=True,
               prefetch=True, mirror_release=True, host_free_target=3,
               prefetch_stop_policy="wait_complete") as g:
        for _ in range(3):  # re-hits: staging rejected under pressure succeeds after release
            for t in ([1, 2], [1, 3], [4, 5, 6]):
                g.insert(t)
                g.check_events()
            g.flush()
        g.evict(6 * g.cfg.layout.page_size)
        g.flush()
        assert g.verify() == [] and ranks_agree(g)
        s = g.snapshot()[0]
        assert s["store"] == [(1,), (1, 2), (1, 3), (4,), (4, 5), (4, 5, 6)]
        before = metric(g, mt.PREFETCHED)
        for t in ([4, 5, 6], [1, 3]):
            m = g.match_prefix(t)[0]
            op = g.prefetch_from_storage(t)[0] if m["device_pages"] + m["host_pages"] < len(t) else None
            if op is not None:
                deadline = time.monotonic() + 120  # a hang guard, not a speed bound
                while not all(g.check_prefetch_progress(op)):
                    assert time.monotonic() < deadline
                assert g.verify() == []  # the prefetched host copy holds the right bytes
            # (A prefetched copy is not marked durable, so it is no release candidate: the
            # second prefetch may find the host pool full and be rejected.)
            m = g.match_prefix(t)[0]
            if m["last_host_node"]:
                g.load_back(m["last_host_node"])
            g.flush()
            g.insert(t)
            g.flush()
        assert g.verify() == [] and ranks_agree(g)
        assert metric(g, mt.PREFETCHED) >= before + 3


def test_timeout_policy_reads_the_monotonic_clock_outside_manual_mode():
    """Seed 004's is_prefetch_timeout: base + pages * per_page seconds since the prefetch
    started; in manual mode only the driver's prefetch_timeout step fires the timer."""
    from tiercheck.impl.hicache.state import PrefetchOp

    for manual, base, fired in ((False, 0.0, True), (False, 1e9, False), (True, 0.0, False)):
        g = group(prefetch_stop_policy="timeout", prefetch_timeout_base=base, prefetch_timeout_per_page=0.0,
                  manual=manual)
        try:
            op = PrefetchOp((1, 2), None, 0, ["a", "b"], [0, 1], start=time.monotonic() - 1.0)
            assert g.ranks[0]._can_terminate(op, finished=False) == fired, (manual, base)
            assert g.ranks[0]._can_terminate(op, finished=True)  # a completed read may stop
        finally:
            g.close()
