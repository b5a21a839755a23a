"""Counters over a step that runs its own eviction under write_back: host copies staged
and dropped inside the step are not in the states around it, so the counters may exceed
the state change by as many host writes as host copies dropped, never otherwise."""

from __future__ import annotations

from tiercheck.conformance import counters
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.runner import replay
from tiercheck.impl.hicache.metrics import DUP_RECLAIMED, HOST_EVICTED, HOST_WRITE
from tiercheck.models import model_file
from tiercheck.spec.action import act
from tiercheck.spec.model import Model

# wb-reclaim-evicts-1r: the last load_back stages node 3 (host full: the reclaim takes
# node 4's host copy), then stages node 4 (evict_host takes node 3's fresh copy): 2 host
# writes, 1 reclaim and 1 host eviction, where the states show node 3 gone and node 4
# demoted (0 writes).
TRACE = [act("insert", req=2), act("insert", req=3), act("insert", req=0), act("insert", req=1),
         act("insert", req=2), act("load_back", node=1)]


def _model():
    return Model(model_file.load("wb-reclaim-evicts-1r").config)


def test_staged_and_dropped_copies_replay_clean():
    m = _model()
    driver = ReferenceDriver(m.cfg)
    try:
        out = replay(driver, TRACE)
    finally:
        driver.close()
    assert out.mismatch is None and out.steps == len(TRACE)


def _last_step(m):
    s = m.init_states()[0]
    for a in TRACE:
        before, s = s, m.next_state(s, a)
    return before, s


def test_extra_writes_need_as_many_dropped_copies():
    m = _model()
    before, after = _last_step(m)
    action = TRACE[-1]
    (want,) = counters.increments(m, before, after, action)  # the state change alone
    assert want.get(HOST_WRITE, 0) == 0 and want.get(DUP_RECLAIMED, 0) == 0 and want.get(HOST_EVICTED, 0) == 0
    base = [{}]

    def counted(**extra):
        return [{**want, **extra}]

    assert counters.problems(m, before, after, action, base, counted()) == []
    good = counted(**{HOST_WRITE: 2, DUP_RECLAIMED: 1, HOST_EVICTED: 1})
    assert counters.problems(m, before, after, action, base, good) == []
    unbalanced = counted(**{HOST_WRITE: 2, DUP_RECLAIMED: 1})  # a write with no copy dropped
    assert any(HOST_WRITE in line for line in counters.problems(m, before, after, action, base, unbalanced))
    too_many = counted(**{HOST_WRITE: 5, DUP_RECLAIMED: 3, HOST_EVICTED: 2})  # more writes than victims
    assert counters.problems(m, before, after, action, base, too_many)
    dropped_only = counted(**{HOST_EVICTED: 1})  # a copy dropped that was never there
    assert counters.problems(m, before, after, action, base, dropped_only)
