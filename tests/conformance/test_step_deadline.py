"""A step that never returns ends the run with a finding that names where it loops
(tiercheck.conformance.step_deadline), not a stuck job: the seed-12 sample's timed-out
mutant (eviction.py:50 `break` -> `continue`, an evict that spins once nothing is
evictable) is the case in point."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest

from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.generated import load_tour
from tiercheck.conformance.runner import replay
from tiercheck.conformance.step_deadline import ENV, StepTimeout, step_deadline, step_seconds
from tiercheck.errors import UserError
from tiercheck.impl.hicache.eviction import Eviction

from mutant_helpers import ROOT, load_mutation_suite, recompiled

TOUR = ROOT / "tests" / "generated" / "request-locks-evicts-1r" / "tour.json"
pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the deadline is SIGALRM")


def _spinning_evict():
    """eviction.py:50 `break` -> `continue`: once nothing is evictable, evict spins."""
    return recompiled(Eviction.evict, "if not leaves:\n            break", "if not leaves:\n            continue")["evict"]


def _replay_tour0():
    mf, traces = load_tour(TOUR)
    actions, probes = traces[0]
    driver = driver_factory("reference", mf.config)()
    try:
        return replay(driver, actions, expect_disabled=probes)
    finally:
        driver.close()


def test_the_tour_agrees_under_the_deadline(monkeypatch):
    monkeypatch.setenv(ENV, "2")
    assert _replay_tour0().mismatch is None


def test_an_evict_that_spins_is_reported_at_its_loop(monkeypatch):
    monkeypatch.setenv(ENV, "2")
    mutant = _spinning_evict()
    monkeypatch.setattr(Eviction, "evict", mutant)
    mm = _replay_tour0().mismatch
    assert mm is not None and mm.kind == "error"
    assert "StepTimeout: the implementation did not return within 2 s" in mm.message
    # The main thread only waits for the lock-step rank: the report names the rank's thread
    # and the line it spins on, and the action that started it.
    # (The loop spans evict and the tree walk it calls: either is where it was caught.)
    assert re.search(r"still running in thread lockstep-rank0 at impl/hicache/(eviction|tree)\.py:\d+", mm.message)
    assert "raised by insert(" in mm.message
    # ... and the rank's thread was stopped, not left spinning for the rest of the process.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _spinning():
        time.sleep(0.1)
    assert not _spinning()


def _spinning() -> bool:
    return any("eviction.py" in f.filename for fr in sys._current_frames().values()
               for f in traceback.extract_stack(fr))


def test_the_mutation_suite_unit_fails_with_the_mutant(monkeypatch):
    monkeypatch.setenv(ENV, "2")
    ms = load_mutation_suite("bench_mutation_suite_deadline")
    [(name, run)] = [u for u in ms.tour_units(tours={"request-locks-evicts-1r"}, first=1)]
    assert run()
    mutant = _spinning_evict()
    monkeypatch.setattr(Eviction, "evict", mutant)
    assert not run()


def test_a_main_thread_loop_is_named_too():
    def spin():
        while True:
            pass

    with pytest.raises(StepTimeout) as info:
        with step_deadline(0.5):
            spin()
    assert "still running" not in str(info.value)
    assert info.value.frames[-1].name == "spin"


def test_an_idle_worker_left_open_is_not_blamed_for_a_main_thread_loop():
    """A lock-step driver another test (or caller) left open: its rank worker threads wait
    idle with implementation frames on their stacks. The main thread's own loop is still
    the one named (CI once saw `still running in thread lockstep-rank0` here)."""
    def spin():
        while True:
            pass

    mf, _traces = load_tour(TOUR)
    driver = driver_factory("reference", mf.config)()
    try:
        driver.apply(_traces[0][0][0])  # the rank threads have run a step and wait for the next
        assert any(t.name.startswith("lockstep-rank") for t in threading.enumerate())
        with pytest.raises(StepTimeout) as info:
            with step_deadline(0.5):
                spin()
        assert "still running" not in str(info.value)
        assert info.value.frames[-1].name == "spin"
    finally:
        driver.close()


def test_an_outer_timer_is_kept():
    fired = []

    def outer(signum, frame):
        fired.append(time.monotonic())

    old = signal.signal(signal.SIGALRM, outer)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30.0)
        with step_deadline(5.0):
            time.sleep(0.2)
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 25.0 < left < 30.0  # re-armed with what was left of it
        assert signal.getsignal(signal.SIGALRM) is outer
        # An outer timer due before the deadline is left to fire: the deadline is not armed.
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with step_deadline(5.0):
            time.sleep(1.0)
        assert fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_the_setting(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert step_seconds() == 120.0
    monkeypatch.setenv(ENV, "0")
    assert step_seconds() is None
    monkeypatch.setenv(ENV, "7.5")
    assert step_seconds() == 7.5
    for bad in ("soon", "-1", "inf", "nan"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(UserError, match=ENV):
            step_seconds()


def test_a_bad_setting_is_a_one_line_error(tmp_path):
    env = {**os.environ, ENV: "soon"}
    proc = subprocess.run([sys.executable, "-m", "tiercheck", "conform", "--impl", "reference", "--model",
                           "wt-mirror-1r", "--examples", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300, cwd=Path(tmp_path))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and ENV in lines[0] and "Traceback" not in proc.stderr
