"""A storage ack that reports more pages than its backup stored (failed-batch-acked).

The refinement maps what the reference really stored (the snapshot's ``sstored``) to the
ack's history field ``StorageAck.actual``, so the properties checked on the
implementation's states and the failed-pages counter see the lie: the variant's
counterexample replays on the reference with the variant on up to its last step, where
durable_only_when_acked breaks (random models 103-20, docs/random-models.md). Before,
the refined ack held the reported count as stored, and the replay stopped one step early
on the failed-pages counter.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.refinement import RefinementError, refine
from tiercheck.conformance.runner import replay
from tiercheck.impl.hicache.metrics import STORAGE_FAILED_PAGES
from tiercheck.models import model_file
from tiercheck.models.replay import replay as spec_replay
from tiercheck.spec.action import act
from tiercheck.spec.model import Model
from tiercheck.spec.properties import BY_NAME
from tiercheck.spec.state import StorageAck

# The checker's counterexample on the shipped model: one two-page node written to host,
# its backup stores nothing but acks both pages, the drain marks them durable.
TRACE = [act("insert", req=0), act("write_dma_done", rank=0), act("writing_check"),
         act("storage_backup_done", rank=0, pages=0), act("drain_storage_control_queues")]


def _cfg(**changes):
    return replace(model_file.load("variants/failed-batch-acked").config, **changes)


def test_the_trace_is_a_counterexample_on_the_spec():
    m = Model(_cfg())
    states = spec_replay(m, TRACE)
    assert BY_NAME["durable_only_when_acked"].fn(m, states[-2], TRACE[-1], states[-1])
    assert states[-2].ranks[0].sdone == (StorageAck(2, 0),)


def test_the_counterexample_replays_on_the_reference_to_its_violation():
    driver = ReferenceDriver(_cfg())
    try:
        out = replay(driver, TRACE)
    finally:
        driver.close()
    mm = out.mismatch
    assert mm is not None and mm.step == len(TRACE) - 1, mm
    assert mm.kind == "invariant" and "durable_only_when_acked" in mm.message


@pytest.mark.parametrize("stored", [0, 1, 2])
def test_the_refined_ack_holds_what_was_stored(stored):
    """The ack reports both pages whatever the backup stored; the refined state's ack
    holds the stored count, and the failed-pages counter (checked by verify against the
    spec's state change) counts the pages really lost."""
    driver = ReferenceDriver(_cfg())
    try:
        steps = TRACE[:3] + [act("storage_backup_done", rank=0, pages=stored)]
        for a in steps:
            driver.apply(a)
            driver.state()
            assert driver.verify() == [], a
        assert driver.state().ranks[0].sdone == (StorageAck(2, stored),)
        assert driver.group.metrics()[0].get(STORAGE_FAILED_PAGES, 0) == 2 - stored
    finally:
        driver.close()


def test_a_snapshot_without_stored_counts_maps_the_reported_ones():
    cfg = _cfg(variants=frozenset())
    driver = ReferenceDriver(cfg)
    try:
        for a in TRACE[:3] + [act("storage_backup_done", rank=0, pages=1)]:
            driver.apply(a)
        snaps = driver.group.snapshot()
    finally:
        driver.close()
    m = Model(cfg)
    assert refine(m, snaps).ranks[0].sdone == (StorageAck(1, 1),)
    plain = [{k: v for k, v in s.items() if k != "sstored"} for s in snaps]
    assert refine(m, plain).ranks[0].sdone == (StorageAck(1, 1),)
    snaps[0]["sstored"] = []
    with pytest.raises(RefinementError, match="'sstored'"):
        refine(m, snaps)
