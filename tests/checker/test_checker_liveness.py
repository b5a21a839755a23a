"""Liveness under weak fairness: lassos that replay on the spec, and what passes."""

from __future__ import annotations

import json
from dataclasses import replace

import itf_py
import pytest
from checker_helpers import explore, shipped

from tiercheck.models import liveness, model_file, replay
from tiercheck.models.checker import UNCHECKED_SYMMETRY
from tiercheck.models.liveness import fair_unit
from tiercheck.spec.properties import LeadsTo, Property
from tiercheck.models.trace import read_trace, write_trace
from tiercheck.spec.model import ACTION_SPECS, Model
from tiercheck.spec.properties import waiting_backups
from tiercheck.spec.state import ABSENT, RESIDENT, live_nodes, node_len


_LASSOS: dict = {}


def _lasso(m, prop):
    """The lasso of ``prop`` on ``m`` (one run per model config and property)."""
    key = (m.cfg, prop)
    if key not in _LASSOS:
        _LASSOS[key] = _run_lasso(m, prop)
    return _LASSOS[key]


def _run_lasso(m, prop):
    _c, res = explore(m, [prop])
    assert res.verdicts[prop] == "violated", res.verdicts
    (v,) = res.violations[prop]
    assert v.loop_start is not None
    return v


def _fair_enabled(m, s):
    units = set()
    for a in m.actions(s):
        u = fair_unit(a)
        if u is not None and ACTION_SPECS[a.name].effect(m, s, a) != s:
            units.add(u)
    return units


def test_host_starvation_is_a_lasso_whose_cycle_is_real():
    m = shipped("variants/host-starvation")
    v = _lasso(m, "host_channel_fair")
    # The lasso replays on the spec from the initial state, step by step...
    states = replay.replay(m, v.actions)
    assert states == v.states
    # ...and its cycle comes back to the state where it starts.
    assert states[-1] == states[v.loop_start]
    assert replay.lasso_closes(m, v.actions, v.loop_start) is None
    cycle = states[v.loop_start :]
    key = next(iter(waiting_backups(m, cycle[0])))
    for s in cycle:
        rs = s.ranks[0]
        # The backup waits the whole time...
        assert key in waiting_backups(m, s)
        assert rs.nodes[key].host == ABSENT and rs.host_free < node_len(m.pages, rs, key)
        # ...while every host page belongs to a device-resident mirror (evict_host skips
        # those), so the host pool holds nothing it could reclaim.
        holders = [e for e in live_nodes(rs) if rs.nodes[e].host != ABSENT]
        assert holders and all(rs.nodes[e].dev == RESIDENT for e in holders)
    # Weak fairness: a fair unit enabled in every cycle state is taken in the cycle.
    always = set.intersection(*[_fair_enabled(m, s) for s in cycle[:-1] or cycle])
    taken = {
        fair_unit(a) for a, s, t in zip(v.actions[v.loop_start :], cycle, cycle[1:]) if s != t
    }
    assert always <= taken


def test_a_cycle_that_does_not_close_is_rejected():
    m = shipped("variants/host-starvation")
    v = _lasso(m, "host_channel_fair")
    start = v.loop_start - 1  # pretend the cycle starts one step earlier
    assert replay.lasso_closes(m, v.actions, start) == "the cycle does not return to its start state"


def test_the_lasso_is_an_itf_trace_with_its_loop(tmp_path):
    mf = model_file.load("variants/host-starvation")
    m = Model(mf.config)
    v = _lasso(m, "host_channel_fair")
    path = tmp_path / "lasso.itf.json"
    write_trace(path, m, model_file.dump(mf), v.actions, v.states, prop=v.prop, message=v.message, loop_start=v.loop_start)
    back = read_trace(path)
    assert back.loop_start == v.loop_start and back.actions == v.actions
    doc = json.loads(path.read_text())
    t = itf_py.trace_from_json(doc)
    assert len(t.states) == len(v.states)
    assert t.loop == v.loop_start and "loop" not in doc["#meta"]  # top level, as ITF puts it
    assert doc["states"][-1]["mbt::actionTaken"] == v.actions[-1].name


def test_mirror_release_passes_where_the_variant_starves():
    mf = model_file.load("variants/host-starvation")
    fixed = Model(replace(mf.config, variants=frozenset()))
    _c, res = explore(fixed, ["host_channel", "host_channel_fair", "eviction_progress_fair"])
    assert set(res.verdicts.values()) == {"holds"}, res.verdicts


@pytest.mark.slow
def test_the_mirror_release_model_keeps_its_claimed_properties():
    mf = model_file.load("wt-mirror-1r")
    _c, res = explore(Model(mf.config), mf.properties)
    assert res.complete and set(res.verdicts.values()) == {"holds"}, res.verdicts


