"""The units of tiercheck.conformance.s13_kills_kb (session 15), each run as the mutation
suite runs it, against the seed-13 survivor it kills (recompiled from its source with the
mutant's one edit): the unit passes on the implementation and fails with the mutant in."""

from __future__ import annotations

from tiercheck.conformance import s13_kills_kb as kb
from tiercheck.impl.hicache.write_path import WritePath

from mutant_helpers import load_mutation_suite, recompiled

MS = load_mutation_suite("bench_mutation_suite_kB")
UNITS = dict(MS.s13_kills_kb_units())


def test_the_units_are_in_the_mutation_suite():
    assert list(UNITS) == [f"situation {s.name}" for s in kb.SITUATIONS]


def _unit(sit) -> bool:
    return MS.run_unit(sit.name, UNITS[f"situation {sit.name}"])


def test_every_rank_returning_early_agrees():
    assert _unit(kb.SITUATIONS[0])


def test_an_early_return_reporting_a_commit_is_caught(monkeypatch, capsys):
    # write_path.py:198: the early return reports 1 commit where nothing was committed.
    monkeypatch.setattr(WritePath, "writing_check", recompiled(
        WritePath.writing_check, "return 0  # the bug", "return 1  # the bug")["writing_check"])
    assert not _unit(kb.SITUATIONS[0])
    assert "writing_check returned 1, the spec's state change says 0" in capsys.readouterr().out
