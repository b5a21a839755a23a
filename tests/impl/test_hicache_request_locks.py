"""Request-lifetime locks in the reference HiCache (lock_request / unlock_request): the
running request's matched device prefix is split out, locked up to the root, kept on the
device, and unlocked by name after later splits."""

from __future__ import annotations

from hicache_helpers import group, node, write_all


def test_a_running_prefix_is_split_out_locked_and_kept_on_the_device():
    with group(device_pages=3, host_pages=2) as g:
        g.insert([1, 2, 3])
        assert g.lock_running([1, 2, 9]) == [2]  # the device match ends inside node 1/2/3
        assert node(g, [1, 2])["lock_ref"] == 1 and node(g, [1, 2, 3])["lock_ref"] == 0
        assert g.evict_node((1, 2)) == [0]  # locked: not an evictable leaf
        assert g.lock_running([1, 2, 9]) == [0]  # already running
        g.insert([1, 4])  # splits the locked node 1/2 at page 1: both halves keep the lock
        write_all(g)  # (and the write locks of the staged nodes are dropped)
        assert node(g, [1])["lock_ref"] == 1
        assert g.unlock_running([1, 2, 9]) == [True]
        assert node(g, [1])["lock_ref"] == 0 and node(g, [1, 2])["lock_ref"] == 0
        assert g.snapshot(store=False)[0]["running"] == []


def test_nothing_on_the_device_locks_nothing():
    with group() as g:
        assert g.lock_running([5, 6]) == [0]
        assert g.unlock_running([5, 6]) == [False]
