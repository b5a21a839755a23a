"""The mutation benchmark's own machinery (needs the bench extra's cosmic-ray): a session
is classified (annotations equivalent, CUDA-only code left out, unreached lines survived
without a run) and sampled with a seed, and reported; the suite's test selection picks
the units that execute a changed line. No mutant is run here (that is the benchmark)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray")
ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # cosmic-ray init and a compile of every mutant of impl/transfer.py: minutes under load
def test_classify_samples_outside_cuda_and_annotations_and_unreached_lines_survive(tmp_path, capsys):
    mb = _load("mutation")
    if shutil.which(mb.cosmic_ray()) is None:
        pytest.skip("no cosmic-ray command")
    cfg, session = tmp_path / "cr.toml", tmp_path / "s.sqlite"
    cfg.write_text(mb.config(["impl/transfer.py"], ["--examples", "1"], 60, tmp_path / "map.json"))
    subprocess.run([mb.cosmic_ray(), "init", str(cfg), str(session)], cwd=ROOT, check=True)
    counts = mb.classify(session, {"impl/transfer.py": []}, 3, seed=0)  # nothing reached
    assert counts["sampled"] == 3 and counts["population"] > 3
    assert counts[mb.ANNOTATION] > 0 and counts[mb.NOT_REACHED] == 3
    assert counts[mb.CUDA] > 0 or mb.torch_cuda()
    with mb.use_db(str(session), mb.WorkDB.Mode.open) as db:
        assert not list(db.pending_work_items)
    assert mb.report(session) == 0
    out = capsys.readouterr().out
    assert "score: 0/3 = 0.0%" in out and out.count("(not reached)") == 3


def test_annotation_spans_only_where_annotations_are_deferred(tmp_path, monkeypatch):
    mb = _load("mutation")
    src = "def f(x: int | None) -> int | None:\n    return x | 1\n"
    (tmp_path / "lazy.py").write_text("from __future__ import annotations\n" + src)
    (tmp_path / "eager.py").write_text(src)
    monkeypatch.setattr(mb, "ROOT", tmp_path)
    assert mb.annotation_spans(Path("eager.py")) == []
    spans = mb.annotation_spans(Path("lazy.py"))
    assert ((2, 9), (2, 19)) in spans and ((2, 24), (2, 34)) in spans
    assert not any(a <= (3, 11) <= b for a, b in spans)  # the body's `x | 1` is code


def test_selection_runs_the_units_that_execute_a_changed_line(tmp_path, monkeypatch):
    ms = _load("mutation_suite")
    (tmp_path / "impl").mkdir()
    (tmp_path / "impl" / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    monkeypatch.setattr(ms, "ROOT", tmp_path)
    doc = {"import": {"impl/a.py": [1]},
           "sources": {"impl/a.py": "x = 1\ny = 2\nz = 3\n"},
           "units": [{"name": "slow", "seconds": 9.0, "lines": {"impl/a.py": [2, 3]}},
                     {"name": "fast", "seconds": 1.0, "lines": {"impl/a.py": [2]}},
                     {"name": "other", "seconds": 0.5, "lines": {"impl/a.py": [3]}}]}
    todo = [(u["name"], u["name"]) for u in doc["units"]]
    assert ms.selected(doc, todo) == []  # unchanged: nothing to run
    (tmp_path / "impl" / "a.py").write_text("x = 1\ny = 2 + 1\nz = 3\n")
    assert [n for n, _ in ms.selected(doc, todo)] == ["fast", "slow"]
    (tmp_path / "impl" / "a.py").write_text("x = 0\ny = 2\nz = 3\n")  # an import-time line: every unit
    assert [n for n, _ in ms.selected(doc, todo)] == ["slow", "fast", "other"]


def test_a_part_of_the_suite_and_the_lines_its_map_reaches(tmp_path, capsys):
    ms = _load("mutation_suite")
    args = ms.argparse.Namespace(tours_only=True, unit=["tour wt-2r 0"])
    assert [n for n, _ in ms.units(args)] == ["tour wt-2r 0", "tour wt-2r 0 gloo"]
    doc = {"import": {"impl/a.py": [1]}, "sources": {"impl/a.py": ""},
           "units": [{"name": "u", "seconds": 1.0, "lines": {"impl/a.py": [4, 2]}}]}
    assert ms.reached(doc, "impl/a.py") == [1, 2, 4]
    (tmp_path / "m.json").write_text(ms.json.dumps(doc))
    assert ms.main(["--reached", str(tmp_path / "m.json"), "impl/a.py"]) == 0
    assert capsys.readouterr().out == "impl/a.py: 1 2 4\n"
    assert ms.main(["--reached", str(tmp_path / "m.json"), "impl/b.py"]) == 2


def test_sampled_reach_score_is_reach_times_kill_rate_with_a_wilson_interval(capsys):
    mb = _load("mutation")
    lo, hi = mb.wilson(45, 50)
    assert 0.78 < lo < 0.79 and 0.95 < hi < 0.96  # the textbook Wilson interval of 45/50
    assert mb.wilson(0, 0) == (0.0, 1.0)
    tot = mb.Counter({"killed": 45, "survived": 4, "timed out": 1, "not reached": 100})
    pop = mb.Counter({mb.NOT_SAMPLED_REACHED: 850, "pending": 0})
    mb.sampled_reach_report(tot, pop)
    out = capsys.readouterr().out
    assert "900 of 1000 runnable mutants" in out and "45/50 = 90.0%" in out
    assert "estimated score over every non-equivalent mutant: 81.0%" in out


def test_a_rerun_finds_a_mutant_again_after_the_code_above_it_changed():
    """cosmic-ray numbers a mutant by its operator's occurrence in the file: an edit above
    it shifts the number, so a rerun on changed code finds it by the edit it makes."""
    mb = _load("mutation")
    old = "def f(a, b):\n    return a < b\n\n\ndef g(a, b):\n    return a < b or a < 0\n"
    new = "def h(a):\n    return a < 3\n\n\n" + old.replace("def g(a, b):", "def g(a, b):  # changed")
    op = "core/ReplaceComparisonOperator_Lt_Gt"

    class M:  # a session's mutation record: g's `a < 0`, the third `<` of the old code
        operator_name, operator_args, occurrence, start_pos = op, None, 2, (6, 22)

    assert mb.relocate(M, old, old) == 2
    assert mb.relocate(M, old, new) == 3  # h's `<` comes first now
    assert mb.relocate(M, old, new.replace("a < 0", "a <= 0")) is None  # that code is gone


def test_a_catalogued_bug_agrees_with_its_twin_in_the_spec_and_departs_from_the_fixed_spec():
    ms = _load("mutation_suite")
    from dataclasses import replace

    from tiercheck.models import model_file

    cfg = model_file.load("variants/split-slice-off-by-one").config
    base = replace(cfg, variants=frozenset())
    bug = replace(base, variants=frozenset({"split-slice-off-by-one"}))
    short = ms.shortest_disagreement(ms.Model(base), ms.Model(bug))
    assert ms._twin_departs(bug, short, "split-slice-off-by-one") == ""
    # Against the fixed spec the same trace departs at its last step.
    assert ms._twin_departs(base, short, "split-slice-off-by-one").startswith(f"step {len(short) - 1} ")
    assert dict(ms.variant_units())["variant split-slice-off-by-one"]()


def test_an_equivalent_entry_may_name_one_mutant_of_an_operator_by_the_line_it_writes():
    mut = _load("mutation")
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-        if need == 0:\n+        if need == -1:\n"
    eq = {"impl/x.py:7:core/NumberReplacer => if need == -1:"}
    assert mut.mutated_line(diff) == "if need == -1:"
    assert mut.is_equivalent(eq, "impl/x.py:7", "impl/x.py:7:core/NumberReplacer", diff)
    other = diff.replace("+        if need == -1:", "+        if need == 1:")
    assert not mut.is_equivalent(eq, "impl/x.py:7", "impl/x.py:7:core/NumberReplacer", other)
    assert mut.is_equivalent({"impl/x.py:7:core/NumberReplacer"}, "impl/x.py:7", "impl/x.py:7:core/NumberReplacer", other)


def test_every_equivalent_entry_parses_and_names_a_line():
    for entry in _load("mutation").equivalents():
        where = entry.split(" => ")[0].split(":")
        assert where[0].startswith("impl/") and where[1].isdigit(), entry


def test_no_mutant_is_judged_twice():
    # Two helpers judging one survivor write two reasons; one of them would go stale.
    path = ROOT / "benchmarks" / "mutation_equivalent.txt"
    keys = [line.split("  #")[0].strip() for line in path.read_text().splitlines()]
    keys = [k for k in keys if k and not k.startswith("#")]
    assert not [k for k in set(keys) if keys.count(k) > 1]


def test_only_the_operators_that_can_break_syntax_are_compiled():
    mut = _load("mutation")

    class M:
        operator_name = "core/NumberReplacer"

    assert mut.compiles(M())  # no parse: a number for a number keeps the code valid
    assert "core/ReplaceBinaryOperator_Mul_" in mut.MAY_NOT_COMPILE


def test_loading_the_suite_loads_no_implementation_module():
    # The map traces import lines from the tracer's start: an implementation module the
    # suite's own imports load before it would leave every import line unmapped.
    import sys

    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('s', sys.argv[1]); "
            "spec.loader.exec_module(importlib.util.module_from_spec(spec)); "
            "print(sorted(m for m in sys.modules if m.startswith('tiercheck.impl')))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "benchmarks" / "mutation_suite.py")],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_rerun_without_its_session_map_is_a_one_line_error(tmp_path):
    session = tmp_path / "s.sqlite"
    session.write_bytes(b"")  # a session copied without the .map.json beside it
    with pytest.raises(SystemExit, match=r"s\.sqlite\.map\.json not found"):
        _load("mutation").main(["--session", str(session), "--rerun-survivors"])
