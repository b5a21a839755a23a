"""Repository hygiene a user would trip over: paths of one machine, timing bounds in tests."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MACHINE_PATH = re.compile(r"(?<![\w.<$])/(work|root|home|Users|mnt|opt)/")
# An assert on elapsed wall-clock time: `assert time.monotonic() - t0 < 3` and the like.
ELAPSED_BOUND = re.compile(r"^\s*assert\b.*\b(monotonic|perf_counter|time)\(\)\s*-\s*\w+\s*<")


def tracked_files() -> list:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (an unpacked sdist): nothing tracked to check")
    return [ROOT / p for p in out.decode().split("\0") if p]


def texts(paths):
    for path in paths:
        try:
            yield path, path.read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary (images) or deleted in the work tree


def test_no_absolute_machine_path_in_tracked_files():
    hits = []
    for path, text in texts(tracked_files()):
        rel = path.relative_to(ROOT).as_posix()
        for i, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                hits.append(f"{rel}:{i}: {line.strip()[:100]}")
    assert hits == [], "use a placeholder, a flag or an environment variable:\n" + "\n".join(hits)


def test_the_path_pattern_catches_what_it_should():
    slash = "/"  # (the examples are built so that this file holds no such path itself)
    assert MACHINE_PATH.search(f"run {slash}work/sglang-lane/venv/bin/python") and MACHINE_PATH.search(f"cd {slash}root/x")
    assert not MACHINE_PATH.search("<lane>/bin/python") and not MACHINE_PATH.search("docs/work/x")


def test_no_test_asserts_a_wall_clock_bound():
    """Speed belongs in benchmarks/: on a loaded machine a bound around process start-up or
    scheduling fails for reasons the code under test does not control."""
    hits = []
    for path, text in texts(sorted((ROOT / "tests").rglob("*.py"))):
        if path == Path(__file__).resolve():
            continue  # the pattern's own examples
        for i, line in enumerate(text.splitlines(), 1):
            if ELAPSED_BOUND.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert hits == []
    assert ELAPSED_BOUND.search("    assert time.monotonic() - t0 < 10  # noticed")
