"""Rare situations (tiercheck.conformance.situations): the shortest spec trace to each
reaches its goal, and the reference agrees on it, probes included; an implementation that
gets the situation wrong is caught."""

from __future__ import annotations

import pytest
import torch

from tiercheck.conformance import situations as st
from tiercheck.conformance.adapters import driver_factory
from tiercheck.impl.hicache.rank import HiCacheRank
from tiercheck.spec.model import Model


def _reference(cfg):
    return driver_factory("reference", cfg)


@pytest.mark.parametrize("sit", st.SITUATIONS, ids=lambda s: s.name)
def test_the_shortest_trace_reaches_the_situation_and_the_reference_agrees(sit):
    cfg, actions, probes = st.trace(sit)
    model = Model(cfg)
    s = model.init_states()[0]
    for a in actions[:len(actions) - len(probes) - 1]:
        s = model.next_state(s, a)
    goal = actions[len(actions) - len(probes) - 1]
    assert sit.goal(model, s, goal, model.next_state(s, goal))
    for i in probes:
        t = model.next_state(s, goal)
        assert model.next_state(t, actions[i]) is None or actions[i] not in model.actions(t)  # disabled: a probe
    assert st.check(sit, _reference) == ""


def test_a_rank_that_locks_a_running_request_twice_is_caught(monkeypatch):
    lock = HiCacheRank.lock_running

    def twice(self, tokens):
        self.running.pop(tuple(int(t) for t in tokens), None)  # forgets the request runs
        return lock(self, tokens)

    monkeypatch.setattr(HiCacheRank, "lock_running", twice)
    sit = next(s for s in st.SITUATIONS if s.name == "lock a running request again")
    assert "state at step 2" in st.check(sit, _reference)


def test_a_planner_view_that_misreads_lanes_in_higher_slots_is_caught(monkeypatch):
    from tiercheck.impl.hicache import cp_load

    real = cp_load.CpNode

    def slot_blind(i, value=None, **kw):  # lane 1 + lane >> cp * slot: right in slot 0 only (one-token pages)
        if value is not None:
            value = torch.bitwise_right_shift(1 + (value - 1) % 2, 2 * ((value - 1) // 2))
        return real(i, value, **kw)

    monkeypatch.setattr(cp_load, "CpNode", slot_blind)
    sit = next(s for s in st.SITUATIONS if s.name == "a CP load-back victim in a higher device slot")
    assert "node 2: device absent->resident" in st.check(sit, _reference)


def test_a_search_that_finds_nothing_says_so():
    sit = st.Situation("never", "wt-1r", (), lambda m, s, a, t: False)
    with pytest.raises(LookupError, match="no trace of wt-1r"):
        st.trace(sit)


@pytest.mark.parametrize("sit", st.TWIN_SITUATIONS, ids=lambda s: s.name)
def test_a_twin_situation_needs_its_bug_and_its_trace_reaches_it(sit):
    cfg, actions, probes = st.trace(sit)
    assert cfg.variants  # replayed with the bug on both sides (benchmarks/mutation_suite.py)
    model = Model(cfg)
    s = model.init_states()[0]
    last = len(actions) - len(probes) - 1
    for a in actions[:last]:
        s = model.next_state(s, a)
    t = model.next_state(s, actions[last])
    assert sit.goal(model, s, actions[last], t)
    for i in probes:
        assert model.next_state(t, actions[i]) is None or actions[i] not in model.actions(t)  # disabled: a probe
