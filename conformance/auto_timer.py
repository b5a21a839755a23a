"""The prefetch timer of the auto completion mode, on a clock the check sets.

Under the ``timeout`` stop policy a rank votes to terminate a prefetch once its read
completed or its timer fired: in manual mode the driver's ``prefetch_timeout`` step fires
it, in auto mode the rank's own monotonic clock does (``prefetch_timeout_base`` plus
``prefetch_timeout_per_page`` per page, by default seed 004's page_size / 1024 *
``prefetch_timeout_per_ki_token``, counted from the prefetch's start). The walks of
the auto mode never see it fire: every read has finished before the next step. Here the
read is held in the store, and the rank's clock (the ``time`` the prefetch module reads)
is one this check sets, so the verdict does not depend on the machine's speed:

  - at the prefetch's start and at the last instant that is not past the limit,
    ``check_prefetch_progress`` must keep the prefetch going (in the spec a stuttering
    step: no rank can terminate);
  - at the first instant past it, the check must terminate the prefetch with nothing
    usable, as the spec does once every rank's timer fired (``prefetch_timeout`` on each
    rank, then the check): the read is released only when a rank waits for it, after the
    vote, so it never completes before the vote;
  - then the state, the bytes and a final flush agree with the spec.
"""

from __future__ import annotations

import math
import threading

from tiercheck.impl.hicache import prefetch as prefetch_module
from tiercheck.spec.model import Model

from .auto_mode import AutoDriver, _compare, flush_and_compare, hold_reads, settle, walk_to_prefetch
from .reference import ReferenceDriver

# The clock at the prefetch's start: not 0 (a timer that adds the start would show), and
# below half the limit (one that takes the clock modulo the start would show).
START = 0.25
HOLD_LIMIT = 60.0  # seconds a held read waits to be released before it goes on anyway


class SetClock:
    """A monotonic clock that moves only when set."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


def instants(start: float, limit: float) -> tuple:
    """(the last clock value whose elapsed time since ``start`` is not past ``limit``,
    the first that is), in floating point as the rank computes ``now - start > limit``."""
    at = start + limit
    while at - start > limit:
        at = math.nextafter(at, -math.inf)
    while math.nextafter(at, math.inf) - start <= limit:
        at = math.nextafter(at, math.inf)
    return at, math.nextafter(at, math.inf)


def timer_limit(rcfg, pages: int) -> float:
    """Seconds a prefetch of ``pages`` may run before its timer fires, by seed 004's rule
    from the implementation's settings: the base plus, per page, page_size / 1024 *
    prefetch_timeout_per_ki_token (prefetch_timeout_per_page overrides the per-page
    share). Computed here, not read from the implementation's own derivation."""
    per_page = rcfg.prefetch_timeout_per_page
    if per_page is None:
        per_page = rcfg.layout.page_size / 1024 * rcfg.prefetch_timeout_per_ki_token
    return rcfg.prefetch_timeout_base + pages * per_page


def timer_while_reading(cfg) -> list:
    """The check above on model config ``cfg`` (the timeout policy, auto mode); the
    disagreements ([] when none)."""
    model = Model(cfg)
    clock = SetClock(START)
    saved, prefetch_module.time = prefetch_module.time, clock
    release = threading.Event()
    driver = AutoDriver(cfg)
    try:
        s, start, problems = walk_to_prefetch(model, driver)
        if problems:
            return problems
        hold_reads(driver, lambda: release.wait(HOLD_LIMIT))
        for rank in driver.group.ranks:  # waiting for the read releases it
            wait = rank.prefetch_worker.wait_result

            def released(*args, _wait=wait, **kwargs):
                release.set()
                return _wait(*args, **kwargs)

            rank.prefetch_worker.wait_result = released
        s = model.next_state(s, start)  # the read is in flight: no settle
        ReferenceDriver.apply(driver, start)
        check = next(a for a in model.actions(s) if a.name == "check_prefetch_progress")
        rcfg = driver.group.ranks[0].cfg
        pages = s.ranks[0].pq[check["op"]][3]
        at, past = instants(START, timer_limit(rcfg, pages))
        for now, when in ((START, "at the prefetch's start"), (at, "at the timer's limit")):
            clock.now = now
            ReferenceDriver.apply(driver, check)
            s = model.next_state(s, check)  # no rank can terminate: a stuttering step
            problems = _compare(driver, s, f"{check} {when}, the read held")
            if problems or release.is_set():
                return problems or [f"{check} {when} waited for the read"]
        clock.now = past
        for a in [x for x in model.actions(s) if x.name == "prefetch_timeout" and x["op"] == check["op"]]:
            s = model.next_state(s, a)  # every rank's timer fires
        ReferenceDriver.apply(driver, check)
        release.set()  # the vote is over (a rank that kept the prefetch going did not wait)
        driver.settle()
        s = settle(model, model.next_state(s, check))
        problems = _compare(driver, s, f"{check} past the timer's limit, the read held")
        if problems:
            return problems
        return flush_and_compare(model, driver, s)
    finally:
        release.set()
        prefetch_module.time = saved
        driver.close()


class JumpClock:
    """A clock that reads ``start`` ``reads`` times (each rank's prefetch start), then
    ``start + jump``."""

    def __init__(self, start: float, jump: float, reads: int) -> None:
        self.start, self.jump, self.left = start, jump, reads

    def monotonic(self) -> float:
        self.left -= 1
        return self.start if self.left >= 0 else self.start + self.jump


def manual_ignores_clock(cfg, jump: float = 3600.0) -> str:
    """Manual mode (every other conformance run): only the driver's ``prefetch_timeout``
    step fires the timer, never the rank's clock. The shortest spec trace to a prefetch
    start, then ``check_prefetch_progress`` with the clock ``jump`` seconds past the
    start: the spec keeps the prefetch going (no timer fired, no read finished), and so
    must the rank. "" when the implementation agrees, else the disagreement."""
    from .adapters import driver_factory
    from .runner import replay
    from .situations import first_path

    model = Model(cfg)
    path = first_path(model, lambda s, a, t: a.name == "prefetch_from_storage" and t.ranks[0].pq)
    if path is None:
        return "no trace of the model starts a prefetch"
    t = model.init_states()[0]
    for a in path:
        t = model.next_state(t, a)
    path.append(next(a for a in model.actions(t) if a.name == "check_prefetch_progress"))
    saved, prefetch_module.time = prefetch_module.time, JumpClock(START, jump, cfg.ranks)
    driver = driver_factory("reference", cfg)()
    try:
        mm = replay(driver, path).mismatch
    finally:
        prefetch_module.time = saved
        driver.close()
    return "" if mm is None else f"{mm.kind} at step {mm.step} of {len(path)}: {mm.message}"
