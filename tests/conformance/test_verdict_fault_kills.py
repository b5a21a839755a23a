"""Four survivors of the seed-11 mutation sample killed by the fault units of
tiercheck.conformance.verdict_faults (session 13), each against its mutant, recompiled from
the method's source with cosmic-ray's one edit (lines of c7fdaf7):

- gloo.py:176 `not isinstance` -> `isinstance`: the driver reports the peer's collective
  timeout instead of the rank's own error that caused it;
- group.py:270 `rank < world_size` -> `!=`: a one-rank step for rank 3 of 2 gets an
  IndexError instead of the one-line refusal;
- load_path.py:91 `verify_loads` negated: a load-back that delivered wrong bytes is acked
  with verify_loads on (and verified with it off);
- observe.py:167 `ack is None` -> `is not None`: the store self-check skips the pages
  whose ack is not drained yet instead of those still being written.

Each unit passes on the unmutated code (the first test of each pair), as
benchmarks/mutation_suite.py runs it (`--unit "fault ..."`).
"""

from __future__ import annotations

import traceback

import pytest

from tiercheck.conformance import verdict_faults as vf
from tiercheck.conformance.crash import describe_crash, remote_frames
from tiercheck.conformance.process_faults import guarded
from tiercheck.impl.hicache.gloo import GlooHiCache
from tiercheck.impl.hicache.group import LockstepHiCache
from tiercheck.impl.hicache.load_path import LoadPath
from tiercheck.impl.hicache.observe import Inspect

from mutant_helpers import load_mutation_suite, recompiled


def test_the_four_units_are_fault_units_of_the_mutation_suite():
    names = [n for n, _ in load_mutation_suite("bench_mutation_suite_kB").fault_units()]
    for name, _ in vf.scenarios():
        assert f"fault {name}" in names


# -- gloo.py:176: the root cause among failing ranks ---------------------------------------

@pytest.mark.gloo
def test_the_root_cause_of_a_gloo_failure_is_reported_at_its_rank_frame():
    assert guarded(vf.gloo_root_cause) == ""


@pytest.mark.gloo
def test_a_driver_reporting_the_collective_timeout_instead_is_caught(monkeypatch):
    made = recompiled(GlooHiCache._call, "if not isinstance(f[1], CollectiveError)",
                      "if isinstance(f[1], CollectiveError)")
    monkeypatch.setattr(GlooHiCache, "_call", made["_call"])
    got = guarded(vf.gloo_root_cause)
    assert got.startswith("the root cause is not reported at rank 1's own frame: CollectiveTimeoutError: "
                          "rank 0: collective 'prefetch_hit_query'"), got


def _raise_in(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 -- the exception is the test's input
        return exc
    raise AssertionError("no exception")


def test_a_crash_report_reads_the_frames_of_the_gloo_rank_that_raised():
    # As GlooHiCache._call ships it: the rank's formatted traceback as a note, its
    # context's traceback first (only the error's own frames count).
    def inner():
        try:
            raise KeyError("context")
        except KeyError:
            raise ValueError("own")

    exc = _raise_in(inner)
    tb = "".join(traceback.format_exception(exc))
    shipped = ValueError("own")
    shipped.add_note(f"(raised on gloo rank 1)\n{tb}".rstrip())
    rank, frames = remote_frames(shipped)
    assert rank == 1 and [f.name for f in frames] == ["_raise_in", "inner"]
    report = describe_crash(shipped, "insert(req=0)")
    assert report.startswith("ValueError: own at ") and " in inner() on gloo rank 1, raised by insert(req=0)" in report
    assert remote_frames(exc) == (None, [])  # an error of this process: its own traceback
    assert "on gloo rank" not in describe_crash(exc, "insert(req=0)")


# -- group.py:270: a rank outside the lock-step group ---------------------------------------

def test_a_rank_outside_the_lockstep_group_is_refused_by_name():
    assert guarded(vf.out_of_range_rank) == ""


def test_a_group_indexing_past_its_ranks_is_caught(monkeypatch):
    made = recompiled(LockstepHiCache._local, "0 <= rank < self.world_size", "0 <= rank != self.world_size")
    monkeypatch.setattr(LockstepHiCache, "_local", made["_local"])
    assert guarded(vf.out_of_range_rank) == (
        "a step for rank 3 of 2 is not refused by name: IndexError: list index out of range")


# -- load_path.py:91: a load-back that delivered wrong bytes -------------------------------

def test_a_load_back_of_corrupted_host_bytes_is_refused_with_verify_loads():
    assert guarded(vf.corrupted_load_back) == ""


def test_a_load_back_verified_only_with_verify_loads_off_is_caught(monkeypatch):
    made = recompiled(LoadPath._ack_loads, "if self.cfg.verify_loads:", "if not self.cfg.verify_loads:")
    monkeypatch.setattr(LoadPath, "_ack_loads", made["_ack_loads"])
    assert guarded(vf.corrupted_load_back) == (
        "with verify_loads on, a load-back that delivered wrong bytes was acked (loading_check: None)")


# -- observe.py:167: the store self-check before an ack is drained --------------------------

def test_a_store_page_rewritten_before_its_ack_is_drained_fails_the_self_check():
    assert guarded(vf.store_rewritten_before_drain) == ""


def test_a_self_check_skipping_acked_pages_is_caught(monkeypatch):
    made = recompiled(Inspect._verify_store, "if o.ack is None", "if o.ack is not None")
    monkeypatch.setattr(Inspect, "_verify_store", made["_verify_store"])
    assert guarded(vf.store_rewritten_before_drain) == (
        "a page rewritten in the store before its ack was drained is not reported: []")
