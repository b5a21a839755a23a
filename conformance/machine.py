"""A Hypothesis stateful test derived from the spec.

There is no hand-kept list of rules: each step draws one of the actions the spec enables in
the current state (guards are the preconditions, parameters come from what is enabled),
so every generated step is valid and shrinking never wastes time on precondition misses.
Per-rank timing actions (which copy or storage operation finishes on which rank, how many
pages it stored) are ordinary actions, so Hypothesis interleaves them freely; sync actions
run through the implementation's collective.

Which enabled action a step takes is tiercheck.conformance.steering's job (swarm profiles,
run-level rarity and coverage, starts along the spec's shortest paths). A failure is
shrunk by tiercheck.conformance.shrink (Hypothesis's own shrinking is off) and written as
a trace file in the checker's format.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Callable, Optional

from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import Flaky
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

from .byte_origin import annotate
from .compare import Mismatch, check_step
from .crash import describe_crash
from .distinct import Passing, shrink_past, signature
from .record import write_counterexample
from .run_coverage import RunCoverage
from .runner import replay
from .shrink import shrink
from .steering import Chooser
from .step_deadline import step_deadline, step_seconds


class ConformanceFailure(AssertionError):
    pass


def make_machine(driver_factory: Callable, record_dir: Optional[str] = None, z3_check=None, label: str = "impl",
                 stats: Optional[dict] = None, strategy: str = "coverage",
                 cov: Optional[RunCoverage] = None, known=()):  # noqa: ARG001 -- record_dir: files are written by run()
    """A RuleBasedStateMachine class driving ``driver_factory()`` against the spec.

    ``strategy``: how each step picks its action (tiercheck.conformance.steering);
    ``cov``: the run's shared coverage; ``known``: disagreement signatures the run passes
    (tiercheck.conformance.distinct)."""
    cov = RunCoverage() if cov is None else cov
    limit = step_seconds()

    class Conformance(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.chooser = None
            self.driver = driver_factory()
            self.model = self.driver.model
            self.s = self.model.init_states()[0]
            self.actions = []
            self.states = [self.s]
            self._enabled, self._enabled_for = None, None
            self.passing = Passing(self.model, known)
            if stats is not None:
                stats["examples"] = stats.get("examples", 0) + 1

        def _fail(self, mm):
            cov.frozen = True
            if mm.kind == "bytes":
                mm = mm._replace(message=annotate(self.model, self.actions, self.states, mm.message))
            if stats is not None:
                stats.setdefault("first_failure_at", time.monotonic())
                stats.setdefault("first_failure_examples", stats.get("examples", 0))
                stats["failing_actions"] = list(self.actions)
                stats["mismatch"] = mm
                stats["passed"] = list(self.passing.passed)
            where = "initial state" if mm.step < 0 else f"step {mm.step + 1} ({self.actions[mm.step]})"
            raise ConformanceFailure(f"{label} disagrees with the spec at {where}: {mm.message}")

        @initialize(data=st.data())
        def start(self, data):
            self.chooser = Chooser(strategy, self.model, cov, data, salt_seed=type(self).__name__)
            self.prev = self.driver.state()
            if known:
                mm, self.s = self.passing.check(-1, self.s, self.prev, self.driver.verify(), self.actions)
                self.states[0] = self.s
            else:
                mm = check_step(self.model, -1, self.s, self.prev, self.driver.verify(), z3_check)
            if mm:
                self._fail(mm)

        def enabled(self):
            if self._enabled_for is not self.s:
                self._enabled, self._enabled_for = self.model.actions(self.s), self.s
            return self._enabled

        @rule(data=st.data())
        def step(self, data):
            # No precondition: a step with nothing enabled (a halted group) still makes
            # its draw, so an example's draws never depend on state outside it.
            choice = self.chooser.choose(data, self.s, self.enabled())
            if choice is None or self.passing.dead:
                return
            a, t = choice
            self.actions.append(a)
            self.states.append(t)
            try:
                with step_deadline(limit):
                    self.driver.apply(a)
                    got = self.driver.state()
                    problems = self.driver.verify()
            except ConformanceFailure:
                raise
            except Exception as exc:  # noqa: BLE001 -- an implementation crash is a finding
                mm = Mismatch(len(self.actions) - 1, "error", describe_crash(exc, a, self.driver), t)
                if self.passing.crash(mm, self.actions) is None:
                    return  # a known crash: the example ends here
                self._fail(mm)
            if known:
                mm, t = self.passing.check(len(self.actions) - 1, t, got, problems, self.actions, before=self.prev)
                self.states[-1] = t
            else:
                mm = check_step(self.model, len(self.actions) - 1, t, got, problems, z3_check,
                                before=self.prev, action=a)
            if mm:
                self._fail(mm)
            self.s, self.prev = t, got

        def teardown(self):
            if self.chooser is not None:
                self.chooser.finish()
            self.driver.close()

    return Conformance


def run(driver_factory, examples: int = 100, steps: int = 50, seed: int = 0, record_dir=None, z3_check=None,
        label="impl", stats=None, deadline=None, shrink_budget: float = 60.0, strategy: str = "coverage",
        cov: Optional[RunCoverage] = None, time_budget: Optional[float] = None, known=()):
    """Run the stateful test; on a disagreement shrink it, write it, raise ConformanceFailure.

    Deterministic for a given seed (the machine class is named after it, and Hypothesis
    derandomises from the test's identity) and, without ``time_budget``, for a given
    ``cov`` state. Hypothesis's own shrinking is off: the spec-guided shrinker
    (tiercheck.conformance.shrink) does better on these traces. ``time_budget``: seconds
    after which no new chunk of examples starts (the first always runs). ``known``:
    disagreement signatures to pass (tiercheck.conformance.distinct); the failure found is
    then a new one, shrunk to the same signature, its trace records what it passed, and
    ``stats["signature"]`` names it.
    """
    stats = {} if stats is None else stats
    stats["started"] = time.monotonic()
    cov = RunCoverage() if cov is None else cov
    stats["coverage"] = cov
    stop_at = None if time_budget is None else stats["started"] + time_budget
    # Under a time budget, Hypothesis runs in chunks of CHUNK examples, each a run of its
    # own (seeded by the chunk's number), until the time is spent: a run cannot be
    # stopped from inside without Hypothesis calling the example flaky.
    if stop_at is None:
        failed = _search(driver_factory, examples, steps, f"Conformance_{label}_{seed}", z3_check, label, stats,
                         deadline, strategy, cov, known)
    else:
        failed, k = False, 0
        while not failed and stats.get("examples", 0) < examples:
            if k and time.monotonic() > stop_at:  # the first chunk always runs
                stats["budget_spent"] = True
                break
            failed = _search(driver_factory, min(CHUNK, examples - stats.get("examples", 0)), steps,
                             f"Conformance_{label}_{seed}_{k}", z3_check, label, stats, deadline, strategy, cov,
                             known)
            k += 1
    if not failed:
        return
    found = stats["failing_actions"]
    stats["steps_before_shrink"] = len(found)
    model = driver_factory_model(driver_factory)
    if known:
        shrunk, outcome = shrink_past(driver_factory, model, found, known, shrink_budget)
        if outcome.mismatch is None:  # not reproducible on replay: keep what the run saw
            shrunk, outcome = found, outcome._replace(mismatch=stats["mismatch"], passed=stats["passed"])
    else:
        shrunk, outcome = shrink_failure(driver_factory, model, found, shrink_budget, z3_check)
        if outcome.mismatch is None:  # not reproducible on replay: keep what the run saw
            shrunk, outcome = found, outcome._replace(mismatch=stats["mismatch"])
    mm = outcome.mismatch
    stats["signature"] = signature(model, mm, shrunk)
    stats["passed"] = list(dict.fromkeys(getattr(outcome, "passed", ())))
    if mm.kind == "bytes":
        mm = mm._replace(message=annotate(model, shrunk, outcome.states, mm.message))
    stats["steps_after_shrink"] = len(shrunk)
    stats["shrunk_actions"] = shrunk
    stats["message"] = mm.message
    path = None
    if record_dir:
        digest = hashlib.sha1(repr(shrunk).encode()).hexdigest()[:10]
        path = Path(record_dir) / f"{label}-{digest}.json"
        write_counterexample(path, model, shrunk, outcome.states + [mm.expected] if mm.expected else outcome.states, mm, label,
                             passes=stats["passed"], signature=stats["signature"])
        stats["file"] = str(path)
    where = "the initial state" if mm.step < 0 else f"step {mm.step + 1} of {len(shrunk)} ({shrunk[mm.step]})"
    raise ConformanceFailure(
        f"{label} disagrees with the spec at {where}: {mm.message}"
        + (f"\ncounterexample ({len(found)} steps, shrunk to {len(shrunk)}): {path}" if path else "")
    )


CHUNK = 2


def _search(driver_factory, examples, steps, name, z3_check, label, stats, deadline, strategy, cov,
            known=()) -> bool:
    """One Hypothesis run; True when it found a disagreement (recorded in ``stats``)."""
    machine = make_machine(driver_factory, None, z3_check, label, stats, strategy, cov, known)
    machine.__name__ = machine.__qualname__ = name.replace("-", "_")
    cfg = settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        deadline=deadline,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        report_multiple_bugs=False,
    )
    try:
        run_state_machine_as_test(machine, settings=cfg)
        return False
    except ConformanceFailure:
        return True
    except Flaky:
        # Hypothesis replays a failing example before it reports it; when that replay
        # diverges, the disagreement seen first is still recorded (its actions, what the
        # implementation did), and the spec-guided shrinker replays that trace itself.
        if "failing_actions" not in stats:
            raise
        stats["flaky_replay"] = True
        return True


def shrink_failure(driver_factory, model, found, shrink_budget, z3_check=None):
    """The shortest sequence found that replays to the same disagreement as ``found``,
    and its replay outcome."""

    def replayed(actions):
        driver = driver_factory()
        try:
            return replay(driver, actions, z3_check=z3_check)
        finally:
            driver.close()

    key = disagreement(replayed(found).mismatch)

    def still_fails(actions):
        got = disagreement(replayed(actions).mismatch)
        return got is not None and (key is None or got == key)

    shrunk = shrink(model, still_fails, found, shrink_budget)
    return shrunk, replayed(shrunk)


def disagreement(mm):
    """What makes two failures 'the same': the kind of mismatch (a state difference, a
    broken invariant, wrong bytes, the same exception type). Not the step it follows: one
    bug can show at the split that causes it or at the drain round that notices."""
    if mm is None:
        return None
    if mm.kind == "error":
        return mm.kind, mm.message.split(":")[0]
    return (mm.kind,)


def driver_factory_model(driver_factory):
    d = driver_factory()
    try:
        return d.model
    finally:
        d.close()
