"""Seed 000's directions on a small run of the real cache (file store): with mirror release
the host_alloc_failed write rejections go to 0, storage write-out goes to ~100%, the warm
round's storage hit goes up (two engines on one store), and every arm's bytes verify."""

import pytest

from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.workload.arms import run_mirror_arm, seed_setup


@pytest.fixture(scope="module")
def arms():
    s = seed_setup("small")
    out = {}
    for engines in (1, 2):
        for flag in (False, True):
            out[(engines, flag)] = run_mirror_arm(s, "file", flag, engines)
    return out


def test_flag_off_starves_the_host_channel(arms):
    off = arms[(1, False)]
    # The seed's bug: pinned mirrors fill the host pool, most staging is rejected.
    assert off.rejected_tokens() > 0
    assert off.written_pct < 30.0
    assert off.metrics.get(mt.MIRROR_RELEASED, 0) == 0
    # The trace shows it: at the end of the cold round the host pool is full of mirrors.
    assert max(off.trace.column("mirror")) >= 0.9 * off.trace.capacity
    assert max(off.trace.column("releasable")) == 0


def test_flag_on_rejections_to_zero_and_write_out_to_100(arms):
    off, on = arms[(1, False)], arms[(1, True)]
    assert on.rejected_tokens() == 0, on.rejected()
    assert on.rejected_tokens("host_alloc_failed", "storage_prefetch") == 0
    assert on.written_pct == pytest.approx(100.0)
    assert on.write_out_pct > off.write_out_pct
    assert on.write_out_pct >= 99.0
    assert on.metrics[mt.MIRROR_RELEASED] > 0


def test_warm_storage_hit_up_on_two_engines(arms):
    off, on = arms[(2, False)], arms[(2, True)]
    assert on.warm.pct("storage_hit") > off.warm.pct("storage_hit") > 0.0
    # The storage hit is what the second engine did not have to compute.
    assert on.warm.computed < off.warm.computed


def test_same_requests_in_every_arm(arms):
    prompts = {a.warm.prompt_tokens for a in arms.values()}
    assert len(prompts) == 1
    assert all(r.requests == 32 for a in arms.values() for r in a.rounds)


def test_every_arm_verifies_bytes(arms):
    for a in arms.values():
        assert a.problems == [], (a.name, a.problems[:3])
        assert a.stored_pages > 0
