"""Lock-step group: R ranks as threads, same results on every rank, clear errors, no hangs."""

import random
import time

import pytest

from tiercheck.impl.collective import (
    INT64_MAX,
    INT64_MIN,
    CollectiveError,
    CollectiveTimeoutError,
    Int64RangeError,
    RankMissingError,
    SyncMismatchError,
)
from tiercheck.impl.lockstep import LockstepGroup


def rank_values(rank, n):
    rng = random.Random(1000 + rank)
    return [rng.randint(-10**12, 10**12) for _ in range(n)]


def scenario(g, jitter=False):
    out = []
    for step, n in enumerate([1, 3, 30, 31, 75]):  # 31 and 75 need several frames
        if jitter:
            time.sleep(random.random() * 0.003)
        vals = rank_values(g.rank, n)
        out.append(g.all_reduce(vals, "min" if step % 2 == 0 else "max", f"step{step}"))
    out.append(g.min_max([g.rank, -g.rank, INT64_MAX - g.rank], "pairs"))
    out.append(g.all_reduce([INT64_MIN + g.rank], "max", "extremes"))
    g.barrier("end")
    return out


def expected(world):
    out = []
    for step, n in enumerate([1, 3, 30, 31, 75]):
        cols = zip(*[rank_values(r, n) for r in range(world)])
        out.append([min(c) if step % 2 == 0 else max(c) for c in cols])
    out.append(([0, -(world - 1), INT64_MAX - (world - 1)], [world - 1, 0, INT64_MAX]))
    out.append([INT64_MIN + world - 1])
    return out


@pytest.mark.parametrize("world", [1, 2, 4])
def test_same_results_on_all_ranks(world):
    results = LockstepGroup(world, timeout=5).run(scenario)
    assert len(results) == world
    assert all(r == expected(world) for r in results)


def test_results_do_not_depend_on_thread_timing():
    for _ in range(3):
        assert LockstepGroup(4, timeout=5).run(scenario, jitter=True) == [expected(4)] * 4


def test_tag_mismatch_names_both_sync_points():
    def fn(g):
        g.all_reduce([1], "min", "warmup")
        if g.rank == 0:
            g.all_reduce([1], "min", "writing_check")
        else:
            g.all_reduce([1, 2, 3], "min", "drain_storage")

    with pytest.raises(SyncMismatchError) as ei:
        LockstepGroup(2, timeout=5).run(fn)
    msg = str(ei.value)
    assert "call #1" in msg and "rank 0 at 'writing_check'" in msg and "rank 1 at 'drain_storage'" in msg


def test_same_tag_different_op_or_length_is_a_mismatch():
    def fn(g, op1, n1):
        op, n = (op1, n1) if g.rank == 1 else ("min", 2)
        g.all_reduce([0] * n, op, "loading_check")

    for op1, n1 in [("max", 2), ("min", 3)]:
        with pytest.raises(SyncMismatchError, match="loading_check"):
            LockstepGroup(3, timeout=5).run(fn, op1, n1)


def test_missing_rank_times_out_naming_sync_point_and_ranks():
    def fn(g):
        g.all_reduce([g.rank], "min", "start")
        if g.rank in (1, 3):
            time.sleep(3)  # too slow for the 1 s timeout (which also bounds the skew at 'start')
            return None
        return g.all_reduce([g.rank], "min", "writing_check")

    with pytest.raises(CollectiveTimeoutError) as ei:
        LockstepGroup(4, timeout=1).run(fn)
    msg = str(ei.value)
    assert "'writing_check'" in msg and "timed out after 1s" in msg
    assert "rank(s) [1, 3] did not arrive" in msg and "last sync point 'start'" in msg


def test_rank_that_finishes_early_fails_the_others_at_once():
    def fn(g):
        if g.rank == 1:
            return "skipped"  # the early-return-collective bug: never enters the collective
        return g.all_reduce([1], "min", "writing_check")

    # Noticed at once: a RankMissingError, not the CollectiveTimeoutError of the 30 s timeout.
    with pytest.raises(RankMissingError, match=r"'writing_check'.*\[1\] did not arrive.*finished"):
        LockstepGroup(2, timeout=30).run(fn)


def test_root_cause_is_reraised_and_group_is_broken_afterwards():
    seen, again = [], []

    def fn(g):
        if g.rank == 0:
            raise KeyError("boom on rank 0")
        try:
            g.all_reduce([1], "min", "sync")
        except CollectiveError as exc:
            seen.append(exc)
        try:
            g.all_reduce([1], "min", "again")
        except CollectiveError as exc:
            again.append(exc)

    with pytest.raises(KeyError, match="boom"):
        LockstepGroup(3, timeout=5).run(fn)
    assert len(seen) == 2 and all("failed (KeyError)" in str(e) for e in seen)
    assert len(again) == 2 and all("broken" in str(e) for e in again)


def test_bad_values_are_refused_before_any_exchange():
    def fn(g):
        g.min_max([INT64_MIN], "digest")

    with pytest.raises(Int64RangeError, match="INT64_MIN"):
        LockstepGroup(2, timeout=5).run(fn)

    def fn2(g):
        g.all_reduce([2**63], "max", "x")

    with pytest.raises(Int64RangeError, match="does not fit"):
        LockstepGroup(1, timeout=5).run(fn2)

    def fn3(g):
        g.all_reduce([1], "sum", "x")

    with pytest.raises(ValueError, match="op must be"):
        LockstepGroup(1).run(fn3)
