"""A serving workload for the reference HiCache: multi-turn sessions that share system
prompts, a scheduler with N requests in flight driving one cache (match, prefetch from
storage, load back, insert, decode, finish, one sync round per step), and the benchmark
arms of seed 000 (mirror release) and seed 001 (write-back duplicate reclaim).

    load = SessionLoad(sessions=128, rounds=2)
    rounds = build_rounds(load)
    with LockstepHiCache(cfg, 1, storage) as g:
        stats = Scheduler(g, concurrency=8).run(rounds[0])

Only the driver API of tiercheck.impl.hicache is used to drive the cache; the host-pool
sampler reads the ranks' pools and trees (observation only, it never changes them).

    arms.py       BenchSetup, seed_setup / reclaim_setup presets, run_mirror_arm / run_reclaim_arm
    seedtable.py  seed 000's table side by side with ours, directions, seed 001's table
    overhead.py   the flag-off drain-round cost, side by side (ABBA) and micro
    occupancy.py  host-pool occupancy samples; plot.py draws them (matplotlib optional)
"""

from .sessions import Request, SessionLoad, build_rounds
from .scheduler import ForwardModel, RoundStats, Scheduler

__all__ = ["ForwardModel", "Request", "RoundStats", "Scheduler", "SessionLoad", "build_rounds"]
