"""Stored unsat cores (proofs/cores.py): a core decides only the very query it was stored
for, never a satisfiable one; a wrong, stale or unreadable table costs time, not a
verdict; and the shipped table is current (every query of the audited jobs decided from
its core)."""

import json

import pytest
import z3

from tiercheck.proofs import cores
from tiercheck.proofs.audit import _job, _jobs, forked_pool


@pytest.fixture
def table():
    yield
    cores.set_table(None)  # the stored table again


def _query():
    x, y = z3.Ints("x y")
    return [y == 1, x > 0, y > 0, x < 0]  # unsat; its core: x > 0, x < 0


def test_a_learned_core_decides_its_query_and_no_other(monkeypatch, table):
    monkeypatch.setenv(cores.RECORD_ENV, "1")
    cores.take()
    q = _query()
    cores.learn(q)
    learned = cores.take()["learned"]
    assert len(learned) == 1 and len(next(iter(learned.values()))) == 2  # the two contradicting bounds
    monkeypatch.delenv(cores.RECORD_ENV)
    cores.set_table(learned)
    assert cores.refuted(q) and cores.refuted(list(reversed(q)))  # the order of the formulas does not matter
    x = z3.Int("x")
    assert not cores.refuted(q + [x != 5])  # another query: another key, decided whole
    assert not cores.refuted(q, rlimit=1)  # a starved query stays starved
    assert cores.take()["from_core"] == 2


def test_no_table_makes_a_satisfiable_query_refuted(table):
    x, y = z3.Ints("x y")
    q = [x > 0, y > x, y < 10]
    key, _ordered = cores._indexed(q)
    for core in ([0, 1, 2], [0], [1, 2], [5]):  # every subset, and a position past the end
        cores.set_table({key: core})
        assert not cores.refuted(q)


def test_a_malformed_table_is_an_empty_one(tmp_path):
    bad = tmp_path / "cores.json"
    for text in ("{not json", "[]", '{"cores": [1, 2]}', '{"cores": {"k": ["a"]}}', '{"cores": {"k": [true]}}'):
        bad.write_text(text)
        assert cores.load(bad) == {}
    assert cores.load(tmp_path / "missing.json") == {}
    bad.write_text(json.dumps({"cores": {"k": [0, 3]}}))
    assert cores.load(bad) == {"k": [0, 3]}


def _run(job):
    with forked_pool(1) as pool:
        return pool.apply(_job, (job,))


@pytest.mark.parametrize("action", [pytest.param("lock_request", marks=pytest.mark.slow), "writing_check"])
def test_wrong_cores_fall_back_to_the_whole_queries_with_the_same_verdicts(action, table):
    job = next(j for j in _jobs([action], (), 2, True) if j[1] == "unbounded")
    stored, _cpu, info = _run(job)
    assert info["queries"] > 0 and info["from_core"] == info["queries"], \
        "proofs/cores.json is stale: python benchmarks/prove_profile.py --write-cores"
    # every stored core cut to its first formula (a few queries' negated goals are
    # unsatisfiable alone: those still go), then no table at all: the rest decided whole
    n = info["queries"]
    cores.set_table({k: v[:1] for k, v in cores.load(cores.TABLE).items()})
    cut, _cpu, info = _run(job)
    assert info["queries"] == n and info["from_core"] < n / 2
    cores.set_table({})
    whole, _cpu, info = _run(job)
    assert info["queries"] == n and info["from_core"] == 0
    verdicts = [(r.target, r.status, r.pages) for r in stored]
    assert [(r.target, r.status, r.pages) for r in cut] == verdicts == [(r.target, r.status, r.pages) for r in whole]
    assert all(r.status == "proved" for r in whole)


def test_fingerprints_leave_out_the_counters_numbers_and_line_wrapping():
    a = "(forall ((p113 Page)) (=> (host_evict!12 p113)\n    (|#free!3| p113) (< 12 rank0)))"
    b = "(forall ((p7 Page)) (=> (host_evict!940 p7) (|#free!41| p7)\n (< 12 rank0)))"
    assert cores.canonical(a) == cores.canonical(b)
    assert "12" in cores.canonical(a)  # a literal stays
    # distinct names stay distinct: (p1, p2) is not (p1, p1)
    assert cores.canonical("(f p1 p2)") != cores.canonical("(f p1 p1)")


def test_a_query_built_after_other_work_finds_its_core(table):
    from tiercheck.proofs.epr_obligations import prove_action

    prove_action("writing_check")  # moves the encodings' name counters on
    cores.take()
    prove_action("lock_request")
    info = cores.take()
    assert info["queries"] > 0 and info["from_core"] == info["queries"]
