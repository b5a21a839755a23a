"""The search: same results for any number of workers, shortest traces, partial runs that
say so, a progress line, a state footprint that fits 10^7 states in 24 GiB."""

from __future__ import annotations

import os

import pytest
from checker_helpers import explore, reachable, shipped

from tiercheck.models import parallel, replay
from tiercheck.models.checker import Checker
from tiercheck.spec.config import Config
from tiercheck.spec.model import Model


@pytest.fixture
def tiny_chunks(monkeypatch):
    # Small chunks so that even small models go through the worker processes.
    monkeypatch.setattr(parallel, "CHUNK", 16)
    monkeypatch.setattr(parallel, "SMALL_LEVEL", 0)


def _fingerprint(c, res):
    s = c.search
    viols = {p: [(tuple(map(str, v.actions)), v.message) for v in vs] for p, vs in res.violations.items()}
    return (list(s.keys), list(s.parent), list(s.via), res.transitions, res.depth, res.verdicts, res.coverage, viols)


@pytest.mark.parametrize("name", ["wb-reclaim-2r", "variants/reclaim-demote-leaf"])
def test_results_do_not_depend_on_the_number_of_workers(tiny_chunks, name):
    from tiercheck.models import model_file

    props = model_file.load(name).properties
    m = shipped(name)
    runs = [_fingerprint(*explore(m, props, workers=w, max_violations=2)) for w in (1, 3)]
    assert runs[0] == runs[1]


def test_worker_counts_agree_under_symmetry(tiny_chunks):
    m = shipped("wb-reclaim-2r")  # rank symmetry
    a = explore(m, ["no_ghost", "release_safety"], symmetry=True)
    b = explore(m, ["no_ghost", "release_safety"], symmetry=True, workers=2)
    assert a[1].symmetry is not None
    assert _fingerprint(*a) == _fingerprint(*b) and a[1].symmetry == b[1].symmetry


def test_worker_counts_agree_on_a_stopped_run(tiny_chunks):
    m = shipped("wt-storage-2r")
    a = _fingerprint(*explore(m, ["no_ghost"], max_states=400))
    b = _fingerprint(*explore(m, ["no_ghost"], max_states=400, workers=2))
    assert a == b


def test_distinct_states_match_a_plain_breadth_first_search():
    m = shipped("wt-prefetch-2r")
    c, res = explore(m)
    plain = reachable(m, 10**6)
    assert res.complete and res.distinct == len(plain)
    assert {c.search.codec.decode(k) for k in c.search.keys} == set(plain)


def test_counterexamples_are_shortest_and_replay():
    from tiercheck.spec.properties import BY_NAME

    m = shipped("variants/split-during-backup")
    _c, res = explore(m, ["no_use_after_free"])
    (v,) = res.violations["no_use_after_free"]
    assert replay.replay(m, v.actions) == v.states
    assert BY_NAME["no_use_after_free"].fn(m, v.states[-1])
    # Level by level, no violating state lies at a smaller depth.
    inv = BY_NAME["no_use_after_free"].fn
    frontier, seen, depth = [m.init_states()[0]], {m.init_states()[0]}, 0
    while not any(inv(m, s) for s in frontier):
        nxt = []
        for s in frontier:
            if m.constraint(s):
                for _a, t in m.successors(s):
                    if t not in seen:
                        seen.add(t)
                        nxt.append(t)
        frontier, depth = nxt, depth + 1
    assert len(v.actions) == depth


def test_a_stopped_run_says_it_is_partial():
    m = shipped("wt-storage-2r")
    _c, res = explore(m, ["no_ghost", "eviction_progress", "host_channel_fair"], max_states=500)
    assert not res.complete and "--max-states 500" in res.stop_reason
    assert res.verdicts == {"no_ghost": "holds so far", "eviction_progress": "unknown", "host_channel_fair": "unknown"}
    _c, res = explore(m, ["no_ghost"], time_limit=1e-9)
    assert not res.complete and "--time-limit" in res.stop_reason
    assert res.verdicts["no_ghost"] == "holds so far"


def test_limits_hold_inside_one_states_successors():
    # 16 requests: the initial state alone has 16 successors; the bound is still exact.
    cfg = Config(requests=tuple((t,) for t in range(1, 17)), device_pages=16, host_pages=4)
    _c, res = explore(Model(cfg), ["no_ghost"], max_states=10)
    assert res.distinct == 10 and res.stop_reason == "--max-states 10 reached"


def test_a_memory_budget_stops_the_search():
    # A budget below what any process holds: the first sample stops the search.
    _c, res = explore(shipped("wt-mirror-1r"), ["no_ghost"], max_memory=1 << 20)
    assert not res.complete and res.stop_reason.startswith("--max-memory 1 MiB reached (")
    assert res.stop_reason.endswith(" in use)") and res.distinct < 10502
    assert res.verdicts["no_ghost"] == "holds so far"


def test_the_progress_line_reports_distinct_rate_queue_and_depth():
    m = shipped("wt-mirror-1r")
    seen = []
    Checker(m, [], on_progress=lambda *a: seen.append(a), max_states=800, progress_every=0).run()
    # on_progress(distinct, transitions, queue, depth, seconds)
    assert seen, "no progress reported"
    distinct, transitions, queue, depth, seconds = seen[-1]
    assert 0 < distinct <= 800 and transitions >= distinct - 1 and queue >= 0 and depth > 0 and seconds >= 0


def test_memory_per_state_fits_ten_million_states_in_24_gib():
    import sys

    m = shipped("wt-storage-2r")
    c, res = explore(m, ["no_ghost"], max_states=1500, keep_graph=True)
    s = c.search
    n = res.distinct
    # What the search holds per state: the packed key (one int), its slot in the key list
    # and in the index dict, parent index, action position, the graph's edges.
    held = sys.getsizeof(s.keys) + sum(sys.getsizeof(k) for k in s.keys) + sys.getsizeof(s.index)
    for arr in (s.parent, s.via, s.src, s.dst):
        held += arr.buffer_info()[1] * arr.itemsize
    held += len(s.kind) + len(s.frees) + len(s.expanded)
    per_state = held / n
    assert per_state < 400, per_state
    assert per_state * 10**7 < 24 * 2**30
    # Interned rank states grow with distinct rank states, far fewer than global states.
    assert len(c.codec.ranks) < n / 2


def test_the_memory_meter_reads_the_costly_pss_only_near_the_budget(monkeypatch):
    from tiercheck.models import budget

    reads = []
    real = budget.rss
    monkeypatch.setattr(budget, "rss", lambda pid: reads.append(pid) or real(pid))
    here = budget.resident(os.getpid())
    assert budget.Meter(4 * here).over(0) is None and reads == []  # the resident bound is enough
    assert budget.Meter(1 << 20).over(0).startswith("--max-memory 1 MiB reached") and reads == [os.getpid()]
