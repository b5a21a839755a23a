"""Seed 000's bounded durable LRU and anti-churn age gate, and prefetch termination by vote: the reference implementation
against the spec (capacity eviction, ages, re-staging), and the order of the drain round
that keeps a planned release agreed (durable-evicted-while-planned)."""

from __future__ import annotations

from tiercheck.conformance import machine
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.runner import replay
from tiercheck.models import model_file
from tiercheck.spec.action import act


def _stage(req):
    return [act("insert", req=req), act("write_dma_done", rank=0), act("writing_check"),
            act("storage_backup_done", rank=0, pages=1), act("drain_storage_control_queues")]


def test_capacity_eviction_and_the_age_gate_conform():
    """Mark 1, release its mirror, mark 2 (evicting 1's mark from the one-page LRU), age
    the marks, re-insert 1 (staged again: its marks are gone)."""
    cfg = model_file.load("wt-durable-lru-1r").config
    driver = ReferenceDriver(cfg)
    try:
        steps = [*_stage(0), act("drain_storage_control_queues"), *_stage(1),
                 act("drain_storage_control_queues"), act("insert", req=0)]
        out = replay(driver, steps)
        assert out.mismatch is None, out.mismatch
        snap = driver.group.snapshot(store=False)[0]
        assert [p for p, _ in snap["durable_lru"]] == [(2,)]
        assert snap["nodes"][(1,)]["host"] == "writing"
    finally:
        driver.close()


def test_random_runs_conform_on_the_durable_lru_model():
    cfg = model_file.load("wt-durable-lru-1r").config
    stats = {}
    machine.run(lambda: ReferenceDriver(cfg), examples=15, steps=40, seed=7, stats=stats)
    assert stats["examples"] >= 15


def test_random_runs_conform_under_wait_complete():
    """Prefetch termination by the MAX vote of the wait_complete stop policy (2 ranks)."""
    cfg = model_file.load("wt-prefetch-wait-2r").config
    stats = {}
    machine.run(lambda: ReferenceDriver(cfg), examples=10, steps=40, seed=3, stats=stats)
    assert stats["examples"] >= 10
