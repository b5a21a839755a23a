"""Conformance of the reference implementation in its own completion mode (``manual=False``).

In manual mode (every other conformance run) the spec's per-rank completion actions
(``write_dma_done``, ``load_dma_done``, ``storage_backup_done``, ``prefetch_io``) finish
each copy and storage operation. In auto mode the implementation finishes them itself:
a copy completes when the engine is next queried, storage operations run on worker
threads, and the scheduler's per-iteration entry point ``check_events`` runs the sync
rounds. This module drives that mode with the spec's actions:

  - after every step the implementation settles (its storage threads finish and are
    polled) and the spec takes every enabled completion action, whole batches only (the
    spec's :func:`settle`), so both sides mean "everything in flight has finished";
  - the spec's three scheduler rounds (``writing_check``, ``loading_check``, the storage
    drain) are one step, ``check_events`` on the implementation (:data:`TICK`);
  - at the end the implementation's ``flush`` (scheduler iterations until nothing is in
    flight) against the spec's ticks until its queues are empty.

After each step the states are compared through the refinement mapping and the driver's
checks run (bytes, counters, gauges, match_prefix). Walks are seeded random choices
among the spec's enabled actions: the same walk on every run (no time budget).
"""

from __future__ import annotations

import random
import time

from tiercheck.impl.collective import CollectiveError
from tiercheck.impl.hicache import ReplicaDivergenceError
from tiercheck.spec.action import Action
from tiercheck.spec.model import Model

from .compare import describe_difference, observable
from .reference import ReferenceDriver

COMPLETIONS = ("write_dma_done", "load_dma_done", "storage_backup_done", "prefetch_io")
ROUNDS = ("writing_check", "loading_check", "drain_storage_control_queues")
TICK = Action("check_events")
SETTLE_TIMEOUT = 30.0  # seconds a storage thread may take before the walk reports a hang


def settle(model, s):
    """The spec state once every copy and storage operation in flight has finished, each
    storage backup storing its whole batch."""
    while True:
        done = [a for a in model.actions(s) if a.name in COMPLETIONS]
        if not done:
            return s
        # The whole batch: of one rank's storage acks, the one with the most pages (a
        # partial ack is a fault the auto-mode backend does not inject).
        same = [a for a in done if a.name == done[0].name and a["rank"] == done[0]["rank"]]
        s = model.next_state(s, max(same, key=lambda a: dict(a.params).get("pages", 0)))


def tick(model, s, separate: bool = False):
    """One scheduler iteration in the spec: the three rounds in order (those it has);
    ``separate``: everything in flight finishes after each round."""
    for name in ROUNDS:
        a = next((x for x in model.actions(s) if x.name == name), None)
        if a is not None:
            s = model.next_state(s, a)
        if separate:
            s = settle(model, s)
    return s


def busy(s) -> bool:
    return any(rs.wq or rs.lq or rs.sq or rs.relq for rs in s.ranks)


class AutoDriver(ReferenceDriver):
    """The reference implementation with ``manual=False`` (lock-step ranks in this process)."""

    name = "reference-auto"

    def __init__(self, cfg, variants=frozenset()):
        super().__init__(cfg, variants=variants, manual=False)
        # check_events computes the mirror-release plan in its one all-reduce, before the
        # round commits its writes; the spec's drain plans after writing_check (a write
        # committed in the same iteration gets its plan a round later there). Under mirror
        # release a tick is the three rounds one by one, each settled (a storage thread
        # would otherwise race the drain).
        self.separate_rounds = self.group.cfg.mirror_release_on

    def _perform(self, action):
        if action != TICK:
            return super()._perform(action)
        if not self.separate_rounds:
            return self.group.check_events()
        for name in ROUNDS:
            self.group.apply(name)
            self.settle()

    def apply(self, action) -> None:
        super().apply(action)
        if action == TICK:
            self._action = None  # counters are checked per spec action; a tick is three
        self.settle()

    def settle(self) -> None:
        """Wait for every storage thread's work, then let each rank pick up its results."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        for rank in self.group.ranks:
            for worker in (rank.backup_worker, rank.prefetch_worker):
                while worker is not None and worker.outstanding():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"rank {rank.rank}: storage worker still busy after {SETTLE_TIMEOUT} s")
                    time.sleep(0.0005)
            rank.pending()  # polls the finished storage operations

    def flush(self) -> None:
        self._action = None
        try:
            self.group.flush(timeout=SETTLE_TIMEOUT)
        except ReplicaDivergenceError as exc:  # a sync round found the replicas diverged, as in apply
            self.halt(exc, "flush")
        except CollectiveError:
            self.hung = "flush"



def _compare(driver, want, step: str) -> list:
    got = driver.state()
    out = []
    if observable(got) != observable(want):
        out = [f"{step}: {line}" for line in describe_difference(driver.model, observable(want), observable(got))]
    return out + [f"{step}: {line}" for line in driver.verify()]


def walk(cfg, seed: int, steps: int, variants=frozenset()) -> list:
    """One seeded walk in auto mode; the disagreements found ([] when none)."""
    rng = random.Random(seed)
    driver = AutoDriver(cfg, variants)
    model = driver.model
    try:
        s = model.init_states()[0]
        problems = _compare(driver, s, "initial state")
        for i in range(steps):
            if problems or s.hung or s.halted:
                return problems  # a stopped group has no successors (and nothing to flush)
            moves = [a for a in model.actions(s) if a.name not in COMPLETIONS + ROUNDS]
            moves.append(TICK)
            a = rng.choice(moves)
            s = settle(model, tick(model, s, driver.separate_rounds) if a == TICK else model.next_state(s, a))
            driver.apply(a)
            problems = _compare(driver, s, f"step {i + 1} ({a.name} {dict(a.params)})")
        if problems or s.hung or s.halted:
            return problems
        # flush: scheduler iterations (at least one) until nothing is in flight. Under
        # mirror release the group's flush (check_events) plans differently (above): ticks.
        for k in range(64):
            if k and not busy(s):
                break
            s = settle(model, tick(model, s, driver.separate_rounds))
            if driver.separate_rounds:
                driver.apply(TICK)
        if not driver.separate_rounds:
            try:
                driver.flush()
            except Exception as exc:  # noqa: BLE001 -- the spec flushes cleanly: any failure disagrees
                return [f"flush: {type(exc).__name__}: {exc}"]
        return _compare(driver, s, "flush")
    finally:
        driver.close()


READ_HOLD = 3.0  # seconds the held prefetch read sleeps before it reads the store


def successors(model, s, separate: bool = False):
    """The walk's steps from ``s``: (action, spec state once everything in flight finished)."""
    for a in [a for a in model.actions(s) if a.name not in COMPLETIONS + ROUNDS] + [TICK]:
        yield a, settle(model, tick(model, s, separate) if a == TICK else model.next_state(s, a))


