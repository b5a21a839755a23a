"""Two survivors of the seed-13 mutation sample, both on the gloo driver's stall report
(impl/hicache/gloo.py:173, `str(exc).splitlines()[0][:300]`), killed by the fault unit
"stall beside a long failure" (tiercheck.conformance.verdict_faults): rank 1 stopped,
rank 0 failing at once with a two-line error whose first line is over 300 characters.

- `[0]` -> `[-1]`: the report quotes the error's last line;
- `[:300]` -> `[:301]`: the quote runs one character past the documented cut.

Every failure the suite raised before had a one-line message under 300 characters, on
which both mutants agree with the code."""

from __future__ import annotations

import pytest

from tiercheck.conformance import verdict_faults as vf
from tiercheck.conformance.process_faults import guarded
from tiercheck.impl.hicache.gloo import GlooHiCache

from mutant_helpers import load_mutation_suite, recompiled

QUOTE = "str(exc).splitlines()[0][:300]"
WRONG = "the stall report does not quote rank 0's error by its first line cut at 300 characters"


def test_the_unit_is_a_fault_unit_of_the_mutation_suite():
    names = [n for n, _ in load_mutation_suite("bench_mutation_suite_s13g").fault_units()]
    assert "fault stall beside a long failure" in names


@pytest.mark.gloo
def test_the_stall_report_quotes_the_first_line_cut_at_300():
    assert guarded(vf.stall_beside_a_long_failure) == ""


@pytest.mark.gloo
@pytest.mark.parametrize("mutant", [  # each waits out a real gloo timeout (~15 s): one by default
    "str(exc).splitlines()[-1][:300]",
    pytest.param("str(exc).splitlines()[0][:301]", marks=pytest.mark.slow),
])
def test_a_report_quoting_another_line_or_length_is_caught(monkeypatch, mutant):
    made = recompiled(GlooHiCache._call, QUOTE, mutant)
    monkeypatch.setattr(GlooHiCache, "_call", made["_call"])
    got = guarded(vf.stall_beside_a_long_failure)
    assert got.startswith(WRONG), got
