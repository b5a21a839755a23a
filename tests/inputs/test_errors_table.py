"""docs/errors.md, regenerated from the real commands: every bad input is refused with one
line and exit 2 before any work, partial runs exit 3. The test fails when the committed
table differs; TIERCHECK_WRITE_DOCS=1 rewrites it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from errors_rows import ROWS

from tiercheck.cli import main

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "errors.md"

HEAD = """# Errors and exit codes

Every command exits with one of four codes (also in every command's `--help`):

| exit | meaning |
|---|---|
| 0 | complete and clean |
| 1 | a property is violated, or the implementation disagrees with the spec |
| 2 | bad input: one line on stderr, nothing was run |
| 3 | inconclusive: a partial run (`--max-states`, `--time-limit`, `--max-memory`), a `prove` obligation out of z3's resource limit on every seed (INCONCLUSIVE), Ctrl-C, a dead worker |

Inputs are validated before any work (`tiercheck.inputs`: regular files under a size
cap, output paths writable, numbers bounded; `models/model_file.py`; traces against the
spec, `models/trace_check.py`). The table below is produced by
`tests/inputs/test_errors_table.py` (`TIERCHECK_WRITE_DOCS=1` rewrites it); the message is
the last line on stderr (`TMP` is the test's folder, `REPO` this repository).

| input | command | message | exit |
|---|---|---|---|
"""


def _row(tmp_path, monkeypatch, capsys, setup):
    monkeypatch.chdir(tmp_path)
    assert main(["check", "variants/host-starvation", "--out", "cex.json", "--quiet"]) == 1
    capsys.readouterr()
    argv = setup(tmp_path)
    if argv[0] == "check" and "--quiet" not in argv:
        argv = [*argv, "--quiet"]
    rc = main(argv)
    cap = capsys.readouterr()
    return argv, rc, cap.err


def test_errors_table(tmp_path_factory, monkeypatch, capsys):
    lines = []
    for what, setup, want in ROWS:
        d = tmp_path_factory.mktemp("row")
        argv, rc, err = _row(d, monkeypatch, capsys, setup)
        assert rc == want, (what, err)
        assert "Traceback" not in err
        if want == 2:
            assert err.count("\n") == 1 and err.startswith("tiercheck: "), (what, err)
        last = err.strip().splitlines()[-1] if err.strip() else "(none)"
        last = last.replace(str(d), "TMP").replace(str(REPO), "REPO").replace("|", "\\|")
        if len(last) > 200:
            last = last[:197] + "..."
        shown = " ".join(a if len(a) < 40 else a[:37] + "..." for a in (x.replace(str(REPO), "REPO") for x in argv))
        lines.append(f"| {what} | `tiercheck {shown}` | {last} | {rc} |")
    text = HEAD + "\n".join(lines) + "\n"
    if os.environ.get("TIERCHECK_WRITE_DOCS"):
        DOC.write_text(text)
    elif not DOC.exists() or DOC.read_text() != text:
        pytest.fail(f"{DOC} is out of date: rerun with TIERCHECK_WRITE_DOCS=1 and commit it")


def test_every_commands_help_names_the_exit_codes(capsys):
    from tiercheck.cli import COMMANDS

    for argv in [[c] for c in COMMANDS] + [["bench", "seed-table"], ["bench", "reclaim"], []]:
        assert main([*argv, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "exit status: 0 complete and clean; 1 violation found" in text, argv
        assert "2 bad input" in text and "3 inconclusive" in text, argv
