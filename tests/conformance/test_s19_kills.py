"""The units of tiercheck.conformance.s19_kills, each against the survivors it kills
(recompiled from their source with the mutant's one edit): the teardown bounds that only
wall-clock time showed, and the write-back size on diverged replicas."""

from __future__ import annotations

import pytest

from tiercheck.conformance import s19_kills as k
from tiercheck.impl.hicache.eviction import Eviction
from tiercheck.impl.hicache.group import HiCacheGroup
from tiercheck.impl.hicache.rank import HiCacheRank
from tiercheck.models import model_file
from tiercheck.spec.host_eviction import host_holders
from tiercheck.spec.state import HOST_RESIDENT, WRITING, node_len

from mutant_helpers import load_mutation_suite, recompiled

MS = load_mutation_suite("bench_mutation_suite_s19")
UNITS = dict(MS.s19_kills_units())
FLUSH, CLOSE = "fault flush at its default deadline", "fault close joins each storage worker once"
SEGMENTS = "fault Mooncake segments of the documented size"


TWINS = [f"situation {s.name}" for s in k.TWIN_SITUATIONS]
BOTH_WRITE = "situation digest-unchecked evicting a node both ranks must write, rank 0's longer"


def test_the_units_are_in_the_mutation_suite():
    assert list(UNITS) == TWINS + [f"fault {n}" for n, _ in k.scenarios()]
    assert BOTH_WRITE in TWINS and [FLUSH, CLOSE, SEGMENTS] == list(UNITS)[-3:]


@pytest.mark.parametrize("name", TWINS + [FLUSH, CLOSE, SEGMENTS])
def test_every_unit_passes_on_the_implementation(name):
    assert MS.run_unit(name, UNITS[name])


# (unit, class, method, original text, mutant text, what the failing unit prints)
KILLS = [
    (BOTH_WRITE, Eviction, "_evict_one", "self.rank << 32", "self.rank >> 32",
     "rank 1: host_free 2 -> 0"),  # eviction.py:75 (seed 16)
    (FLUSH, HiCacheGroup, "flush", "timeout: float = 60.0", "timeout: float = 59.0", "after 59s"),  # group.py:130
    (FLUSH, HiCacheGroup, "flush", "timeout: float = 60.0", "timeout: float = 61.0", "after 61s"),
    (FLUSH, HiCacheGroup, "flush", "time.monotonic() > deadline", "time.monotonic() >= deadline",
     "not at the first tick past its default deadline"),
    (CLOSE, HiCacheRank, "close", "w.close(drain=False, timeout=30)", "w.close(drain=False, timeout=31)",
     "waits [31]s"),  # rank.py:137
    (CLOSE, HiCacheRank, "close", "op.worker.close(drain=False, timeout=30)", "op.worker.close(drain=False, timeout=31)",
     "manual: close() waits [30, 31]s"),  # rank.py:140
    (CLOSE, HiCacheRank, "close", "op.worker is not None and op.worker", "op.worker is not None or op.worker",
     "auto: close() joined the rank's 2 storage workers [1, 2] times"),  # rank.py:139
]


@pytest.mark.parametrize("unit, cls, method, old, new, said", KILLS, ids=[f"{x[2]}: {x[4]}" for x in KILLS])
def test_a_fault_kills_its_mutant(unit, cls, method, old, new, said, monkeypatch, capsys):
    monkeypatch.setattr(cls, method, recompiled(getattr(cls, method), old, new)[method])
    assert not MS.run_unit(unit, UNITS[unit])
    assert said in capsys.readouterr().out


def test_the_scenario_clock_leaves_other_threads_and_the_module_alone():
    import threading
    import time

    real = time.monotonic
    seen = []
    with k._ScenarioClock(start=10.0) as clock:
        assert (time.monotonic(), time.monotonic()) == (10.0, 10.5)
        t = threading.Thread(target=lambda: seen.append(time.monotonic()))
        t.start()
        t.join()
        assert clock.now == 10.5
    assert time.monotonic is real and abs(seen[0] - real()) < 60


@pytest.mark.mooncake
@pytest.mark.skipif(not k.mooncake_available(), reason="the mooncake extra and its mooncake_master binary")
def test_a_segment_size_other_than_the_documented_one_is_caught(monkeypatch, capsys):
    # storage_setup.py:31: MooncakeStorage's default segment 16 MiB -> 17 MiB
    from tiercheck.impl.hicache import MooncakeStorage

    assert MS.run_unit(SEGMENTS, UNITS[SEGMENTS])
    defaults = MooncakeStorage.__init__.__defaults__
    assert (16 << 20) in defaults
    monkeypatch.setattr(MooncakeStorage.__init__, "__defaults__",
                        tuple(17 << 20 if d == 16 << 20 else d for d in defaults))
    assert not MS.run_unit(SEGMENTS, UNITS[SEGMENTS])
    assert "2 x 16 MiB = 33554432" in capsys.readouterr().out


def _situation_step(sit):
    """The spec's last transition (s, a, t) of the shortest trace to ``sit``'s goal."""
    from dataclasses import replace

    from tiercheck.conformance.situations import first_path
    from tiercheck.spec.model import Model

    m = Model(replace(model_file.load(sit.model).config, **dict(sit.overrides)))
    trace = first_path(m, lambda s, a, t: sit.goal(m, s, a, t))
    s = m.init_states()[0]
    for a in trace[:-1]:
        s = m.next_state(s, a)
    return m, s, trace[-1], m.next_state(s, trace[-1])


def test_the_spec_charges_each_writing_rank_its_own_node():
    # the write_back eviction asks every rank for rank 0's (longer) length and each rank
    # takes its own node's pages: rank 1's host_free falls by its own length
    (sit,) = [x for x in k.TWIN_SITUATIONS if x.name in BOTH_WRITE]
    m, s, a, t = _situation_step(sit)
    e = a["node"]
    own = [node_len(m.pages, rs, e) for rs in s.ranks]
    assert own[0] > own[1]
    for rs, rt in zip(s.ranks, t.ranks):
        assert rt.nodes[e].host == HOST_RESIDENT
        # conserved: the pages the step took (its own node) came out of host_free, what the
        # fallback eviction freed went into it (charging rank 1 rank 0's length breaks it)
        assert host_holders(m, rt) + rt.host_free == host_holders(m, rs) + rs.host_free


def test_the_spec_stages_each_ranks_own_node_under_partial_backup_leak():
    (sit,) = [x for x in k.TWIN_SITUATIONS if "partial-backup-leak" in x.name]
    m, s, a, t = _situation_step(sit)
    from tiercheck.spec.write_path import insert_on_rank

    staged = [rt.wq[-1] for rt in t.ranks]
    assert staged[0][1] != staged[1][1]
    for rs, rt, (start, end) in zip(s.ranks, t.ranks, staged):
        assert rt.nodes[end].host == WRITING and rt.nodes[end].start == start
        # a node this rank's own insert wants staged (until session 19 the spec staged the
        # first wanting rank's node on every rank)
        assert end in insert_on_rank(m, rs, a["req"])[1]
