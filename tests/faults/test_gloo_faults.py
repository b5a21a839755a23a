"""A gloo rank stopped mid-replay (SIGSTOP, as a swapped-out or frozen process would be):
the next collective fails on the other rank after the configured collective timeout, the
driver names the stalled rank and the sync point, and teardown finishes (the stopped rank
is killed)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.runner import replay
from tiercheck.impl.hicache.errors import RemoteRankError
from tiercheck.models import model_file
from tiercheck.spec.action import act

pytestmark = pytest.mark.gloo


def test_a_stopped_rank_is_named_with_its_sync_point_and_teardown_finishes():
    cfg = model_file.load("wt-2r").config
    driver = ReferenceDriver(cfg, backend="gloo", timeout=2.0, driver_timeout=600.0)
    procs = list(driver.group._procs)
    try:
        assert replay(driver, [act("insert", req=0)]).mismatch is None
        os.kill(procs[1].pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises(RemoteRankError) as e:
            driver.apply(act("writing_check"))  # a collective round: rank 0 waits for rank 1
        print(f"\nfault SIGSTOP of gloo rank 1: reported {time.monotonic() - t0:.1f}s after the step began")
        msg = str(e.value)
        assert "gloo rank(s) [1] stalled in writing_check" in msg
        # The configured collective timeout fired on rank 0, naming the missing rank and
        # its last sync point; the driver did not wait out its own 600 s.
        assert "timed out after 2s: rank(s) [1] did not arrive (rank 1: last sync point" in msg
    finally:
        t1 = time.monotonic()
        driver.close()  # must return: the stopped rank is killed, not waited for
        print(f"fault SIGSTOP of gloo rank 1: teardown {time.monotonic() - t1:.1f}s")
    assert not any(p.is_alive() for p in procs)
