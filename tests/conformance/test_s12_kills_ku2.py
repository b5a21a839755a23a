"""The units of tiercheck.conformance.s12_kills_ku2 (session 14), each run as the mutation
suite runs it, against the seed-12 survivor it kills (recompiled from its source with the
mutant's one edit): the unit passes on the implementation and fails with the mutant in.
And the facts three equivalence entries of benchmarks/mutation_equivalent.txt rest on,
checked on runs that reach the mutated lines."""

from __future__ import annotations

from tiercheck.conformance import s12_kills_ku2 as ku
from tiercheck.conformance import situations as st
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.generated import load_tour
from tiercheck.conformance.runner import replay
from tiercheck.impl.hicache.cp_load import CpLoadBack
from tiercheck.impl.hicache.eviction import Eviction
from tiercheck.impl.hicache.rank import HiCacheRank
from tiercheck.impl.hicache.state import RankBase
from tiercheck.impl.hicache.tree import ABSENT, RadixTree

from mutant_helpers import load_mutation_suite, recompiled

MS = load_mutation_suite("bench_mutation_suite_kU2")
UNITS = dict(MS.s12_kills_ku2_units())


def test_the_units_are_in_the_mutation_suite():
    assert list(UNITS) == [f"situation {s.name}" for s in ku.SITUATIONS + ku.TWIN_SITUATIONS]


def _unit(sit) -> bool:
    return MS.run_unit(sit.name, UNITS[f"situation {sit.name}"])


def test_a_load_back_short_of_one_page_agrees():
    assert _unit(ku.SITUATIONS[0])


def test_a_shortfall_by_shift_is_caught(monkeypatch, capsys):
    # cp_load.py:75: 3 >> 2 == 0, so the planner is not asked and the load is refused
    # where the spec's planner deletes a leaf and loads.
    monkeypatch.setattr(CpLoadBack, "lane_deficits", recompiled(
        CpLoadBack.lane_deficits, "len(lanes) - self.device_pool.available()",
        "len(lanes) >> self.device_pool.available()")["lane_deficits"])
    assert not _unit(ku.SITUATIONS[0])
    assert "device loading->absent" in capsys.readouterr().out


def test_an_insert_below_a_loading_node_agrees_with_the_bug_on_both_sides():
    assert _unit(ku.TWIN_SITUATIONS[0])


def test_a_loading_node_taken_for_a_device_leaf_is_caught(monkeypatch, capsys):
    # eviction.py:19: dev > "resident" never holds, so the loading parent the bug pushed
    # passes as a device leaf and is demoted with its copy in flight.
    monkeypatch.setattr(Eviction, "is_device_leaf", recompiled(
        Eviction.is_device_leaf, "if node.dev != RESIDENT or", "if node.dev > RESIDENT or")["is_device_leaf"])
    assert not _unit(ku.TWIN_SITUATIONS[0])
    assert "device loading->absent" in capsys.readouterr().out


# -- what the equivalence entries rest on ----------------------------------------------


def _replayed(sit, variants=()) -> None:
    cfg, actions, probes = st.trace(sit)
    driver = driver_factory("reference", cfg, set(variants))()
    try:
        replay(driver, actions, expect_disabled=probes)
    finally:
        driver.close()


LRU_LOCAL = [s for s in st.TWIN_SITUATIONS if s.model == "variants/lru-local-clock"]


def test_every_victim_candidate_is_on_the_rank_wall_clock(monkeypatch):
    """state.py:281's default (-1 -> 1) is never read: every node the victim order ranks
    is on the wall (tree.add touches it, a split inserts its upper half)."""
    seen, missing = [], []
    order = RankBase._order

    def spy(self, node):
        if self.cfg.victim_order != "path" and self.cfg.has("lru-local-clock"):
            (seen if node.end in self.wall else missing).append(node.end)
        return order(self, node)

    monkeypatch.setattr(RankBase, "_order", spy)
    for sit in LRU_LOCAL:
        _replayed(sit, {"lru-local-clock"})
    assert MS.run_unit("lru-local-clock", dict(MS.variant_units())["variant lru-local-clock"])
    assert seen and not missing


def test_every_removed_node_hangs_from_its_parent(monkeypatch):
    """tree.py:187's `and` -> `or` changes nothing: remove() only takes nodes of the tree,
    each its parent's child at its start page (never the root, never a detached node)."""
    calls, odd = [], []
    remove = RadixTree.remove

    def spy(self, node):
        calls.append(node)
        if not (node.parent is not None and node.parent.children.get(node.start) is node):
            odd.append(node)
        return remove(self, node)

    monkeypatch.setattr(RadixTree, "remove", spy)
    names = ("an evict above a host-only node a backup still reads", "host eviction stops at the need",
             "an insert that evicts its shortfall")
    for sit in st.SITUATIONS:
        if sit.name in names:
            _replayed(sit)
    for name in ("lru-evicts-locked-parent", "orphan-host-subtree"):
        assert MS.run_unit(name, dict(MS.variant_units())[f"variant {name}"])
    assert len(calls) >= 3 and not odd


def test_no_device_copy_below_an_evicted_node(monkeypatch):
    """rank.py:55's break -> continue changes nothing: below the first node of the walk
    without a device copy every node walked is without one too (a device copy's
    ancestors hold one), so continuing skips them all."""
    walks, bad = [], []
    lock = HiCacheRank.lock_running

    def spy(self, tokens):
        dev = [n.dev != ABSENT for n, _k in self.tree.walk(self.reg.hashes(self.reg.whole_pages(tokens)))]
        walks.append(dev)
        if False in dev and any(dev[dev.index(False):]):
            bad.append(dev)
        return lock(self, tokens)

    monkeypatch.setattr(HiCacheRank, "lock_running", spy)
    mf, traces = load_tour(MS.TOURS / "request-locks-evicts-1r" / "tour.json")
    for actions, probes in traces:
        driver = driver_factory("reference", mf.config)()
        try:
            replay(driver, actions, expect_disabled=probes)
        finally:
            driver.close()
    assert any(False in w for w in walks) and not bad
