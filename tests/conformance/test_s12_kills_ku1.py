"""The units of tiercheck.conformance.s12_kills_ku1 (session 14), each against the seed-12
survivor it kills, recompiled from its source with the mutant's one edit: the unit passes
on the implementation and fails with the mutant in. Also what the equivalence verdicts of
storage_path.py:107 rest on (benchmarks/mutation_equivalent.txt)."""

from __future__ import annotations

import random

import pytest

from tiercheck.conformance import s12_kills_ku1 as ku
from tiercheck.conformance import situations as st
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.impl.hicache.prefetch import Prefetch
from tiercheck.impl.hicache.state import INT64_MAX, SKIP
from tiercheck.models import model_file

from mutant_helpers import load_mutation_suite, recompiled


def _verdict(sit) -> str:
    return st.check(sit, lambda cfg: driver_factory("reference", cfg))


def test_the_units_are_in_the_mutation_suite():
    names = [n for n, _ in load_mutation_suite("bench_mutation_suite_kU1").s12_kills_ku1_units()]
    assert names == [f"situation {s.name}" for s in ku.SITUATIONS]


@pytest.mark.parametrize("sit", ku.SITUATIONS, ids=lambda s: s.name)
def test_a_step_naming_a_prefetch_past_the_end_is_refused(sit):
    cfg, actions, probes = st.trace(sit)
    # the probe is the last step, disabled in the spec, and names index len(pq)
    assert probes == (len(actions) - 1,) and actions[-1]["op"] == 1
    assert _verdict(sit) == ""


@pytest.mark.parametrize("sit", ku.SITUATIONS, ids=lambda s: s.name)
def test_a_bound_check_letting_the_queue_length_through_is_caught(monkeypatch, sit):
    # prefetch.py:96: index == len(pq) passes the check and self.pq[index] crashes
    # where the original refuses the step (ProtocolError: the driver takes it as no step).
    made = recompiled(Prefetch._prefetch_op, "index < len(self.pq)", "index <= len(self.pq)")
    monkeypatch.setattr(Prefetch, "_prefetch_op", made["_prefetch_op"])
    _cfg, actions, _probes = st.trace(sit)
    got = _verdict(sit)
    assert got.startswith(f"error at step {len(actions) - 1} ") and "IndexError" in got
    assert f"raised by {actions[-1]}" in got


def _single_writer_drains(seed: int, steps: int = 80) -> list:
    """(values sent, values reduced) of every drain_ack_slots round on every rank of a
    seeded random walk of wt-mirror-mla-2r (two ranks, single_writer) on the reference."""
    cfg = model_file.load("wt-mirror-mla-2r").config
    driver = ReferenceDriver(cfg)
    seen = []
    try:
        assert [r.writer for r in driver.group.ranks] == [True, False]
        for r in driver.group.ranks:
            def spy(values, op, tag, orig=r._reduce):
                out = orig(values, op, tag)
                if tag == "drain_ack_slots":
                    seen.append((list(values), list(out)))
                return out
            r._reduce = spy
        model, rng = driver.model, random.Random(seed)
        s = model.init_states()[0]
        for _ in range(steps):
            moves = [(a, t) for a in model.actions(s) if (t := model.next_state(s, a)) is not None]
            if not moves:
                break
            a, s = rng.choice(moves)
            driver.apply(a)
    finally:
        driver.close()
    return seen


def test_single_writer_acks_never_reduce_to_the_sentinel():
    """What the equivalence of storage_path.py:107's two mutants rests on: the branch
    `0 if v == INT64_MAX` is never taken. Rank 0 writes under single_writer, so its ack in
    every drained slot is a page count >= 0 and a slot's MIN is at most that; only the
    follower's SKIP travels as INT64_MAX."""
    seen = [x for seed in range(6) for x in _single_writer_drains(seed)]
    assert seen, "no drain round reduced ack slots"
    assert any(v == INT64_MAX for values, _ in seen for v in values)  # a follower's SKIP rode along
    assert any(0 <= v < INT64_MAX for values, _ in seen for v in values)  # the writer's count too
    for values, out in seen:
        assert all(v == INT64_MAX or v >= 0 for v in values) and SKIP not in values
        assert all(0 <= v < INT64_MAX for v in out), (values, out)
