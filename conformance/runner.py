"""Replaying a list of actions on the spec and on an implementation side by side."""

from __future__ import annotations

from typing import List, NamedTuple, Optional

from tiercheck.spec.action import Action

from .compare import Mismatch, check_step
from .crash import describe_crash


class Outcome(NamedTuple):
    steps: int  # actions applied
    mismatch: Optional[Mismatch]
    states: list  # the spec's states, initial included


def replay(driver, actions: List[Action], expect_disabled=(), z3_check=None) -> Outcome:
    """Apply ``actions`` to the spec and the driver, stopping at the first disagreement.

    Each action must be enabled in the spec, except indices in ``expect_disabled``
    (guard probes): there the spec does not move and the implementation must not either.
    """
    model = driver.model
    s = model.init_states()[0]
    states = [s]
    try:
        mm = check_step(model, -1, s, driver.state(), driver.verify(), z3_check)
    except Exception as exc:  # noqa: BLE001 -- an implementation error is a finding
        return Outcome(0, Mismatch(-1, "error", f"{type(exc).__name__}: {exc}"), states)
    if mm:
        return Outcome(0, mm, states)
    prev = driver.state()
    for i, a in enumerate(actions):
        t = model.next_state(s, a)
        if t is None:
            if i not in expect_disabled:
                return Outcome(i, Mismatch(i, "error", f"{a} is not enabled in the spec here (bad trace)"), states)
            t = s
        try:
            driver.apply(a)
            got = driver.state()
            problems = driver.verify()
        except Exception as exc:  # noqa: BLE001
            return Outcome(i + 1, Mismatch(i, "error", describe_crash(exc, a, driver), t), states)
        mm = check_step(model, i, t, got, problems, z3_check, before=prev, action=a)
        states.append(t)
        if mm:
            return Outcome(i + 1, mm, states)
        s, prev = t, got
    return Outcome(len(actions), None, states)
