"""The benchmark script runs end to end at a small size (figures printed, never asserted)."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cp_planner.py"


def load_script():
    spec = importlib.util.spec_from_file_location("cp_planner_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_small_run_prints_identical_plans_and_sync_counts(capsys):
    assert load_script().main(["--leaves", "120", "--victims", "12", "--cp", "4"]) == 0
    out = capsys.readouterr().out
    assert "plans identical (victims in order, freed, remaining): True" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in ("naive", "memo", "fast")}
    syncs = {name: int(row[1].replace(",", "")) for name, row in rows.items()}
    assert syncs["fast"] == syncs["memo"] == 120  # one per distinct candidate
    assert syncs["naive"] >= 12 * 100 * 4  # victims x candidates left x cp


def test_bad_arguments_give_one_line(capsys):
    assert load_script().main(["--cp", "0"]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "must be positive" in err
