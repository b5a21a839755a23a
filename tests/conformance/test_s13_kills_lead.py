"""Seed-13 survivors killed by the lead in session 15.

group.py:206 `name == "storage_backup_done"` -> `name is ...`: a step read from a file (a
tour, a counterexample) carries a name equal to the literal but not the same object (JSON
strings are not interned), so dispatch by identity falls through to the generic
`getattr(self, name)(rank)` and drops the step's `pages`: a partial ack becomes a whole
one. Only a trace from disk with a partial ack tells the two apart; the shipped
wt-storage-1r tour (tests/generated/wt-storage-1r) has them, the other tours none (no
partial_storage fault), and steps the spec makes carry the interned literal.

storage_path.py:225 `got * page_size` -> `got ** page_size`, prefetch.py:35 `k ==
len(hashes)` -> `k is len(hashes)` and write_path.py:56 `need - free` -> `need << free`: the
situations "a one-page mirror released, two-token pages", "a prefetch of a 257-page request
cached whole" and "an insert evicting its shortfall beside a free page"
(conformance/situations.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.generated import load_tour
from tiercheck.conformance.runner import replay
from tiercheck.impl.hicache.group import HiCacheGroup
from tiercheck.spec.model import Model

from mutant_helpers import load_mutation_suite, recompiled

TOUR = Path(__file__).resolve().parents[1] / "generated" / "wt-storage-1r" / "tour.json"


def _partial_ack_trace():
    """The first trace with an ack that stores fewer pages than its backup has."""
    mf, traces = load_tour(TOUR)
    m = Model(mf.config)
    for actions, probes in traces:
        s = m.init_states()[0]
        for i, a in enumerate(actions):
            if i in probes:
                continue
            if a.name == "storage_backup_done" and a["pages"] == 0:
                return mf.config, actions, probes
            s = m.next_state(s, a)
    raise AssertionError("no partial ack in the tour")


def _replay(cfg, actions, probes):
    driver = driver_factory("reference", cfg)()
    try:
        return replay(driver, actions, expect_disabled=probes).mismatch
    finally:
        driver.close()


def test_the_tour_replays_partial_acks_read_from_json():
    cfg, actions, probes = _partial_ack_trace()
    ack = next(a for a in actions if a.name == "storage_backup_done" and a["pages"] == 0)
    assert ack.name == "storage_backup_done" and ack.name is not sys.intern("storage_backup_done")
    assert _replay(cfg, actions, probes) is None


def test_dispatch_by_identity_is_caught(monkeypatch):
    made = recompiled(HiCacheGroup.apply, 'if name == "storage_backup_done":', 'if name is "storage_backup_done":')
    monkeypatch.setattr(HiCacheGroup, "apply", made["apply"])
    mm = _replay(*_partial_ack_trace())
    assert mm is not None and mm.kind == "state", mm
    assert 'backup_acks [{"reported":0,"stored":0}]' in mm.message


def test_the_tour_is_in_the_mutation_suite():
    names = [n for n, _ in load_mutation_suite("bench_mutation_suite_s13_tour").tour_units()]
    assert "tour wt-storage-1r 0" in names


def test_a_one_page_mirror_release_counts_its_tokens(monkeypatch):
    """storage_path.py:225 `got * page_size` -> `got ** page_size` (seed 13): equal for one-token
    pages and for two pages of two tokens; the situation releases one two-token page."""
    from tiercheck.conformance import situations as st
    from tiercheck.impl.hicache.storage_path import StoragePath

    sit = next(x for x in st.SITUATIONS if x.name == "a one-page mirror released, two-token pages")
    verdict = lambda: st.check(sit, lambda cfg: driver_factory("reference", cfg))  # noqa: E731
    assert verdict() == ""
    made = recompiled(StoragePath._execute_plan, "got * self.layout.page_size", "got ** self.layout.page_size")
    monkeypatch.setattr(StoragePath, "_execute_plan", made["_execute_plan"])
    got = verdict()
    assert "counter tiercheck:mirror_released_tokens_total went up by 1 in drain_storage_control_queues, " \
           "the spec's state change says 2" in got, got


def test_a_prefetch_of_a_257_page_request_cached_whole_is_refused(monkeypatch):
    """prefetch.py:35 `k == len(hashes)` -> `k is len(hashes)` (seed 13): past 256 pages the two
    ints are distinct objects, so the mutant looks for an anchor past the request's end."""
    from tiercheck.conformance import situations as st
    from tiercheck.impl.hicache.prefetch import Prefetch

    sit = next(x for x in st.SITUATIONS if x.name == "a prefetch of a 257-page request cached whole")
    verdict = lambda: st.check(sit, lambda cfg: driver_factory("reference", cfg))  # noqa: E731
    cfg, actions, probes = st.trace(sit)
    assert probes == (len(actions) - 1,) and len(cfg.requests[0]) == 257
    assert verdict() == ""
    made = recompiled(Prefetch._anchor, "if k == len(hashes):", "if k is len(hashes):")
    monkeypatch.setattr(Prefetch, "_anchor", made["_anchor"])
    got = verdict()
    assert got.startswith(f"error at step {len(actions) - 1} ") and "IndexError" in got, got
    assert "raised by prefetch_from_storage(req=0)" in got


def test_an_insert_evicts_its_shortfall_not_more(monkeypatch):
    """write_path.py:56 `(need - available)` -> `(need << available)` (seed 13): an insert with
    one free page and two to place evicts one leaf; the mutant asks for 2 << 1 pages."""
    from tiercheck.conformance import situations as st
    from tiercheck.impl.hicache.write_path import WritePath

    sit = next(x for x in st.SITUATIONS if x.name == "an insert evicting its shortfall beside a free page")
    verdict = lambda: st.check(sit, lambda cfg: driver_factory("reference", cfg))  # noqa: E731
    assert verdict() == ""
    made = recompiled(WritePath.insert, "(need - self.device_pool.available())",
                      "(need << self.device_pool.available())")
    monkeypatch.setattr(WritePath, "insert", made["insert"])
    got = verdict()
    assert got.startswith("state at step 5 of 6:") and "device resident->absent" in got, got


def test_a_split_with_a_two_page_upper_half_agrees_with_the_bug_on_both_sides(monkeypatch, capsys):
    """write_path.py:101 `upper.dev_slots[-1:]` -> `[-2:]` under split-slice-off-by-one (seed 13):
    the bug's slice takes the upper half's last slot; with an upper half of one page (the other
    twin situation) the two slices are the same."""
    from tiercheck.conformance import situations as st
    from tiercheck.impl.hicache.write_path import WritePath

    ms = load_mutation_suite("bench_mutation_suite_s13_lead")
    units = dict(ms.situation_units())
    name = "situation a split with an upper half of two pages"
    assert ms.run_unit(name, units[name])
    made = recompiled(WritePath._split, "(upper.dev_slots[-1:] + node.dev_slots)[:-1]",
                      "(upper.dev_slots[-2:] + node.dev_slots)[:-1]")
    monkeypatch.setattr(WritePath, "_split", made["_split"])
    assert not ms.run_unit(name, units[name])
    assert "the reference with the bug leaves the spec with it" in capsys.readouterr().out
    assert any(s.name == name.removeprefix("situation ") for s in st.TWIN_SITUATIONS)
