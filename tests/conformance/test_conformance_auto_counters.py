"""The reference adapter's value checks and the auto completion mode.

- counters: each step's increment of every counter the reference keeps equals what the
  spec's state change says (tiercheck.conformance.counters); a fault in one rank's
  counting is reported;
- match_prefix: every rank's answer equals the spec tree's (tiercheck.conformance.serving);
- return values of the group's steps (pages allocated, freed, submitted; rounds' counts);
- auto mode (tiercheck.conformance.auto_mode): the implementation completes its own copies
  and storage operations, check_events runs the rounds, flush drains; seeded walks agree
  with the spec, and a catalogued bug is caught there too.
"""

from __future__ import annotations

import random

import pytest

from tiercheck.conformance import auto_mode
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.hicache.rank import HiCacheRank
from tiercheck.models import model_file


def _walk(driver, steps: int, seed: int = 0) -> list:
    """A seeded walk of spec actions; every problem verify reports, per step."""
    rng = random.Random(seed)
    s = driver.model.init_states()[0]
    out = []
    for _ in range(steps):
        a = rng.choice(driver.model.actions(s))
        s = driver.model.next_state(s, a)
        driver.apply(a)
        driver.state()
        out += driver.verify()
    return out


@pytest.mark.parametrize("model", ["wt-storage-2r", "wb-reclaim-2r", "wt-prefetch-2r"])
def test_counter_increments_and_match_prefix_agree_with_the_spec(model):
    driver = ReferenceDriver(model_file.load(model).config)
    try:
        assert _walk(driver, 40) == []
    finally:
        driver.close()


def test_a_miscounted_eviction_is_reported(monkeypatch):
    driver = ReferenceDriver(model_file.load("wt-alloc-2r").config)
    metrics = driver.group.ranks[1].metrics
    add = metrics.add
    monkeypatch.setattr(metrics, "add", lambda key, n=1: add(key, n + (key == mt.DEVICE_EVICTED)))
    try:
        problems = _walk(driver, 60)
    finally:
        driver.close()
    assert any(p.startswith(f"rank 1: counter {mt.DEVICE_EVICTED} went up by") for p in problems)


def test_a_wrong_match_prefix_is_reported(monkeypatch):
    real = HiCacheRank.match_prefix

    def off_by_one(self, tokens):
        out = real(self, tokens)
        return dict(out, device_pages=out["device_pages"] + (self.rank == 1))

    monkeypatch.setattr(HiCacheRank, "match_prefix", off_by_one)
    driver = ReferenceDriver(model_file.load("wt-alloc-2r").config)
    try:
        problems = _walk(driver, 3)
    finally:
        driver.close()
    assert any(p.startswith("rank 1: match_prefix(") for p in problems)


@pytest.mark.parametrize("model", ["wt-storage-2r", "wt-prefetch-2r", "wts-mirror-1r", "wt-durable-lru-1r"])
def test_auto_mode_walks_agree_with_the_spec(model):
    cfg = model_file.load(model).config
    for seed in range(3):
        assert auto_mode.walk(cfg, seed, 30) == []


def test_auto_mode_idle_check_events_age_the_durable_marks():
    """check_events drains every iteration, so an idle one ages the durable marks (the
    seed's drain round); the spec once skipped idle drains and kept the ages, and this
    walk (the shortest auto-mode disagreement on wt-durable-lru-1r) differed at its
    third tick. Manual mode cannot see it: there the spec decides when a drain runs."""
    driver = auto_mode.AutoDriver(model_file.load("wt-durable-lru-1r").config)
    m = driver.model
    try:
        s = m.init_states()[0]
        insert = next(a for a in m.actions(s) if a.name == "insert" and a["req"] == 1)
        steps = [insert] + [auto_mode.TICK] * 4  # stage, mark, release, idle, idle
        for i, a in enumerate(steps):
            s = auto_mode.settle(m, auto_mode.tick(m, s, driver.separate_rounds) if a == auto_mode.TICK
                                 else m.next_state(s, a))
            driver.apply(a)
            assert auto_mode._compare(driver, s, f"step {i + 1}") == []
        assert [a for _p, a in s.ranks[0].dlru] == [m.cfg.refresh_rounds]  # aged to the gate
    finally:
        driver.close()


def test_auto_mode_catches_a_catalogued_bug():
    cfg = model_file.load("wts-mirror-1r").config
    problems = auto_mode.walk(cfg, 0, 40, variants={"release-no-consensus"})
    assert problems and "check_events" in problems[0]


def test_a_wrong_return_value_is_reported(monkeypatch):
    real = HiCacheRank.evict_node
    monkeypatch.setattr(HiCacheRank, "evict_node", lambda self, path, fail=False: real(self, path, fail) + 1)
    driver = ReferenceDriver(model_file.load("wt-alloc-2r").config)
    try:
        problems = _walk(driver, 60)
    finally:
        driver.close()
    assert any("evict(node=" in p and "the spec's state change says" in p for p in problems)


def test_metric_names_outside_the_documented_set_are_reported():
    from tiercheck.conformance.counters import name_problems
    from tiercheck.impl.hicache import metrics as mt

    ok = {mt.rejected("host_alloc_failed", "write_through"): 4, mt.HOST_WRITE: 2, mt.HOST_USED: 0}
    assert name_problems([ok]) == []
    assert name_problems([ok, {mt.WRITE_REJECTED: 4}]) == [
        f"rank 1: metric {mt.WRITE_REJECTED!r} is not a documented name (or label set)"]
