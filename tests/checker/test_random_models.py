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
                  "--compare", "spec_holds,simulate,workers,symmetry,variant_tlc,replay", "--tlc-states", "0"])
    recs = _outcomes(out)
    assert rc == 0, [r for r in recs if r["outcome"] in rm.FAILING]
    by = {(r["model"], r["compare"]): r["outcome"] for r in recs}
    assert sum(v == "agree" for (m, c), v in by.items() if c == "spec_holds") >= 2
    assert any(c == "replay" and v == "agree" for (m, c), v in by.items())  # a variant's counterexample replayed
    assert "spec_holds" in (out / "summary.txt").read_text()
    assert (out / "models" / "3-0.toml").is_file()  # the models are kept for a reproduction


def _checked(counts, verdicts, complete=True):
    c = rm.Checked.__new__(rm.Checked)
    c.run = rm.Run.__new__(rm.Run)
    c.run.rc, c.run.out, c.run.err, c.run.wall, c.run.argv = 0, "", "", 0.0, ["check"]
    c.counts, c.verdicts, c.complete = counts, verdicts, complete
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


def _args(out):
    import argparse

    return argparse.Namespace(out=str(out), compare=None, seed=0)


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


@pytest.mark.slow  # tens of models through every engine: many minutes
def test_many_random_models_agree_across_every_engine(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("no Java runtime for TLC")
    out = tmp_path / "fuzz"
    rc = rm.main(["--seed", "11", "--models", "25", "--out", str(out), "--cluster-share", "0.2"])
    recs = _outcomes(out)
    assert rc == 0, [r for r in recs if r["outcome"] in rm.FAILING]
    done = {r["compare"] for r in recs if r["outcome"] == "agree"}
    assert {"spec_holds", "simulate", "workers", "tlc", "conform", "variant_tlc", "replay"} <= done
