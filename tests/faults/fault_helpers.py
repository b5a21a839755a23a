"""Running `tiercheck` as a real process and hitting it with a fault (a signal) at a
known point of its run, read from its own progress lines."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

HANG = 120  # a run that outlives this after the fault hangs (a bound, not a timing)


def start(argv, cwd) -> subprocess.Popen:
    """`tiercheck ARGV` in its own session (signals go to it and its workers only)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tiercheck", *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # a shell's background job inherits SIGINT ignored, and Python keeps it ignored:
        # give the run the default disposition, as an interactive Ctrl-C would find it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for_depth(proc: subprocess.Popen, depth: int) -> list:
    """Read progress lines until the search expands level ``depth``; returns them."""
    seen = []
    for line in proc.stderr:
        seen.append(line)
        m = re.search(r"depth (\d+),", line)
        if m and int(m.group(1)) >= depth:
            return seen
    raise AssertionError(f"the run ended before depth {depth}: {''.join(seen)}")


def children(pid: int) -> list:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(x) for x in (task / "children").read_text().split()]
    return kids


def finish(proc: subprocess.Popen, fault: str = ""):
    """(exit code, stdout, stderr) once the run ends; fails if it hangs. Prints how long
    the run took to report after the fault (visible with -s; docs/faults.md)."""
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=HANG)
        if fault:
            print(f"\nfault {fault}: exit {proc.returncode} {time.monotonic() - t0:.1f}s after it")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"still running {HANG}s after the fault: teardown hangs") from None
    return proc.returncode, out, err


def gone(pids, within: float = HANG) -> bool:
    """Every process in ``pids`` has exited (reaped or a zombie of a dead parent)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
        if not alive:
            return True
        time.sleep(0.2)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"
