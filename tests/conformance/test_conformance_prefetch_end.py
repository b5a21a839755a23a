"""How a prefetch ends, the reference implementation against the spec: the timeout
policy's vote, a failed read ending the prefetch through the vote's terminated half, and
revoke retired by the drain round (the kill matrix covers the three bug variants)."""

from __future__ import annotations

import pytest

from tiercheck.conformance import machine
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.runner import replay
from tiercheck.models import model_file
from tiercheck.spec.action import act

ENDINGS = ("prefetch_timeout", "prefetch_read_fails", "prefetch_revoke")


def _prefetching(ranks):
    """Page 3 backed up to storage and gone from the tree; its prefetch in flight."""
    def backup(pages):
        return [act("storage_backup_done", rank=r, pages=pages) for r in range(ranks)]
    write = [act("write_dma_done", rank=r) for r in range(ranks)] + [act("writing_check")]
    drain = [act("drain_storage_control_queues")]
    return [act("insert", req=1), *write, act("evict", node=2), *backup(1), *drain,
            act("insert", req=0), *write, act("evict", node=1), *backup(2), *drain,
            act("prefetch_from_storage", req=1)]


CHECK = act("check_prefetch_progress", op=0)
SCRIPTS = {
    # rank 0 completes, rank 1's timer fires: the vote goes through on the second check
    "wt-prefetch-timeout-2r": [act("prefetch_io", rank=0, op=0), CHECK, act("prefetch_timeout", rank=1, op=0), CHECK],
    "wt-prefetch-fail-1r": [act("prefetch_read_fails", rank=0, op=0), CHECK],
    "wt-prefetch-revoke-1r": [act("prefetch_revoke", op=0), act("prefetch_io", rank=0, op=0),
                              act("drain_storage_control_queues")],
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_each_ending_conforms(name):
    cfg = model_file.load(name).config
    driver = ReferenceDriver(cfg)
    try:
        out = replay(driver, _prefetching(cfg.ranks) + SCRIPTS[name])
        assert out.mismatch is None, out.mismatch
        assert all(not snap["pq"] for snap in driver.group.snapshot(store=False))
    finally:
        driver.close()


class _Counting(ReferenceDriver):
    taken: set = set()

    def apply(self, action):
        super().apply(action)
        _Counting.taken.add(action.name)


def test_random_runs_conform_with_every_ending():
    cfg = model_file.load("wt-prefetch-endings-2r").config
    _Counting.taken = set()
    stats = {}
    machine.run(lambda: _Counting(cfg), examples=25, steps=40, seed=5, stats=stats)
    assert stats["examples"] >= 25
    assert set(ENDINGS) <= _Counting.taken
