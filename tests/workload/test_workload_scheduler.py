"""The load and the scheduler: sessions share system prompts and grow over rounds; a run
leaves no lock behind; bad sizes are one-line user errors."""

import pytest

from tiercheck.errors import UserError
from tiercheck.impl.hicache import HiCacheConfig, LockstepHiCache
from tiercheck.impl.kvdata import KVLayout
from tiercheck.impl.workload import Scheduler, SessionLoad, build_rounds
from tiercheck.impl.workload.arms import BenchSetup, seed_setup
from tiercheck.impl.workload.scheduler import ForwardModel


def test_rounds_share_prefixes_and_grow():
    load = SessionLoad(sessions=6, rounds=2, groups=2, system_pages=2, user_pages=1, output_pages=1)
    r0, r1 = build_rounds(load)
    assert len(r0) == len(r1) == 6
    by = {(q.session, q.round): q for q in r0 + r1}
    ps = load.page_size
    # Sessions of a group share the system prompt, other groups do not.
    assert by[(0, 0)].prompt[: 2 * ps] == by[(2, 0)].prompt[: 2 * ps]
    assert by[(0, 0)].prompt[: 2 * ps] != by[(1, 0)].prompt[: 2 * ps]
    # Round 2 carries round 1's prompt and output as history.
    for s in range(6):
        assert by[(s, 1)].prompt[: len(by[(s, 0)].full)] == by[(s, 0)].full
    assert build_rounds(load) == [r0, r1]  # seeded


@pytest.mark.parametrize("bad", [{"sessions": 0}, {"user_pages": -1}, {"system_pages": 0, "user_pages": 0}])
def test_bad_load_is_a_user_error(bad):
    with pytest.raises(UserError):
        SessionLoad(**bad)


def test_bad_setup_is_a_user_error():
    with pytest.raises(UserError, match="do not fit"):
        BenchSetup(device_pages=64)
    with pytest.raises(UserError, match="scale"):
        seed_setup("huge")


def test_scheduler_serves_every_request_and_drops_its_locks():
    load = SessionLoad(sessions=8, rounds=2, groups=2, system_pages=2, user_pages=2, output_pages=1)
    cfg = HiCacheConfig(layout=KVLayout(page_size=load.page_size), device_pages=40, host_pages=10,
                        policy="write_back", duplicate_reclaim=True, verify_loads=True)
    with LockstepHiCache(cfg, 2) as g:
        sch = Scheduler(g, concurrency=3, max_prefill_tokens=8)
        stats = [sch.run(rnd) for rnd in build_rounds(load)]
        sch.drain()
        assert [s.requests for s in stats] == [8, 8]
        assert stats[1].device_hit + stats[1].host_hit > 0
        for snap in g.snapshot(store=False):
            assert all(n["lock_ref"] == 0 for n in snap["nodes"].values())
        assert g.verify() == []


def test_scheduler_rejects_bad_arguments():
    cfg = HiCacheConfig()
    with LockstepHiCache(cfg, 1) as g:
        for kw in ({"concurrency": 0}, {"max_prefill_tokens": 0}, {"decode_steps": 0}):
            with pytest.raises(UserError):
                Scheduler(g, **kw)
    with pytest.raises(UserError):
        ForwardModel(step_us=-1)
