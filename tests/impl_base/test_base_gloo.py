"""The same collectives on 2 real gloo processes (loopback) as in lock-step: same results, and
the same clear errors for a sync-point mismatch and a missing rank."""

import time

import pytest

from tiercheck.impl.collective import (
    INT64_MAX,
    INT64_MIN,
    CollectiveTimeoutError,
    RankMissingError,
    SyncMismatchError,
)
from tiercheck.impl.lockstep import LockstepGroup
from tiercheck.impl.torchdist import spawn_gloo

# Fresh interpreters, not forks: earlier tests in the same pytest process leave threads
# running (the Mooncake client's, torch's), and a fork taken while one of them holds a lock
# has hung both ranks at start-up once in CI. The rank functions below are module-level,
# so they pickle.
START = "spawn"

pytestmark = pytest.mark.gloo


def scenario(g):
    out = [g.rank, g.world_size]
    out.append(g.all_reduce([g.rank * 7 - 3, 100 - g.rank], "min", "writing_check"))
    out.append(g.all_reduce([g.rank, -g.rank, INT64_MIN + g.rank], "max", "prefetch_done"))
    out.append(g.min_max([g.rank * 11, INT64_MAX - g.rank, -5], "release_plan"))
    out.append(g.all_reduce([(g.rank + 1) * i for i in range(70)], "min", "long"))  # 3 frames
    g.barrier("end")
    return out


def mismatch(g):
    g.all_reduce([1], "min", "warmup")
    if g.rank == 0:
        g.all_reduce([1], "min", "writing_check")
    else:
        g.all_reduce([1, 2, 3], "min", "drain_storage")


def slow_rank(g):
    g.all_reduce([g.rank], "min", "start")
    if g.rank == 1:
        time.sleep(6)  # misses the 2 s collective timeout (which also bounds the skew at 'start')
        return None
    return g.all_reduce([g.rank], "min", "writing_check")


def early_return(g):
    if g.rank == 1:
        return None
    return g.all_reduce([1], "min", "writing_check")


def test_gloo_matches_lockstep():
    gloo = spawn_gloo(2, scenario, timeout=60, start_method=START)
    lock = LockstepGroup(2, timeout=5).run(scenario)
    assert gloo == lock
    assert gloo[0][2] == [-3, 99] and gloo[1][3] == [1, 0, INT64_MIN + 1]
    assert gloo[0][4] == ([0, INT64_MAX - 1, -5], [11, INT64_MAX, -5])


def test_gloo_tag_mismatch_names_both_sync_points():
    with pytest.raises(SyncMismatchError) as ei:
        spawn_gloo(2, mismatch, collective_timeout=10, start_method=START)
    msg = str(ei.value)
    assert "call #1" in msg and "rank 0 at 'writing_check'" in msg and "rank 1 at 'drain_storage'" in msg


def test_gloo_missing_rank_times_out_naming_sync_point():
    with pytest.raises(CollectiveTimeoutError) as ei:
        spawn_gloo(2, slow_rank, collective_timeout=2, start_method=START)
    msg = str(ei.value)  # the configured timeout fired (not another one), at the named sync point
    assert "'writing_check'" in msg and "timed out after 2s" in msg
    assert "rank(s) [1] did not arrive" in msg and "last sync point 'start'" in msg


def test_gloo_rank_exiting_early_is_named():
    # A peer exit is noticed, not waited out: a RankMissingError naming the finished rank,
    # not the CollectiveTimeoutError the 30 s timeout would raise.
    with pytest.raises(RankMissingError, match=r"'writing_check'.*\[1\] did not arrive.*finished"):
        spawn_gloo(2, early_return, collective_timeout=30, start_method=START)
