"""The units of tiercheck.conformance.s19_kills, each against the survivors it kills
(recompiled from their source with the mutant's one edit): the teardown bounds that only
wall-clock time showed."""

from __future__ import annotations

import pytest

from tiercheck.conformance import s19_kills as k
from tiercheck.impl.hicache.group import HiCacheGroup
from tiercheck.impl.hicache.rank import HiCacheRank

from mutant_helpers import load_mutation_suite, recompiled

MS = load_mutation_suite("bench_mutation_suite_s19")
UNITS = dict(MS.s19_kills_units())
FLUSH, CLOSE = "fault flush at its default deadline", "fault close joins each storage worker once"


def test_the_units_are_in_the_mutation_suite():
    assert list(UNITS) == [f"fault {n}" for n, _ in k.scenarios()] == [FLUSH, CLOSE]


@pytest.mark.parametrize("name", [FLUSH, CLOSE])
def test_every_unit_passes_on_the_implementation(name):
    assert MS.run_unit(name, UNITS[name])


# (unit, class, method, original text, mutant text, what the failing unit prints)
KILLS = [
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
