"""A Hypothesis stateful test derived from the spec.

There is no hand-kept list of rules: each step draws one of the actions the spec enables in
the current state (guards are the preconditions, parameters come from what is enabled),
so every generated step is valid and shrinking never wastes time on precondition misses.
Per-rank timing actions (which copy or storage operation finishes on which rank, how many
pages it stored) are ordinary actions, so Hypothesis interleaves them freely; sync actions
run through the implementation's collective.

Every failure is written as a trace file in the checker's format; Hypothesis replays the
minimal example last, so the file left behind is the shrunk counterexample.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Callable, Optional

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from .compare import check_step
from .record import write_counterexample
from .runner import replay
from .shrink import shrink


class ConformanceFailure(AssertionError):
    pass


def make_machine(driver_factory: Callable, record_dir: Optional[str] = None, z3_check=None, label: str = "impl",
                 stats: Optional[dict] = None):  # noqa: ARG001 -- record_dir: files are written by run()
    """A RuleBasedStateMachine class driving ``driver_factory()`` against the spec."""

    class Conformance(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.driver = driver_factory()
            self.model = self.driver.model
            self.s = self.model.init_states()[0]
            self.actions = []
            self.states = [self.s]
            self._enabled, self._enabled_for = None, None
            if stats is not None:
                stats["examples"] = stats.get("examples", 0) + 1

        def _fail(self, mm):
            if stats is not None:
                stats.setdefault("first_failure_at", time.monotonic())
                stats.setdefault("first_failure_examples", stats.get("examples", 0))
                stats["failing_actions"] = list(self.actions)
                stats["mismatch"] = mm
            where = "initial state" if mm.step < 0 else f"step {mm.step + 1} ({self.actions[mm.step]})"
            raise ConformanceFailure(f"{label} disagrees with the spec at {where}: {mm.message}")

        @initialize()
        def start(self):
            self.prev = self.driver.state()
            mm = check_step(self.model, -1, self.s, self.prev, self.driver.verify(), z3_check)
            if mm:
                self._fail(mm)

        def enabled(self):
            if self._enabled_for is not self.s:
                self._enabled, self._enabled_for = self.model.actions(self.s), self.s
            return self._enabled

        @precondition(lambda self: bool(self.enabled()))
        @rule(data=st.data())
        def step(self, data):
            # Name first, then parameters: a rare action (a prefetch, a sync round) is as
            # likely as the one with the most parameter values (insert, evict).
            enabled = self.enabled()
            by_name = {}
            for x in enabled:  # actions() lists them grouped, in ACTIONS order
                by_name.setdefault(x.name, []).append(x)
            groups = list(by_name.values())
            # Plain integer draws: much cheaper than sampled_from, and they shrink towards
            # the first action of the first enabled kind.
            group = groups[data.draw(st.integers(0, len(groups) - 1), label="action")]
            a = group[data.draw(st.integers(0, len(group) - 1), label="params")] if len(group) > 1 else group[0]
            t = self.model.next_state(self.s, a)
            self.actions.append(a)
            self.states.append(t)
            try:
                self.driver.apply(a)
                got = self.driver.state()
                problems = self.driver.verify()
            except ConformanceFailure:
                raise
            except Exception as exc:  # noqa: BLE001 -- an implementation crash is a finding
                from .compare import Mismatch

                self._fail(Mismatch(len(self.actions) - 1, "error", f"{type(exc).__name__}: {exc}", t))
            mm = check_step(self.model, len(self.actions) - 1, t, got, problems, z3_check,
                            before=self.prev, action=a)
            if mm:
                self._fail(mm)
            self.s, self.prev = t, got

        def teardown(self):
            self.driver.close()

    return Conformance


def run(driver_factory, examples: int = 100, steps: int = 50, seed: int = 0, record_dir=None, z3_check=None,
        label="impl", stats=None, deadline=None, shrink_budget: float = 60.0):
    """Run the stateful test; on a disagreement shrink it, write it, raise ConformanceFailure.

    Deterministic for a given seed (the machine class is named after it, and Hypothesis
    derandomises from the test's identity). Hypothesis's own shrinking is off: the
    spec-guided shrinker (tiercheck.conformance.shrink) does better on these traces.
    """
    stats = {} if stats is None else stats
    stats["started"] = time.monotonic()
    machine = make_machine(driver_factory, None, z3_check, label, stats)
    machine.__name__ = machine.__qualname__ = f"Conformance_{label}_{seed}".replace("-", "_")
    cfg = settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        deadline=deadline,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    try:
        run_state_machine_as_test(machine, settings=cfg)
        return
    except ConformanceFailure:
        pass
    found = stats["failing_actions"]
    stats["steps_before_shrink"] = len(found)

    def still_fails(actions):
        driver = driver_factory()
        try:
            return replay(driver, actions, z3_check=z3_check).mismatch is not None
        finally:
            driver.close()

    model = driver_factory_model(driver_factory)
    shrunk = shrink(model, still_fails, found, shrink_budget)
    driver = driver_factory()
    try:
        outcome = replay(driver, shrunk, z3_check=z3_check)
    finally:
        driver.close()
    mm = outcome.mismatch
    stats["steps_after_shrink"] = len(shrunk)
    stats["shrunk_actions"] = shrunk
    stats["message"] = mm.message
    path = None
    if record_dir:
        digest = hashlib.sha1(repr(shrunk).encode()).hexdigest()[:10]
        path = Path(record_dir) / f"{label}-{digest}.json"
        write_counterexample(path, model, shrunk, outcome.states + [mm.expected] if mm.expected else outcome.states, mm, label)
        stats["file"] = str(path)
    where = "the initial state" if mm.step < 0 else f"step {mm.step + 1} of {len(shrunk)} ({shrunk[mm.step]})"
    raise ConformanceFailure(
        f"{label} disagrees with the spec at {where}: {mm.message}"
        + (f"\ncounterexample ({len(found)} steps, shrunk to {len(shrunk)}): {path}" if path else "")
    )


def driver_factory_model(driver_factory):
    d = driver_factory()
    try:
        return d.model
    finally:
        d.close()
