"""The bad-input rows of docs/errors.md: each builds its input in a folder and names the
command line; the test runs them and writes (or compares) the table."""

from __future__ import annotations

import json
import os
from pathlib import Path

TOUR = Path(__file__).resolve().parents[1] / "generated" / "wt-2r" / "tour.json"  # a shipped tour (tests/)


def nested_toml(depth: int) -> str:
    return "[model]\nrequests = " + "[" * depth + "]" * depth + "\n"


def many_requests(n: int) -> str:
    return "[model]\nrequests = [" + ", ".join(f"[{i}]" for i in range(n)) + "]\n"


def damaged_trace(d: Path, name: str, edit) -> str:
    """A copy of the host-starvation counterexample (cex.json) with its actions edited."""
    doc = json.loads((d / "cex.json").read_text())
    edit(doc["#meta"]["tiercheck"]["actions"])
    (d / name).write_text(json.dumps(doc))
    return name


def damaged_tour(d: Path) -> str:
    doc = json.loads(TOUR.read_text())
    doc["traces"][3]["actions"][2] = {"action": "evict", "node": 99}
    (d / "tour.json").write_text(json.dumps(doc))
    return "tour.json"


def _set(i, value):
    return lambda acts: acts.__setitem__(i, value)


def _w(d: Path, name: str, text) -> str:
    p = d / name
    p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text)
    return name


def _fifo(d: Path) -> str:
    os.mkfifo(d / "model.fifo")
    return "model.fifo"


# (what, setup(folder) -> argv, exit status). Setups run in the folder; cex.json exists.
ROWS = [
    # model files
    ("`[check] properties = []`", lambda d: ["check", _w(d, "m.toml", '[model]\nrequests = [[1, 2]]\n[check]\nproperties = []\n')], 2),
    ("`expect_violation = [\"no_ghost\"]`", lambda d: ["check", _w(d, "m.toml", '[model]\nrequests = [[1, 2]]\n[check]\nexpect_violation = ["no_ghost"]\n')], 2),
    ("an array nested 5,000 deep", lambda d: ["check", _w(d, "m.toml", nested_toml(5000))], 2),
    ("`/dev/zero` as the model", lambda d: ["check", "/dev/zero"], 2),
    ("a FIFO as the model", lambda d: ["check", _fifo(d)], 2),
    ("a directory as the model", lambda d: ["check", "."], 2),
    ("a binary file as the model", lambda d: ["check", _w(d, "m.toml", b"\x00\xff\xfe" * 10)], 2),
    ("a model file over the size cap", lambda d: ["check", _w(d, "m.toml", "#" * (2 << 20))], 2),
    ("10,000 requests", lambda d: ["check", _w(d, "m.toml", many_requests(10_000))], 2),
    # traces
    ("replay: an unknown action", lambda d: ["replay", damaged_trace(d, "t.json", _set(0, {"action": "frobnicate"}))], 2),
    ("replay: `rank=7` on a 1-rank model", lambda d: ["replay", damaged_trace(d, "t.json", _set(2, {"action": "write_dma_done", "rank": 7}))], 2),
    ("replay: `rank=-1`", lambda d: ["replay", damaged_trace(d, "t.json", _set(2, {"action": "write_dma_done", "rank": -1}))], 2),
    ("replay: a string request", lambda d: ["replay", damaged_trace(d, "t.json", _set(0, {"action": "insert", "req": "x"}))], 2),
    ("replay: `pages=10**12`", lambda d: ["replay", damaged_trace(d, "t.json", _set(0, {"action": "insert", "req": 0, "pages": 10**12}))], 2),
    ("replay: a step the spec does not enable", lambda d: ["replay", damaged_trace(d, "t.json", _set(0, {"action": "load_dma_done", "rank": 0}))], 2),
    ("show: an unknown action", lambda d: ["show", damaged_trace(d, "t.json", _set(0, {"action": "frobnicate"}))], 2),
    ("replay: a tour with a bad step", lambda d: ["replay", damaged_tour(d)], 2),
    ("replay: a trace nested 100,000 deep", lambda d: ["replay", _w(d, "t.json", "[" * 100_000)], 2),
    # command-line numbers
    ("`check --workers 10000`", lambda d: ["check", "wt-1r", "--workers", "10000"], 2),
    ("`replay --ranks 0`", lambda d: ["replay", "cex.json", "--ranks", "0"], 2),
    ("`replay --ranks 100000`", lambda d: ["replay", "cex.json", "--ranks", "100000"], 2),
    ("`conform --examples -5`", lambda d: ["conform", "--examples", "-5"], 2),
    ("`conform --steps 0`", lambda d: ["conform", "--steps", "0"], 2),
    ("`generate --max-len -1`", lambda d: ["generate", "wt-1r", "-o", "suite", "--max-len", "-1"], 2),
    ("`check --time-limit 0`", lambda d: ["check", "wt-1r", "--time-limit", "0"], 2),
    ("`check --max-memory 12`", lambda d: ["check", "wt-1r", "--max-memory", "12"], 2),
    # output paths, checked before any work
    ("`check --out DIR`", lambda d: ["check", "variants/host-starvation", "--out", "."], 2),
    ("`prove --report FILE`", lambda d: ["prove", "--report", _w(d, "report.txt", "")], 2),
    ("`generate -o FILE`", lambda d: ["generate", "wt-1r", "-o", _w(d, "suite.txt", "")], 2),
    ("`show --html` under a file", lambda d: ["show", "cex.json", "--html", _w(d, "x", "") + "/v.html"], 2),
    ("`show --html` to a FIFO", lambda d: ["show", "cex.json", "--html", _fifo(d)], 2),
    # outcomes
    ("a clean model", lambda d: ["check", "wt-1r"], 0),
    ("a model with a violation", lambda d: ["check", "variants/host-starvation"], 1),
    ("`check --max-states 10` (partial)", lambda d: ["check", "wt-storage-2r", "--max-states", "10"], 3),
    ("a clean replay", lambda d: ["replay", "cex.json", "--impl", "spec"], 0),
    ("a generated tour (every trace in it)", lambda d: ["replay", str(TOUR), "--impl", "spec"], 0),
]
