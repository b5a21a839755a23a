"""The units of tiercheck.conformance.s12_kills_b (session 13), each against the seed-12
survivor it kills, recompiled from its source with the mutant's one edit: the unit passes
on the implementation and fails with the mutant in."""

from __future__ import annotations

from dataclasses import replace

from tiercheck.conformance import s12_kills_b as kb
from tiercheck.conformance import situations as st
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.impl.hicache import prefetch as prefetch_module
from tiercheck.impl.hicache.observe import Inspect
from tiercheck.impl.hicache.prefetch import Prefetch
from tiercheck.impl.hicache.tree import RadixTree
from tiercheck.models import model_file

from mutant_helpers import load_mutation_suite, recompiled


def _mutate(monkeypatch, cls, name: str, old: str, new: str) -> None:
    monkeypatch.setattr(cls, name, recompiled(getattr(cls, name), old, new)[name])


def test_the_units_are_in_the_mutation_suite():
    names = [n for n, _ in load_mutation_suite("bench_mutation_suite_kS2").s12_kills_b_units()]
    assert names == [f"situation {s.name}" for s in kb.SITUATIONS] + [f"fault {n}" for n, _ in kb.scenarios()]


def _long_request_verdict() -> str:
    return st.check(kb.SITUATIONS[0], lambda cfg: driver_factory("reference", cfg))


def test_a_request_ending_inside_a_long_node_agrees():
    assert _long_request_verdict() == ""


def test_a_walk_comparing_its_position_by_identity_is_caught(monkeypatch):
    # tree.py:123: past 256 the position and the request's length are different int
    # objects, so the walk reads past the request's last page.
    _mutate(monkeypatch, RadixTree, "walk", "pos + k < len(hashes)", "pos + k is not len(hashes)")
    assert "IndexError" in _long_request_verdict()


def test_a_second_prefetch_checked_with_its_read_held_agrees():
    assert kb.second_prefetch_read_held() == ""


def test_a_read_result_settling_the_head_of_the_queue_is_caught(monkeypatch):
    # prefetch.py:113: the held read's result matches the first (settled) prefetch, the
    # second is never settled; the rank then waits STORAGE_TIMEOUT (shortened here) and
    # gives up with that prefetch still queued, where the spec terminated it.
    monkeypatch.setattr(prefetch_module, "STORAGE_TIMEOUT", 8.0)
    _mutate(monkeypatch, Prefetch, "_settle", "o.op_id == res.op_id", "o.op_id <= res.op_id")
    got = kb.second_prefetch_read_held()
    assert "with the read held" in got and '"request":1' in got


def test_a_node_without_a_usable_copy_is_named():
    assert kb.lost_copy_named() == ""


def test_a_self_check_reading_host_absent_as_usable_is_caught(monkeypatch):
    # observe.py:122: host > "resident" holds only for "writing", so a node with no copy
    # at all ("absent" on both) goes unreported.
    _mutate(monkeypatch, Inspect, "verify", 'n.host != "resident":', 'n.host > "resident":')
    assert "does not name the node without a copy" in kb.lost_copy_named()


def test_the_lost_copy_node_has_no_host_copy_before_the_fault():
    """What the observe.py:122 kill rests on: under write_through_selective the first
    insert's node is on the device only (host "absent", not "writing")."""
    driver = ReferenceDriver(replace(model_file.load("wt-1r").config, policy="write_through_selective"))
    try:
        driver.apply(next(a for a in driver.model.actions(driver.model.init_states()[0]) if a.name == "insert"))
        assert [(n.dev, n.host) for n in driver.group.ranks[0].tree.nodes()] == [("resident", "absent")]
    finally:
        driver.close()
