"""Conformance that reaches every action: swarm/coverage-steered choice, the budgeted
default campaign, shrinking to the shortest disagreement, and failure reports that
point at the bug (an implementation frame; the step that last wrote a wrong page)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import torch

from tiercheck.conformance import defaults, machine
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.byte_origin import annotate
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.runner import replay
from tiercheck.conformance.shortest import shortest_disagreement
from tiercheck.conformance.tour import build_tour
from tiercheck.models import model_file
from tiercheck.spec.action import Action
from tiercheck.spec.model import Model


def _steps(strategy):
    cfg = model_file.load("wt-prefetch-2r").config
    stats = {}
    machine.run(driver_factory("spec", cfg), examples=40, steps=50, seed=0, stats=stats, strategy=strategy)
    return stats["coverage"].steps


def test_steered_choice_reaches_the_actions_the_index_rule_starves():
    old, new = _steps("index"), _steps("coverage")
    share = lambda c, n: c[n] / sum(c.values())  # noqa: E731
    assert share(new, "insert") < share(old, "insert")
    assert new["prefetch_io"] > old["prefetch_io"] and new["check_prefetch_progress"] > 0


def test_budgeted_campaign_gives_every_default_model_examples():
    res = defaults.run_campaign(lambda cfg: driver_factory("spec", cfg), budget=6.0)
    assert set(res) == {d.label for d in defaults.DEFAULT_MODELS}
    assert all(r.examples > 0 and r.failure is None for r in res.values())


def test_shrinks_a_late_symptom_to_the_shortest_disagreement():
    """split-during-backup found as a drain-round difference 8 steps in; the bug shows
    5 steps in, at the split itself."""
    name = "split-during-backup"
    cfg = dict(defaults.default_model_files())["wts-mirror-1r"].config
    a = lambda n, **p: Action(n, tuple(p.items()))  # noqa: E731
    found = [a("insert", req=0), a("insert", req=0), a("insert", req=1), a("write_dma_done", rank=0),
             a("writing_check"), a("evict", node=1), a("storage_backup_done", rank=0, pages=2),
             a("drain_storage_control_queues")]
    factory = driver_factory("spec", cfg, {name})
    assert replay(factory(), found).mismatch is not None
    shortest = shortest_disagreement(Model(cfg), Model(replace(cfg, variants=frozenset({name}))))
    shrunk, outcome = machine.shrink_failure(factory, Model(cfg), found, 30.0)
    assert outcome.mismatch is not None and len(shrunk) <= len(shortest) + 1 < len(found)


class _FreesUnderTheTree(ReferenceDriver):
    """Fault injection: the device slots are freed behind the tree's back before an evict."""

    def apply(self, action):
        if action.name == "evict":
            pool = self.group.ranks[0].device_pool
            pool.free(pool.allocator.allocated_slots())
        super().apply(action)


def test_a_crash_names_the_implementation_frame_and_the_action():
    cfg = model_file.load("wt-1r").config
    acts = [Action("insert", (("req", 0),)), Action("write_dma_done", (("rank", 0),)), Action("writing_check"),
            Action("evict", (("node", 1),))]
    driver = _FreesUnderTheTree(cfg)
    try:
        mm = replay(driver, acts).mismatch
    finally:
        driver.close()
    assert mm.kind == "error" and mm.step == 3
    assert "impl/pools.py:" in mm.message and "in free()" in mm.message and "raised by evict(node=1)" in mm.message


def test_wrong_bytes_name_pool_page_and_the_step_that_wrote_them():
    cfg = model_file.load("wt-1r").config
    acts = [Action("insert", (("req", 0),)), Action("write_dma_done", (("rank", 0),)), Action("writing_check")]
    driver = ReferenceDriver(cfg)
    try:
        out = replay(driver, acts)
        assert out.mismatch is None
        host = driver.group.ranks[0].host_pool
        slot = host.allocator.allocated_slots()[0]
        host.data[host.index([slot])] += torch.ones_like(host.data[host.index([slot])])  # fault: a bit flip
        problems = driver.verify()
    finally:
        driver.close()
    msg = annotate(driver.model, acts, out.states, "; ".join(problems))
    assert "wrong bytes in the host pool: page 1 (slot" in msg
    assert "last written by step" in msg


def test_a_model_too_big_for_a_full_tour_gets_a_bounded_one():
    model = Model(model_file.load("wt-mirror-2r").config)
    tour = build_tour(model, limit=300, budget=400, bounded=True)
    assert tour.bounded and tour.traces
    for tr in tour.traces:
        assert replay(driver_factory("spec", model.cfg)(), list(tr.actions),
                      expect_disabled=set(tr.probes)).mismatch is None


def test_conform_without_a_model_runs_the_default_set_and_prints_coverage(tmp_path):
    out = subprocess.run([sys.executable, "-m", "tiercheck", "conform", "--impl", "spec", "--budget", "4",
                          "--out", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "coverage (steps per action" in out.stdout and "insert" in out.stdout
    for d in defaults.DEFAULT_MODELS:
        assert d.label in out.stdout
