"""Distinct disagreements (tiercheck.conformance.distinct) on the reference implementation
with two bug variants, one hiding the other: D->H admission decided per rank
(partial-backup-leak) and the early return before writing_check's all-reduce
(early-return-collective), which only shows once the ranks' write queues differ, i.e.
after the first bug. A run stops at the first; continuing past it finds the second, and
the first bug's other symptom: the rejection it counts by the wrong reason."""

from dataclasses import replace

import pytest

from tiercheck import exits
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.distinct import find_distinct, first_new, signature
from tiercheck.models import model_file
from tiercheck.models.trace import read_trace
from tiercheck.spec.action import act

BOTH = {"partial-backup-leak", "early-return-collective"}


def _cfg():
    return replace(model_file.load("variants/partial-backup-leak").config, variants=frozenset())


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    out = tmp_path_factory.mktemp("distinct")
    findings, totals = find_distinct(driver_factory("reference", _cfg(), BOTH), examples=30, steps=12, seed=0,
                                     record_dir=str(out), label="ref", shrink_budget=10)
    return findings, totals


def test_a_bug_behind_another_is_found_as_its_own_finding(found):
    findings, totals = found
    sigs = [f["signature"] for f in findings]
    assert len(sigs) == 3 and len(set(sigs)) == 3, sigs
    leak, hang, reason = findings
    assert leak["signature"].startswith("state at insert:") and leak["signature"].endswith("(some ranks)")
    assert leak["passes"] == []
    assert hang["signature"] == "state at writing_check: hung"
    assert hang["passes"] == [leak["signature"]]  # the trace records what it passes
    assert read_trace(hang["file"]).meta["passes"] == [leak["signature"]]
    # Past the leak, the per-rank admission also counts a rejection the ranks disagreed on
    # as a failed allocation (the same state: the write-rejection counters' finding).
    assert 'reason="rank_disagreement"' in reason["signature"] and reason["passes"] == [leak["signature"]]
    # A fourth round, passing all three, finds nothing new (unless the three used up the
    # 30 examples: how many a round runs before its finding varies with the machine's load).
    assert totals["rounds"] == 4 or (totals["rounds"] == 3 and totals["examples"] >= 30), totals


def test_signature_names_the_disagreement_not_the_trace():
    cfg = _cfg()
    factory = driver_factory("reference", cfg, {"partial-backup-leak"})
    model = factory().model
    sigs = set()
    for actions in ([act("insert", req=0, fail=(0,))], [act("insert", req=0, fail=(1,))]):
        out = first_new(factory, actions, ())
        sigs.add(signature(model, out.mismatch, actions))
    assert len(sigs) == 1  # the failing rank differs, the disagreement does not
    # passing it, the same trace agrees (nothing else is wrong with it)
    out = first_new(factory, [act("insert", req=0, fail=(1,))], sigs)
    assert out.mismatch is None and out.passed == list(sigs)


def test_replay_passes_what_the_trace_passes(found, capsys):
    from tiercheck.cli import main

    trace = found[0][1]["file"]
    variants = [x for v in sorted(BOTH) for x in ("--variant", v)]
    assert main(["replay", trace, *variants]) == exits.FOUND
    assert "passing the known disagreement(s)" in capsys.readouterr().out
    # the hidden bug fixed: the trace passes the first and agrees
    assert main(["replay", trace, "--variant", "partial-backup-leak"]) == exits.OK
    # the first bug fixed too: the trace's finding cannot be reached, which is no disagreement
    assert main(["replay", trace]) == exits.OK
    assert "not reached" in capsys.readouterr().out


def test_show_marks_where_a_trace_passes_a_known_disagreement(found, capsys):
    from tiercheck.cli import main
    from tiercheck.models.trace_check import check_passing

    trace = found[0][1]["file"]
    _model, at = check_passing(read_trace(trace))
    assert at is not None and read_trace(trace).actions[at - 1].name == "insert"  # the per-rank admission
    assert main(["show", trace]) == exits.OK
    out = capsys.readouterr().out
    assert f"passes the known disagreement: {found[0][0]['signature']}" in out
    marked = [line for line in out.splitlines() if "<- passed" in line]
    assert len(marked) == 1 and marked[0].lstrip().startswith(f"{at}. insert")
