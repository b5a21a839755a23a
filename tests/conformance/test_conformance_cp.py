"""The CP load-back planner bound into the reference HiCache, against the spec (issue 9):
the correct implementation conforms on cp-planner-2r; with the local-clock tie-break
switched on in the implementation only, the suite finds the divergence, shrinks it, writes
it, and the written trace replays (lock-step and real gloo ranks, and `tiercheck replay`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tiercheck.cli import main
from tiercheck.conformance import machine
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.runner import replay
from tiercheck.impl.hicache import metrics as mt
from tiercheck.models import model_file
from tiercheck.models.trace import read_trace
from tiercheck.spec.action import act

VARIANT = "planner-local-tiebreak"
# The checker's shortest counterexample for variants/planner-local-tiebreak (tiercheck
# check ... --out): 14 steps (three inserts with their backups, an evict, one local
# access, the load-back whose plan differs).
CHECKER_SHORTEST = 14


def _spec_cfg():
    return replace(model_file.load(f"variants/{VARIANT}").config, variants=frozenset())


class _CountingDriver(ReferenceDriver):
    """Counts the load-backs that evicted device victims (what the run exercised)."""

    planned = 0

    def _evicted(self):
        return sum(m.get(mt.DEVICE_EVICTED, 0) for m in self.group.metrics())

    def apply(self, action):
        before = self._evicted() if action.name == "load_back" else None
        super().apply(action)
        if before is not None and self._evicted() > before:
            _CountingDriver.planned += 1


def test_correct_reference_conforms_with_the_cp_planner():
    cfg = model_file.load("cp-planner-2r").config
    assert cfg.cp_planner and cfg.ranks == 2
    stats = {}
    _CountingDriver.planned = 0
    machine.run(lambda: _CountingDriver(cfg), examples=20, steps=40, seed=3, stats=stats)
    assert stats["examples"] >= 20
    assert _CountingDriver.planned >= 2  # load-backs that evicted planned victims


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    """One conformance run of the variant, as the kill matrix runs it (label and seed fix
    Hypothesis's draws: this pair reaches the divergence at example 6; over seeds 0-5 it
    took 6 to 119 examples, one seed needed more than 120). The shrink budget is wall-clock
    seconds, spent whole here (its last phase searches the spec for shorter routes); the
    shrink drops the steps after the failure first, so a budget cut short on a loaded
    machine still leaves a trace that ends at the divergence."""
    out = tmp_path_factory.mktemp("cp-cex")
    stats = {}
    with pytest.raises(machine.ConformanceFailure) as err:
        machine.run(driver_factory("reference", _spec_cfg(), {VARIANT}), examples=200, steps=40, seed=1,
                    record_dir=str(out), label=VARIANT, stats=stats, shrink_budget=15)
    stats["error"] = str(err.value)
    return stats


def test_local_clock_tiebreak_is_caught_and_shrunk(found):
    shrunk = found["shrunk_actions"]
    assert CHECKER_SHORTEST <= len(shrunk) <= found["steps_before_shrink"]
    assert shrunk[-1].name == "load_back"  # the plan is where the ranks part
    assert any(a.name == "local_access" for a in shrunk)
    assert "load_back" in found["error"] and "device" in found["message"]
    assert read_trace(found["file"]).actions == shrunk


def test_counterexample_replays_only_with_the_bug(found):
    actions = read_trace(found["file"]).actions
    cfg = _spec_cfg()
    outcomes = {}
    for variants in ({VARIANT}, frozenset()):
        driver = ReferenceDriver(cfg, variants)
        try:
            outcomes[bool(variants)] = replay(driver, actions)
        finally:
            driver.close()
    bad = outcomes[True].mismatch
    assert bad is not None and bad.step == len(actions) - 1 and bad.kind == "state"
    # A real divergence between the ranks, not just a disagreement with the spec.
    assert bad.actual.ranks[0].nodes != bad.actual.ranks[1].nodes
    assert outcomes[False].mismatch is None


def test_replay_command_shows_the_divergence(found, capsys):
    """What a user runs: tiercheck replay TRACE --impl reference --variant planner-local-tiebreak."""
    assert main(["replay", found["file"], "--impl", "reference", "--variant", VARIANT]) == 1
    out = capsys.readouterr().out
    n = len(found["shrunk_actions"])
    assert f"disagrees with the spec at step {n}/{n}: load_back" in out
    assert main(["replay", found["file"], "--impl", "reference"]) == 0
    assert "implementation and spec agree" in capsys.readouterr().out


@pytest.mark.gloo
def test_counterexample_diverges_on_real_gloo_ranks(found):
    actions = read_trace(found["file"]).actions
    results = {}
    for backend in ("lockstep", "gloo"):
        driver = ReferenceDriver(_spec_cfg(), {VARIANT}, backend=backend)
        try:
            out = replay(driver, actions)
        finally:
            driver.close()
        results[backend] = (out.mismatch.step, out.mismatch.message, out.mismatch.actual)
    assert results["lockstep"] == results["gloo"]


def _backup(ranks):
    return [act("write_dma_done", rank=r) for r in range(ranks)] + [act("writing_check")]


def _replay_plans(name, steps):
    """Replay ``steps(model)`` on the reference implementation against the spec; returns
    the mismatch (None: conforms) and each rank's last CP plan (token paths)."""
    driver = ReferenceDriver(model_file.load(name).config)
    try:
        out = replay(driver, steps(driver.model))
        return out.mismatch, [s["cp_last_plan"] for s in driver.group.snapshot(store=False)]
    finally:
        driver.close()