@pytest.mark.slow
def test_without_the_no_eviction_assumption_eviction_thrash_starves_the_fixed_model():
    # A scheduler that evicts and reloads a mirror forever, each time just before the
    # release plan commits, defeats the fix: the reason host_channel_fair's cycles take
    # no device eviction (documented in tiercheck.models.liveness).
    mf = model_file.load("variants/host-starvation")
    fixed = Model(replace(mf.config, variants=frozenset()))
    base = liveness.BY_NAME["host_channel_fair"]
    thrash = base._replace(name="host_channel_thrash", fn=base.fn._replace(cycle_excludes=()))
    from tiercheck.models.checker import Checker

    c = Checker(fixed, [])
    c.props = [thrash]
    res = c.run()
    (v,) = res.violations["host_channel_thrash"]
    assert any(a.name == "evict" for a in v.actions[v.loop_start :])
    assert replay.lasso_closes(fixed, v.actions, v.loop_start) is None


def _eventually(name, q):
    return liveness.eventually(name, name, q, f"{name} never happens")


def _check(m, prop):
    from tiercheck.models.checker import Checker

    c = Checker(m, [])
    c.props = [prop]
    return c.run()


def test_eventually_holds_when_fair_steps_force_it():
    # Requests keep arriving (insert is fair) and write-through copies complete (DMA
    # and writing_check are fair): some node eventually has a host copy.
    m = shipped("wt-1r")
    prop = _eventually("host_copy", lambda m, s: any(n is not None and n.host == 2 for n in s.ranks[0].nodes))
    res = _check(m, prop)
    assert res.verdicts["host_copy"] == "holds"


def test_eventually_fails_with_a_lasso_when_only_an_unfair_step_gets_there():
    # Device eviction is never assumed: a fair run need not evict anything.
    m = shipped("wt-1r")
    prop = _eventually("demoted", lambda m, s: any(n is not None and n.dev == ABSENT for n in s.ranks[0].nodes))
    res = _check(m, prop)
    (v,) = res.violations["demoted"]
    assert replay.lasso_closes(m, v.actions, v.loop_start) is None
    assert not any(a.name == "evict" for a in v.actions)


def test_liveness_is_not_checked_under_symmetry():
    m = shipped("wt-2r")
    _c, res = explore(m, ["no_ghost", "eviction_progress_fair", "eviction_progress"], symmetry=True)
    assert res.symmetry is not None
    assert res.verdicts["eviction_progress_fair"] == UNCHECKED_SYMMETRY
    assert res.verdicts["eviction_progress"] == UNCHECKED_SYMMETRY
    assert res.verdicts["no_ghost"] == "holds"
    assert any("not checked" in n for n in res.notes)


def test_a_partial_run_has_no_liveness_verdict():
    m = shipped("variants/host-starvation")
    _c, res = explore(m, ["host_channel_fair"], max_states=50)
    assert not res.complete and res.verdicts["host_channel_fair"] == "unknown"


def test_all_violations_gives_distinct_lassos():
    m = shipped("variants/host-starvation")
    _c, res = explore(m, ["host_channel_fair"], max_violations=3)
    found = res.violations["host_channel_fair"]
    assert 1 < len(found) <= 3
    starts = {tuple(map(str, v.actions[: v.loop_start])) for v in found}
    assert len(starts) == len(found)
    for v in found:
        assert replay.lasso_closes(m, v.actions, v.loop_start) is None


def test_leads_to_property_shape():
    p = liveness.BY_NAME["host_channel_fair"]
    assert isinstance(p, Property) and isinstance(p.fn, LeadsTo)
    assert p.kind == "liveness" and "evict" in p.fn.cycle_excludes
    assert liveness.fair_name("writing_check") and liveness.fair_name("insert")
    assert not liveness.fair_name("evict") and not liveness.fair_name("store_lose")


def test_a_running_request_finishing_is_in_flight_work_for_progress():
    """write_back, a 1-page host pool held by the copy of a node a running request locks:
    the other device node cannot be written back until that request ends. The request
    ending (unlock_request) is in-flight work, not a new request, so eviction_progress holds;
    counted as a new request it would be a 5-step violation of the correct protocol."""
    from tiercheck.spec.config import Config
    from tiercheck.spec.properties import background_step

    assert background_step("replicated", "unlock_request") and not background_step("replicated", "lock_request")
    m = Model(Config(requests=((1,), (2,)), device_pages=2, host_pages=1, policy="write_back", request_locks=True))
    _c, res = explore(m, ["eviction_progress", "lock_release"])
    assert res.verdicts == {"eviction_progress": "holds", "lock_release": "holds"}


def test_progress_does_not_judge_states_past_the_bounds():
    # Found by benchmarks/random_models.py (docs/random-models.md): with request locks a
    # node is locked by each running request and by its write, past max_lock; the search
    # checks but does not expand such states, and eviction_progress reported them as
    # states from which no evict() ever frees a page (the evict was just not explored).
    from tiercheck.spec.config import Config

    cfg = Config(requests=((1,), (1, 2)), device_pages=2, host_pages=2, request_locks=True, max_lock=2)
    c, res = explore(Model(cfg), ["eviction_progress"])
    assert c.search.expanded.count(0) > 0
    assert res.verdicts["eviction_progress"] == "holds"
    assert any("past the model's bounds" in n for n in res.notes)
    c, res = explore(Model(replace(cfg, max_lock=4)), ["eviction_progress"])
    assert c.search.expanded.count(0) == 0 and res.verdicts["eviction_progress"] == "holds" and not res.notes
