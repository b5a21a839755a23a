"""Faults below the protocol: a stalled, slow or never-starting gloo rank, a store that
holds other bytes than were acked, and worker threads left after close.

The spec has no notion of a process that stops answering or of bytes going bad in the
store, so no trace reaches the code that guards against them (the gloo transport's
timeouts and start check, ``flush``'s deadline, the store self-check). Each scenario here
injects one such fault on top of the real components (real gloo ranks, the file store)
and returns "" when the implementation gives the clear verdict it must (a one-line error
naming the rank, a self-check report), else what went wrong. A scenario that gives no
verdict at all within ``HANG_GUARD`` seconds reports a hang instead of blocking: the
check is that a stall becomes an error, never that something is fast.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import types
from dataclasses import dataclass

from tiercheck.impl.hicache import FileStorage
from tiercheck.impl.hicache.errors import RemoteRankError
from tiercheck.impl.storage import FaultyBackend, rank_key
from tiercheck.models import model_file
from tiercheck.spec.model import Model

from . import orphan_fault, scheduler_evict, store_faults
from .compare import describe_difference, observable
from .reference import ReferenceDriver, impl_config
from .situations import before_last_step, first_path

HANG_GUARD = 90.0  # seconds without a verdict: the scenario hangs (each takes under 20 s idle)
SILENT_SLACK = 30.0  # real seconds past the fast clock's driver timeout before the silent rank's watchdog fires
WORKER_THREAD = "storage-worker-"  # the implementation's storage worker threads (impl/storage/worker.py)


@dataclass(frozen=True)
class StallingStorage(FileStorage):
    """The file store, with one rank delayed: its backend takes ``start_s`` seconds to
    open (a rank slow to join, or one that never does), and its first backup write sleeps
    ``put_s`` seconds first (a store call that hangs)."""

    stall_rank: int = 1
    start_s: float = 0.0
    put_s: float = 0.0

    def make(self, rank: int):
        backend = super().make(rank)
        if rank != self.stall_rank:
            return backend
        time.sleep(self.start_s)
        faulty = FaultyBackend(backend)
        if self.put_s:
            faulty.on_call("put", 1, lambda: time.sleep(self.put_s))
        return faulty


def guarded(scenario) -> str:
    """Run ``scenario()`` (-> "" or a problem); a scenario still running after HANG_GUARD
    seconds is reported as a hang (its thread is left behind, a daemon)."""
    out = ["hang: no verdict within %gs" % HANG_GUARD]

    def run():
        try:
            out[0] = scenario()
        except BaseException as exc:  # noqa: BLE001 -- the verdict is the problem text
            out[0] = f"{type(exc).__name__}: {exc}"

    t = threading.Thread(target=run, name="process-fault", daemon=True)
    t.start()
    t.join(HANG_GUARD)
    return out[0]


def _gloo(cfg_name: str, storage, manual: bool = True, **kw):
    from tiercheck.impl.hicache.gloo import GlooHiCache

    cfg = model_file.load(cfg_name).config
    return GlooHiCache(impl_config(cfg, manual=manual), cfg.ranks, storage, **kw)


def _all_gone(procs) -> str:
    alive = [p.name for p in procs if p.is_alive()]
    return f"rank processes {alive} still alive after close()" if alive else ""


def stopped_rank_in_a_collective() -> str:
    """Rank 1 is SIGSTOPped before a collective round: rank 0's collective timeout fires,
    the driver names rank 1 as stalled in that step, not before the grace the others get
    after a failure (a lower bound: it holds at any load), and close() kills it."""
    cfg = model_file.load("wt-2r").config
    driver = ReferenceDriver(cfg, backend="gloo", timeout=2.0, driver_timeout=600.0)
    procs = list(driver.group._procs)
    model = Model(cfg)
    insert = next(a for a in model.actions(model.init_states()[0]) if a.name == "insert")
    grace = 2.0 + 5.0  # after rank 0 fails: one collective timeout + 5 s for the others to report
    try:
        driver.apply(insert)
        os.kill(procs[1].pid, signal.SIGSTOP)
        start = time.monotonic()
        try:
            driver.group.writing_check()
            return "writing_check returned with rank 1 stopped"
        except RemoteRankError as exc:
            waited, msg = time.monotonic() - start, str(exc)
        if "gloo rank(s) [1] stalled in writing_check" not in msg:
            return f"a stopped rank 1 is not named as stalled: {msg}"
        if waited < grace:  # rank 0 fails after its 2 s collective timeout, then the grace runs
            return f"rank 1 was named stalled {waited:.1f}s after the step began, within the {grace:g}s grace"
    finally:
        driver.close()
    return _all_gone(procs)


class FastClock:
    """A monotonic clock the check sets: it runs ``speed`` times as fast as the real one,
    so a bound of minutes passes in about a second."""

    def __init__(self, speed: float):
        self.speed, self.start = speed, time.monotonic()

    def monotonic(self) -> float:
        return self.start + (time.monotonic() - self.start) * self.speed


def silent_rank_without_failure() -> str:
    """Rank 1 is SIGSTOPped and the driver asks it alone for its snapshot: no rank fails,
    so no grace applies, and the driver waits its default bound, 3 collective timeouts +
    120 s (GlooHiCache's documented driver timeout), then names rank 1 and the bound,
    never earlier; a driver still waiting SILENT_SLACK real seconds after the bound has
    passed is reported as a hang, not waited out (and before that, a step for a rank the group does not have is refused
    by name). The driver's deadlines run on a clock 100x fast: 135 s in 1.35 s. Once
    resumed, rank 1 answers and stops at close(): the launcher, which waits for the ranks'
    results as long as they run, ends without an error."""
    from tiercheck.impl.hicache import gloo

    collective = 5.0
    bound = 3 * collective + 120.0
    group = _gloo("wt-2r", None, collective_timeout=collective)
    procs = list(group._procs)
    try:  # first, a one-rank step for a rank the group does not have: refused by name
        group.write_dma_done(3)
        problem = "write_dma_done ran on rank 3 of a 2-rank group"
    except Exception as exc:  # noqa: BLE001 -- the verdict is the problem text
        problem = "" if str(exc) == "no rank 3 (world size 2)" else (
            f"a step for rank 3 of 2 is not refused by name: {type(exc).__name__}: {exc}")
    if problem:
        group.close()
        return problem
    clock = FastClock(100.0)
    gloo.time = types.SimpleNamespace(monotonic=clock.monotonic)
    os.kill(procs[1].pid, signal.SIGSTOP)
    answer: list = []  # the snapshot's outcome: (seconds waited on the fast clock, error text or None)

    def ask():
        t0 = clock.monotonic()
        try:
            group.snapshot()
            answer.append((clock.monotonic() - t0, None))
        except RemoteRankError as exc:
            answer.append((clock.monotonic() - t0, str(exc)))
        except BaseException as exc:  # noqa: BLE001 -- reported below
            answer.append((clock.monotonic() - t0, f"{type(exc).__name__}: {exc}"))

    asker = threading.Thread(target=ask, name="silent-rank-snapshot", daemon=True)
    try:
        start = clock.monotonic()
        asker.start()
        # The watchdog: the driver must name the silent rank once its documented bound has
        # passed (on the fast clock), give or take SILENT_SLACK real seconds for polling
        # under load; a driver that keeps waiting is a hang the user would sit through.
        while asker.is_alive() and clock.monotonic() - start < bound:
            asker.join(0.05)
        asker.join(SILENT_SLACK)
        if not answer:
            os.kill(procs[1].pid, signal.SIGCONT)
            for p in procs:  # ends the snapshot's wait (the ranks are gone), then close()
                p.kill()
            asker.join(SILENT_SLACK)
            return (f"the driver did not report the silent rank 1 within its default timeout {bound:g}s "
                    f"(+{SILENT_SLACK:g}s slack); its deadline is {group.driver_timeout:g}s")
        waited, msg = answer[0]
        if msg is None:
            return "snapshot returned with rank 1 stopped"
    finally:
        gloo.time = time
        try:
            os.kill(procs[1].pid, signal.SIGCONT)  # it answers, then stops at close()
        except ProcessLookupError:  # killed by the watchdog above
            pass
        group.close()
    if msg != f"gloo rank(s) [1] did not answer snapshot within {bound:g}s (--driver-timeout)":
        return f"a silent rank is not named with the default driver timeout {bound:g}s: {msg}"
    if waited < bound:
        return f"the driver gave up on a silent rank after {waited:.0f}s, before its timeout {bound:g}s"
    if group._launch_error is not None:  # the launcher waits for the ranks as long as they serve
        return f"the gloo launcher gave up on ranks that answered until close(): {group._launch_error}"
    return _all_gone(procs)


def slow_rank_start(tmp: str) -> str:
    """Rank 1 takes 2 s to open its store, well within the start timeout: the group
    starts and answers a collective round."""
    group = _gloo("wt-storage-2r", StallingStorage(tmp, start_s=2.0), start_timeout=120.0, collective_timeout=30.0)
    try:
        group.writing_check()
    finally:
        group.close()
    return ""


# The start timeout of the never-starting rank's group: rank 0 must start within it too,
# which took over 2 s (fork, torch import, gloo setup) at load average 7 on 2 cores.
NEVER_START_TIMEOUT = 10.0


def rank_never_starts(tmp: str) -> str:
    """Rank 1 never finishes opening its store: the start check names it after the start
    timeout, and no rank process is left behind."""
    from tiercheck.impl.hicache import gloo

    before = set(threading.enumerate())
    try:
        _gloo("wt-storage-2r", StallingStorage(tmp, start_s=3600.0), start_timeout=NEVER_START_TIMEOUT,
              collective_timeout=2.0)
        return "the group started with rank 1 stalled at start"
    except RemoteRankError as exc:
        if str(exc) != f"gloo rank 1 did not answer start within {NEVER_START_TIMEOUT:g}s":
            return f"a rank that never starts is not named: {exc}"
    # Its launcher thread ends once close() has killed the ranks.
    launchers = [t for t in set(threading.enumerate()) - before if t.name == gloo.LAUNCHER]
    for t in launchers:
        t.join(60)
    return "rank processes left running after a failed start" if any(t.is_alive() for t in launchers) else ""


def flush_past_its_deadline(tmp: str) -> str:
    """Auto mode, rank 1's first backup write hangs: flush(timeout) gives up at its
    deadline with an error naming rank 1 instead of waiting for the store."""
    group = _gloo("wt-storage-2r", StallingStorage(tmp, put_s=3600.0), manual=False, collective_timeout=5.0)
    procs = list(group._procs)
    try:
        group.insert([1])
        try:
            group.flush(timeout=2.0)
            return "flush returned while rank 1's backup write hangs"
        except TimeoutError as exc:
            # Both ranks hold the backup (acks are agreed); rank 1's store call is the stall.
            msg = str(exc)
            if "flush: work still in flight on rank(s) [0, 1]" not in msg or "'store_calls': 1}]" not in msg:
                return f"flush's timeout does not name rank 1's store call: {msg}"
    finally:
        group.close()
    return _all_gone(procs)


def corrupted_store() -> str:
    """The store holds other bytes under a page the rank stored (a store-side corruption
    that its own digest cannot see: the object was rewritten whole): the rank's self-check
    (verify) must report the page."""
    import torch

    cfg = model_file.load("wt-storage-1r").config
    model = Model(cfg)
    driver = ReferenceDriver(cfg)
    try:
        s = model.init_states()[0]
        for name in ("insert", "write_dma_done", "writing_check", "storage_backup_done",
                     "drain_storage_control_queues"):
            # the last of a kind: a backup that stores every page (not a partial one)
            a = [a for a in model.actions(s) if a.name == name][-1]
            driver.apply(a)
            s = model.next_state(s, a)
        if driver.verify():
            return f"the self-check fails before the fault: {driver.verify()}"
        rank = driver.group.ranks[0]
        if not rank.stored:
            return "no page was stored"
        key = [rank_key(sorted(rank.stored)[0], rank.rank)]
        rank.backend.delete(key)
        rank.backend.batch_put(key, [torch.full_like(rank.host_pool.page(rank.host_pool.base), 7.25)])
        problems = driver.verify()
    finally:
        driver.close()
    if not any("holds wrong bytes" in p for p in problems):
        return f"a page rewritten in the store is not reported by the self-check: {problems}"
    return ""


def close_with_a_read_in_flight() -> str:
    """A prefetch's storage read is still queued (manual mode: one worker per read) when
    the driver closes: close() must stop that worker too, leaving no thread behind."""
    cfg = model_file.load("wt-prefetch-1r").config
    trace = first_path(Model(cfg), lambda _s, _a, t: t.ranks[0].pq)  # a prefetch in flight
    before = {t for t in threading.enumerate() if t.name.startswith(WORKER_THREAD)}
    driver = ReferenceDriver(cfg)
    try:
        for a in trace:
            driver.apply(a)
        started = {t for t in threading.enumerate() if t.name.startswith(WORKER_THREAD)} - before
    finally:
        driver.close()
    left = [t.name for t in started if t.is_alive()]
    if not started:
        return "the trace started no storage worker"
    return f"close() left storage worker threads running: {left}" if left else ""


def close_with_a_backup_queued() -> str:
    """Manual mode: a storage backup is still queued (its write waits for the driver's
    storage_backup_done) when the driver closes: close() must cancel it, never send it to
    the store (a store that hangs on writes would otherwise hang close())."""
    cfg = model_file.load("wt-storage-1r").config
    trace = first_path(Model(cfg), lambda _s, _a, t: t.ranks[0].sq)  # a backup queued, not acked
    driver = ReferenceDriver(cfg)
    stores = []
    try:
        for a in trace:
            driver.apply(a)
        for rank in driver.group.ranks:  # the backup's write goes through it
            rank.backup_worker.backend = FaultyBackend(rank.backup_worker.backend)
            stores.append(rank.backup_worker.backend)
    finally:
        driver.close()
    writes = sum(store.calls("put") for store in stores)
    return f"the store got {writes} write(s) for a backup still queued at close()" if writes else ""


def _prefetch_started(_m, _s, a, t) -> bool:
    return a.name == "prefetch_from_storage" and bool(t.ranks[0].pq)


def terminated_before_its_read() -> str:
    """Manual mode (reads run when the driver says): a prefetch terminated (best_effort)
    before its storage read ran gets nothing, as in the spec, and its read is cancelled,
    never sent to the store (a store that hangs on reads would otherwise stall the
    scheduler inside check_prefetch_progress)."""
    cfg = model_file.load("wt-prefetch-1r").config
    with before_last_step(cfg, _prefetch_started) as (model, trace, driver, out):
        if out.mismatch is not None:
            return f"before the prefetch: {out.mismatch.message}"
        rank = driver.group.ranks[0]
        store = rank.backend = FaultyBackend(rank.backend)  # the prefetch's read goes through it
        s, problems, reads = out.states[-1], [], 0
        for a in (trace[-1], "check"):
            if a == "check":
                a = next(x for x in model.actions(s) if x.name == "check_prefetch_progress")
                reads = -store.calls("get")
            driver.apply(a)
            reads += store.calls("get")  # before the self-check's own reads
            s = model.next_state(s, a)
            got, want = observable(driver.state()), observable(s)
            problems = describe_difference(model, want, got) if got != want else driver.verify()
            if problems:
                return f"after {a}: {problems[0]}"
    return f"the store got {reads} read(s) for a prefetch terminated before its read ran" if reads else ""


def leftover_worker_threads() -> str:
    """Storage worker threads still running: after every driver is closed, none may be
    (close() stops them all, per-read prefetch workers included)."""
    left = [t.name for t in threading.enumerate() if t.name.startswith(WORKER_THREAD) and t.is_alive()]
    return f"implementation threads still running after close(): {left}" if left else ""


def scenarios(tmp_dir):
    """(name, run) per fault; ``tmp_dir()`` gives a fresh store directory."""
    return [
        ("stopped rank in a collective", stopped_rank_in_a_collective),
        ("silent rank without a failure", silent_rank_without_failure),
        ("slow rank start", lambda: slow_rank_start(tmp_dir())),
        ("rank never starts", lambda: rank_never_starts(tmp_dir())),
        ("flush past its deadline", lambda: flush_past_its_deadline(tmp_dir())),
        ("corrupted store", corrupted_store),
        ("close with a read in flight", close_with_a_read_in_flight),
        ("close with a backup queued", close_with_a_backup_queued),
        ("prefetch terminated before its read", terminated_before_its_read),
        ("store batch failing partway", store_faults.failed_batch_is_a_partial_backup),
        ("store that cannot answer exists", store_faults.unanswered_exists_is_not_a_loss),
        ("prefetch whose anchor left the tree", orphan_fault.orphaned_prefetch_is_dropped),
        ("scheduler evict by tokens", scheduler_evict.evict_tokens_frees_whole_pages),
    ]
