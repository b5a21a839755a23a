"""benchmarks/random_models.py: random models through the engines, compared. The default
run draws a few small models of a fixed seed through the fast comparisons; -m slow runs
a larger sample through every comparison. The comparison helpers are checked to fail on
a disagreement."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("bench_random_models", ROOT / "benchmarks" / "random_models.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rm = _load()


def _outcomes(out: Path):
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return [r for r in recs if r["compare"] != "model"]


def test_a_few_random_models_agree_across_engines(tmp_path):
    out = tmp_path / "fuzz"
    rc = rm.main(["--seed", "3", "--models", "3", "--out", str(out), "--time-limit", "10",
                  "--compare", "spec_holds,simulate,workers,symmetry,variant_tlc,replay", "--tlc-states", "0",
                  "--large-share", "0"])
    recs = _outcomes(out)
    assert rc == 0, [r for r in recs if r["outcome"] in rm.FAILING]
    by = {(r["model"], r["compare"]): r["outcome"] for r in recs}
    assert sum(v == "agree" for (m, c), v in by.items() if c == "spec_holds") >= 2
    assert any(c == "replay" and v == "agree" for (m, c), v in by.items())  # a variant's counterexample replayed
    assert "spec_holds" in (out / "summary.txt").read_text()
    assert (out / "models" / "3-0.toml").is_file()  # the models are kept for a reproduction


def test_a_large_model_forks_the_parallel_search(tmp_path):
    """Model 13 of seed 7 in the LARGE shape (2 ranks, 4 requests, 25,636 states): its
    widest levels pass the 800 states at which the checker forks, so `--workers 2`
    searches with two processes, and agrees with one."""
    out = tmp_path / "fuzz"
    rc = rm.main(["--seed", "7", "--only", "13", "--out", str(out), "--large-share", "1",
                  "--compare", "spec_holds,workers"])
    recs = _outcomes(out)
    assert rc == 0, [r for r in recs if r["outcome"] in rm.FAILING]
    (workers,) = [r for r in recs if r["compare"] == "workers"]
    assert workers["outcome"] == "agree" and workers["processes"] == 2, workers
    assert "seed 7; large 1" in (out / "summary.txt").read_text()


def _checked(counts, verdicts, complete=True, bounded=False):
    c = rm.Checked.__new__(rm.Checked)
    c.run = rm.Run.__new__(rm.Run)
    c.run.rc, c.run.out, c.run.err, c.run.wall, c.run.argv = 0, "", "", 0.0, ["check"]
    c.counts, c.verdicts, c.complete, c.bounded = counts, verdicts, complete, bounded
    c.violated = {p for p, v in verdicts.items() if v == "violated"}
    return c


def test_same_reports_a_count_or_verdict_difference(tmp_path):
    f = rm.Fuzz(_args(tmp_path))
    a = _checked((10, 20, 3), {"no_ghost": "holds"})
    f.same("m", "workers", a, _checked((10, 20, 3), {"no_ghost": "holds"}))
    f.same("m", "workers", a, _checked((11, 20, 3), {"no_ghost": "holds"}))
    f.same("m", "symmetry", a, _checked((5, 9, 3), {"no_ghost": "violated"}), props=["no_ghost"])
    f.same("m", "symmetry", a, _checked((5, 9, 3), {"no_ghost": "holds"}), props=["no_ghost"])
    assert f.table["workers"]["agree"] == 1 and f.table["workers"]["disagree"] == 1
    assert f.table["symmetry"]["agree"] == 1 and f.table["symmetry"]["disagree"] == 1


def test_the_parallel_comparisons_count_their_processes(tmp_path):
    f = rm.Fuzz(_args(tmp_path))
    a = _checked((10, 20, 3), {"no_ghost": "holds"})
    two = _checked((10, 20, 3), {"no_ghost": "holds"})
    two.run.out = "  10 distinct states, 20 transitions, depth 3, 0.50s (20 states/s, 2 workers), exploration complete"
    f.same("m", "workers", a, two)
    f.same("m", "cluster", a, two)
    f.same("m", "symmetry", a, two)  # not a parallel run: not counted
    assert f.processes == {"workers": {2: 1}, "cluster": {2: 1}}
    recs = _outcomes(tmp_path)
    assert [r.get("processes") for r in recs] == [2, 2, None]
    assert "workers  2 processes: 1" in f.summary(1, 1.0)


def test_runs_bounded_by_max_states_compare_and_time_limited_ones_do_not(tmp_path):
    f = rm.Fuzz(_args(tmp_path))
    a = _checked((20000, 77450, 15), {"no_ghost": "holds so far"}, complete=False, bounded=True)
    f.same("m", "workers", a, _checked((20000, 77450, 15), {"no_ghost": "holds so far"}, False, True))
    f.same("m", "workers", a, _checked((20000, 77451, 15), {"no_ghost": "holds so far"}, False, True))
    f.same("m", "workers", a, _checked((9000, 30000, 12), {"no_ghost": "holds so far"}, False, False))
    assert dict(f.table["workers"]) == {"agree": 1, "disagree": 1, "inconclusive": 1}
    run = rm.Run.__new__(rm.Run)
    run.rc, run.err = 0, ""
    run.out = ("  20,000 distinct states, 77,450 transitions, depth 15, 21.73s (920 states/s, 1 worker), "
               "exploration PARTIAL (--max-states 20000 reached)")
    assert rm.Checked(run).bounded and not rm.Checked(run).complete


def _args(out):
    import argparse

    return argparse.Namespace(out=str(out), compare=None, seed=0, time_limit=20, bounded_states=20000)


def test_violation_missing_needs_the_named_violation(tmp_path):
    cex = tmp_path / "cex.json"
    run = rm.Run(["check", "variants/release-busy", "--quiet", "--out", str(cex)], timeout=300)
    assert run.rc == 1, run.tail()
    trace = Path(rm._WRITTEN.findall(run.out)[0])
    assert rm.violation_missing(trace) == ""
    doc = json.loads(trace.read_text())
    prop = doc["#meta"]["tiercheck"]["property"]
    doc["#meta"]["tiercheck"]["property"] = "no_ghost" if prop != "no_ghost" else "counter_sanity"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doc))
    assert "holds" in rm.violation_missing(other)


def test_a_replay_may_stop_where_the_spec_trace_passes_another_violation(tmp_path):
    """variants/page-ceil-match's slot_conservation counterexample passes prefix_closed's
    violation at step 2 of 4 (the checker searches on past it): `replay` stops there, on
    the spec as it would on the reference, and that is no disagreement; a stop at a
    property the spec's own state there does not break is one."""
    from tiercheck.models.trace import read_trace

    cex = tmp_path / "cex.json"
    run = rm.Run(["check", "variants/page-ceil-match", "--quiet", "--out", str(cex)], timeout=300)
    trace = next(t for t in rm._WRITTEN.findall(run.out) if read_trace(t).prop == "slot_conservation")
    rep = rm.Run(["replay", trace, "--impl", "spec"], timeout=300)
    assert rep.rc == 1 and "step 2/4" in rep.out and rm.broken_names(rep.out) == ["prefix_closed"], rep.tail()
    assert rm.replay_ends_wrong(trace, rep) == ""
    rep.out = rep.out.replace("breaks prefix_closed:", "breaks no_ghost:")
    assert "at step 2 of 4, not the last" in rm.replay_ends_wrong(trace, rep)


@pytest.mark.slow  # tens of models through every engine: many minutes
def test_many_random_models_agree_across_every_engine(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("no Java runtime for TLC")
    out = tmp_path / "fuzz"
    rc = rm.main(["--seed", "11", "--models", "25", "--out", str(out), "--cluster-share", "0.2", "--large-share", "0"])
    recs = _outcomes(out)
    assert rc == 0, [r for r in recs if r["outcome"] in rm.FAILING]
    done = {r["compare"] for r in recs if r["outcome"] == "agree"}
    assert {"spec_holds", "simulate", "workers", "tlc", "conform", "variant_tlc", "replay"} <= done