def test_issue_example_conforms_and_evicts_the_admitted_ancestor():
    """Issue 15: after inserting and backing up (1), (1,2), (3), (4,5) with 4/5 evicted,
    load_back(4/5) evicts 1/2 and its admitted ancestor 1 in the spec and in the
    implementation (the spec before seed 004's planner evicted 1/2 and 3)."""
    def steps(m):
        i = m.pages.index
        return [act("insert", req=3), *_backup(1), act("evict", node=i[(4, 5)]),
                act("insert", req=0), *_backup(1), act("insert", req=1), *_backup(1),
                act("insert", req=2), *_backup(1), act("load_back", node=i[(4, 5)])]

    mismatch, plans = _replay_plans("cp-planner-ancestors-1r", steps)
    assert mismatch is None
    assert plans == [[(1, 2), (1,)]]


def test_lru_tie_break_conforms_and_evicts_the_least_recently_used():
    """cp-planner-lru-1r: (1) evicted, (2) and (3) backed up, then (2) re-inserted; the
    planner's tie-break is the replicated LRU order in the spec and the implementation."""
    def steps(m):
        i = m.pages.index
        return [act("insert", req=0), *_backup(1), act("evict", node=i[(1,)]), act("insert", req=1),
                act("insert", req=2), act("write_dma_done", rank=0), *_backup(1), act("insert", req=1),
                act("load_back", node=i[(1,)])]

    mismatch, plans = _replay_plans("cp-planner-lru-1r", steps)
    assert mismatch is None
    assert plans == [[(3,)]]


def test_two_lanes_with_a_shared_ancestor_conform():
    """cp-planner-lanes-2r: loading 4 lacks a lane-0 page; 1/2 (lane 1) is planned for
    ancestor-unlock credit, then the shared ancestor 1 -- on both ranks, as in the spec."""
    def steps(m):
        i = m.pages.index
        return [act("insert", req=2), *_backup(2), act("evict", node=i[(4,)]),
                act("insert", req=0), *_backup(2), act("insert", req=1), *_backup(2),
                act("load_back", node=i[(4,)])]

    mismatch, plans = _replay_plans("cp-planner-lanes-2r", steps)
    assert mismatch is None
    assert plans == [[(1, 2), (1,)]] * 2


def test_random_runs_conform_on_the_lanes_model():
    cfg = model_file.load("cp-planner-lanes-2r").config
    stats = {}
    _CountingDriver.planned = 0
    machine.run(lambda: _CountingDriver(cfg), examples=15, steps=40, seed=5, stats=stats)
    assert _CountingDriver.planned >= 1


def test_owner_lanes_count_pages_not_tokens():
    """Pages of two tokens under two owner lanes: the first page of a path is on lane 0.
    The reference counted the path's tokens (lane 1, whose share of a 1-page pool is 0) and
    refused this load-back; found by conforming a random model."""
    from tiercheck.spec.config import Config

    cfg = Config(requests=((1, 1, 3), (2, 1, 4)), device_pages=1, host_pages=3, page_size=2,
                 cp_planner=True, cp_lanes=2)
    trace = [act("insert", req=0), act("write_dma_done", rank=0), act("writing_check"),
             act("evict", node=0), act("load_back", node=0)]
    driver = ReferenceDriver(cfg)
    try:
        out = replay(driver, trace)
    finally:
        driver.close()
    assert out.mismatch is None and out.steps == len(trace)