def walk_to_prefetch(model, driver):
    """Replay on ``driver`` the shortest walk to a prefetch start, all but its last step:
    (spec state, the start action, disagreements); the start is None when no walk starts one."""
    from .situations import first_path

    path = first_path(model, lambda s, a, t: a.name == "prefetch_from_storage" and t.ranks[0].pq,
                      successors=lambda s: successors(model, s))
    s = model.init_states()[0]
    if path is None:
        return s, None, ["no walk of the model starts a prefetch"]
    for i, a in enumerate(path[:-1]):
        s = settle(model, tick(model, s, driver.separate_rounds) if a == TICK else model.next_state(s, a))
        driver.apply(a)
        problems = _compare(driver, s, f"step {i + 1} ({a.name} {dict(a.params)})")
        if problems:
            return s, path[-1], problems
    return s, path[-1], []


def hold_reads(driver, fn) -> None:
    """Each rank's prefetch worker runs ``fn()`` before its next store read."""
    from tiercheck.impl.storage import FaultyBackend

    for rank in driver.group.ranks:
        rank.prefetch_worker.backend = FaultyBackend(rank.prefetch_worker.backend)
        rank.prefetch_worker.backend.on_call("get", 1, fn)


def check_while_reading(cfg) -> list:
    """check_prefetch_progress while the prefetch's storage read is still running (the
    store holds it READ_HOLD seconds): under best_effort the prefetch is terminated with
    nothing usable (the spec: its read did not finish), and the rank must wait for the
    read before its slots go to the release queue: a scheduler iteration releases them,
    an insert's host copy reuses them, and when the read has settled the bytes, like the
    rest of the state and a final flush, agree with the spec. The trace to the prefetch is
    the shortest walk (breadth-first over ``successors``); the disagreements ([] when
    none)."""
    model = Model(cfg)
    driver = AutoDriver(cfg)
    try:
        s, start, problems = walk_to_prefetch(model, driver)
        if problems:
            return problems
        held = {}

        def hold():
            held["from"] = time.monotonic()
            time.sleep(READ_HOLD)

        hold_reads(driver, hold)
        s = model.next_state(s, start)  # the read is in flight: no settle
        ReferenceDriver.apply(driver, start)
        check = next(a for a in model.actions(s) if a.name == "check_prefetch_progress")
        asked = time.monotonic()
        # Then, before the held read could land: a scheduler iteration (the prefetch's
        # slots leave the release queue), an insert that writes to host, another iteration
        # (its copy lands and commits). Only a rank that left the read running would let
        # it land in those slots now.
        # The spec settles after each (the walk's meaning of a step); the rank does not.
        steps = [check, TICK]
        s = settle(model, tick(model, settle(model, model.next_state(s, check))))
        # Another request's pages (the prefetched request's own page would get its own bytes).
        writes = [a for a in model.actions(s) if a.name == "insert" and model.next_state(s, a).ranks[0].wq]
        write = next((a for a in writes if a["req"] != start["req"]), writes[0] if writes else None)
        if write is not None:
            steps += [write, TICK]
            s = settle(model, tick(model, settle(model, model.next_state(s, write))))
        for a in steps:
            ReferenceDriver.apply(driver, a)  # no settle between them
        driver.settle()
        driver._action = None  # several steps since the last check: counters are checked per step
        if "from" not in held:
            return [f"{start}: no storage read was started"]
        if asked > held["from"] + READ_HOLD:
            return []  # the read finished before the check came (a stalled machine): no verdict here
        problems = _compare(driver, s, f"{', '.join(str(a) for a in steps)} with the read held")
        if problems:
            return problems
        return flush_and_compare(model, driver, s)
    finally:
        driver.close()


def flush_and_compare(model, driver, s) -> list:
    """The implementation's flush against the spec's scheduler iterations until nothing is
    in flight (as a walk ends, without mirror release); the disagreements."""
    for k in range(64):
        if k and not busy(s):
            break
        s = settle(model, tick(model, s, driver.separate_rounds))
    driver.flush()
    return _compare(driver, s, "flush")
