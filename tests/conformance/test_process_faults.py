"""Faults below the protocol (tiercheck.conformance.process_faults), each ending in its
clear verdict: the store self-check reports bytes rewritten in the store, close() stops
every storage worker, and a slow, never-starting or hanging gloo rank gives a one-line
error naming it instead of a hang. (The stopped-rank case: tests/faults/test_gloo_faults.py.)
Each scenario returns "" on the right verdict, else what went wrong; the same scenarios are
units of benchmarks/mutation_suite.py."""

from __future__ import annotations

import pytest

from tiercheck.conformance import process_faults as pf
from tiercheck.conformance import store_faults


def test_a_page_rewritten_in_the_store_fails_the_self_check():
    assert pf.guarded(pf.corrupted_store) == ""


def test_close_stops_the_worker_of_a_read_still_in_flight():
    assert pf.guarded(pf.close_with_a_read_in_flight) == ""
    assert pf.leftover_worker_threads() == ""


@pytest.mark.gloo
def test_a_rank_slow_to_start_within_the_start_timeout_joins(tmp_path):
    assert pf.guarded(lambda: pf.slow_rank_start(str(tmp_path))) == ""


@pytest.mark.gloo
@pytest.mark.slow
def test_a_rank_that_never_starts_is_named_and_no_process_is_left(tmp_path):
    assert pf.guarded(lambda: pf.rank_never_starts(str(tmp_path))) == ""


@pytest.mark.gloo
@pytest.mark.slow
def test_flush_gives_up_at_its_deadline_naming_the_rank_whose_store_call_hangs(tmp_path):
    assert pf.guarded(lambda: pf.flush_past_its_deadline(str(tmp_path))) == ""


def test_a_prefetch_terminated_before_its_read_never_reads_the_store(monkeypatch):
    assert pf.guarded(pf.terminated_before_its_read) == ""
    # A rank that runs the cancelled read anyway (drains its worker) is caught.
    from tiercheck.impl.storage import StorageWorker

    close = StorageWorker.close
    monkeypatch.setattr(StorageWorker, "close", lambda self, drain=True, timeout=None: close(self, True, timeout))
    assert pf.guarded(pf.terminated_before_its_read) == (
        "the store got 1 read(s) for a prefetch terminated before its read ran")


def test_a_backup_still_queued_at_close_never_writes_to_the_store(monkeypatch):
    assert pf.guarded(pf.close_with_a_backup_queued) == ""
    # A rank whose close() drains its workers (runs the queued write) is caught.
    from tiercheck.impl.storage import StorageWorker

    close = StorageWorker.close
    monkeypatch.setattr(StorageWorker, "close", lambda self, drain=True, timeout=None: close(self, True, timeout))
    assert pf.guarded(pf.close_with_a_backup_queued) == (
        "the store got 1 write(s) for a backup still queued at close()")


@pytest.mark.gloo
def test_a_rank_silent_without_a_failure_is_named_at_the_default_driver_timeout():
    assert pf.guarded(pf.silent_rank_without_failure) == ""


def test_a_store_batch_failing_partway_is_the_spec_partial_backup(monkeypatch):
    assert pf.guarded(store_faults.failed_batch_is_a_partial_backup) == ""
    # A store whose armed failure never fires stores both pages: caught.
    from tiercheck.impl.storage import FaultyBackend

    monkeypatch.setattr(FaultyBackend, "fail_from", lambda self, *args, **kw: None)
    assert "is not the spec's storage_backup_done" in pf.guarded(store_faults.failed_batch_is_a_partial_backup)
