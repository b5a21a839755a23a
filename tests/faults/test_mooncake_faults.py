"""The Mooncake master killed (SIGKILL) in the middle of `tiercheck bench seed-table`: the
client sees it gone and stops calling it, the arm fails with its
counters (failed backups, pages in store) in the printed table, the run exits 1 and its
temporary directories are gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_helpers import HANG, children

from tiercheck.errors import UserError
from tiercheck.impl.storage.mooncake_master import find_master_binary

# About a minute (two arms, a Mooncake master each): behind -m slow; the guard's logic
# runs by default in tests/storage/test_storage_guard.py.
pytestmark = [pytest.mark.mooncake, pytest.mark.slow]


def _require_mooncake():
    try:
        from tiercheck.impl.storage.mooncake import load_store_class

        load_store_class()
    except UserError as exc:
        reason = str(exc)
    else:
        reason = None if find_master_binary() else "mooncake_master binary not found"
    if reason and os.environ.get("TIERCHECK_REQUIRE_MOONCAKE") == "1":
        pytest.fail(f"TIERCHECK_REQUIRE_MOONCAKE=1 but {reason}", pytrace=False)
    if reason:
        pytest.skip(reason)


def _master(pid: int):
    for k in children(pid):
        try:
            if "master" in Path(f"/proc/{k}/comm").read_text():
                return k
        except OSError:
            pass
    return None


def test_a_killed_master_fails_the_arm_with_its_counters_and_leaves_no_temp_dirs(tmp_path):
    _require_mooncake()
    env = dict(os.environ, TMPDIR=str(tmp_path))
    argv = [sys.executable, "-m", "tiercheck", "bench", "seed-table", "--scale", "small", "--backend", "mooncake",
            "--two-engine", "none", "--no-overhead", "--sessions", "128"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + HANG
        master = None
        while master is None and time.monotonic() < deadline and proc.poll() is None:
            master = _master(proc.pid)
            time.sleep(0.05)
        assert master is not None, "the first arm's master never started"
        time.sleep(2.5)  # into the arm's first round (the arm takes several seconds)
        os.kill(master, signal.SIGKILL)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=HANG)
        print(f"\nfault SIGKILL of the Mooncake master: exit {proc.returncode} {time.monotonic() - t0:.1f}s after it "
              "(the run goes on with the next arm on a fresh master)")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, err[-2000:]
    assert "problem: storage: mooncake master at 127.0.0.1:" in err and "stopped answering (found dead at a" in err
    row = next(line for line in out.splitlines() if line.startswith("| storage backups failed (pages)"))
    failed_off = int(row.split("|")[4].strip().replace(",", ""))
    assert failed_off > 0  # the killed arm's failed backups are in the table, not only in JSON
    verify = next(line for line in out.splitlines() if line.startswith("| bytes verified at the end"))
    assert "FAILED: store unreachable" in verify.split("|")[4] and verify.split("|")[5].strip() == "ok"
    assert "[NO ] every arm's bytes verify" in out
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # the masters' log folders and stores are removed
