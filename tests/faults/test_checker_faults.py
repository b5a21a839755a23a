"""The checker under faults: Ctrl-C and a worker killed (as the OOM killer would) end the
run with its partial summary, exit 3 (1 when a violation was already found, which is then
written out), and no worker left behind."""

from __future__ import annotations

import os
import re
import signal

from fault_helpers import children, finish, gone, start, wait_for_depth

from tiercheck.models import model_file
from tiercheck.models.trace import read_trace

# Seed 000's two-rank model (10^6 states) with the release-busy bug: release_safety breaks
# at depth 11, and the search goes on for the other properties.
BUSY_2R = (model_file.LIBRARY / "wt-mirror-2r.toml").read_text().replace(
    'faults = ["partial_storage"]', 'faults = ["partial_storage"]\nvariants = ["release-busy"]'
).replace("slow = true", "")


def test_sigint_keeps_the_partial_summary_and_the_counterexample_found(tmp_path):
    (tmp_path / "busy.toml").write_text(BUSY_2R)
    proc = start(["check", "busy.toml", "--workers", "2", "--out", "cex.json"], tmp_path)
    wait_for_depth(proc, 13)  # level 11 is expanded: the counterexample is known
    workers = children(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    rc, out, err = finish(proc, "SIGINT after a violation was found")
    assert rc == 1, err  # a violation was found before the interrupt: that is definite
    assert "exploration PARTIAL (interrupted (SIGINT))" in out
    assert "release_safety           violated" in out and "no_ghost                 holds so far" in out
    assert "Traceback" not in err
    trace = read_trace(tmp_path / "cex.json")
    assert trace.prop == "release_safety" and len(trace.actions) == 11
    assert not list(tmp_path.glob("*.tmp"))
    assert gone(workers)


def test_sigint_without_a_finding_is_inconclusive(tmp_path):
    proc = start(["check", "wt-mirror-2r", "--workers", "2"], tmp_path)
    wait_for_depth(proc, 12)
    workers = children(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)
    rc, out, err = finish(proc, "SIGINT")
    assert rc == 3 and "exploration PARTIAL (interrupted (SIGINT))" in out
    assert "no 'holds' below is a proof" in out and "inconclusive: interrupted (SIGINT) (exit 3)" in err
    assert "Traceback" not in err
    assert gone(workers)


def test_a_killed_worker_ends_the_run_with_its_partial_summary(tmp_path):
    proc = start(["check", "wt-mirror-2r", "--workers", "2"], tmp_path)
    wait_for_depth(proc, 12)  # levels this deep are expanded by the workers
    workers = children(proc.pid)
    assert len(workers) == 2
    os.kill(workers[1], signal.SIGKILL)
    rc, out, err = finish(proc, "SIGKILL of a checker worker")
    assert rc == 3, err
    assert re.search(rf"worker [01] \(pid {workers[1]}\) died \(killed by signal 9\)", out), out
    assert "states/s, 2 workers), exploration PARTIAL" in out and "holds so far" in out
    assert "Traceback" not in err and "EOFError" not in err
    assert gone(workers)
