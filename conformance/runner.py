"""Replaying a list of actions on the spec and on an implementation side by side."""

from __future__ import annotations

from typing import List, NamedTuple, Optional

from tiercheck.spec.action import Action

from .compare import Mismatch
from .distinct import replay_past


class Outcome(NamedTuple):
    steps: int  # actions applied
    mismatch: Optional[Mismatch]
    states: list  # the spec's states, initial included


def replay(driver, actions: List[Action], expect_disabled=(), z3_check=None) -> Outcome:
    """Apply ``actions`` to the spec and the driver, stopping at the first disagreement.

    Each action must be enabled in the spec, except indices in ``expect_disabled``
    (guard probes): there the spec does not move and the implementation must not either.
    """
    out = replay_past(driver, actions, (), expect_disabled, z3_check)
    return Outcome(out.steps, out.mismatch, out.states)
