"""The reference implementation against the spec: it conforms; with any catalogued bug
switched on in the implementation only, the suite fails (the kill matrix); a divergence
found in lock-step replays on real gloo ranks with the same divergence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kill_helpers import kill
from tiercheck.conformance import machine
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.runner import replay
from tiercheck.models import model_file
from tiercheck.models.trace import read_trace
from tiercheck.spec.variants import VARIANTS

HICACHE_VARIANTS = sorted(n for n, v in VARIANTS.items() if v.impl)  # planner-local-tiebreak: load_back's CP planner (cp_planner)


@pytest.mark.parametrize("name", HICACHE_VARIANTS)
def test_kill_matrix(name, tmp_path):
    _cfg, stats = kill("reference", name, tmp_path, examples=200, shrink_budget=8)
    assert read_trace(stats["file"]).actions == stats["shrunk_actions"]


@pytest.mark.parametrize("examples", [
    100,
    pytest.param(500, marks=pytest.mark.slow),  # the long run: about 5 minutes on a loaded CI machine
])
def test_correct_reference_passes_a_substantial_two_rank_run(examples):
    """Many examples x up to 50 steps on two lock-step ranks (mirror release, partial backups)."""
    cfg = model_file.load("wt-mirror-2r").config
    stats = {}
    machine.run(driver_factory("reference", cfg), examples=examples, steps=50, seed=11, stats=stats)
    assert stats["examples"] >= examples


@pytest.mark.parametrize("model", ["wb-reclaim-2r", "wt-prefetch-2r", "wt-alloc-2r"])
def test_correct_reference_conforms_two_ranks(model):
    cfg = model_file.load(model).config
    machine.run(driver_factory("reference", cfg), examples=60, steps=50, seed=11)


@pytest.mark.gloo
def test_lockstep_divergence_replays_on_real_gloo_ranks(tmp_path):
    mf = model_file.load("variants/release-no-consensus")
    cfg = replace(mf.config, variants=frozenset())
    stats = {}
    with pytest.raises(machine.ConformanceFailure):
        machine.run(driver_factory("reference", cfg, {"release-no-consensus"}), examples=200, steps=40, seed=1,
                    record_dir=str(tmp_path), label="rnc", stats=stats, shrink_budget=15)
    actions = read_trace(stats["file"]).actions
    results = {}
    for backend in ("lockstep", "gloo"):
        driver = ReferenceDriver(cfg, {"release-no-consensus"}, backend=backend)
        try:
            out = replay(driver, actions)
        finally:
            driver.close()
        assert out.mismatch is not None
        results[backend] = (out.mismatch.step, out.mismatch.message, out.mismatch.actual)
    assert results["lockstep"] == results["gloo"]
    # The ranks really diverged (not just a disagreement with the spec).
    actual = results["gloo"][2]
    assert actual.ranks[0].nodes != actual.ranks[1].nodes


def test_reference_driver_checks_the_metrics_against_its_pools():
    """The adapter's verify also checks each rank's metrics: the host-pool gauges against
    the host pool, counters whole, never going down (a fault injected into one rank's
    counters is reported, a correct run reports nothing)."""
    cfg = model_file.load("wt-alloc-2r").config
    driver = ReferenceDriver(cfg)
    try:
        s = driver.model.init_states()[0]
        for _ in range(4):
            a = driver.model.actions(s)[0]
            s = driver.model.next_state(s, a)
            driver.apply(a)
            driver.state()
            assert driver.verify() == []
        counters = driver.group.ranks[1].metrics.counters
        key = next(iter(counters))
        counters[key] = counters[key] - 1
        assert any(f"rank 1: counter {key}" in p for p in driver.verify())
        counters[key] = float(counters[key] + 1)
        assert any(f"rank 1: counter {key}" in p for p in driver.verify())
    finally:
        driver.close()
