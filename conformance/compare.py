"""One conformance step: the spec's expected state against the implementation's.

After every step the abstract states must be equal, the state invariants must hold on
both, and the implementation's bytes must verify. A mismatch is described field by field
in the spec's own names, per rank.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

from tiercheck.models.trace import diff_itf, state_to_itf
from tiercheck.spec.state import State


def observable(s: State) -> State:
    """Drop what no implementation can observe: history fields (``StorageAck.actual``)
    and the wording of a halt (that the group stopped itself is observable, the spec's
    message is not)."""
    ranks = tuple(
        rs._replace(sdone=tuple(a._replace(actual=a.reported) for a in rs.sdone)) for rs in s.ranks
    )
    return s._replace(ranks=ranks, halted="halted" if s.halted else "")


class Mismatch(NamedTuple):
    step: int  # index of the action after which it was found (-1: the initial state)
    kind: str  # "state" | "invariant" | "bytes" | "error"
    message: str
    expected: Optional[State] = None
    actual: Optional[State] = None


def state_invariants(model, s: State) -> List[str]:
    out = []
    for p in model.properties:
        if p.kind == "invariant":
            msg = p.fn(model, s)
            if msg:
                out.append(f"{p.name}: {msg}")
    return out


def step_properties(model, before: State, action, after: State) -> List[str]:
    """The transition properties, evaluated on the implementation's own two states."""
    out = []
    for p in model.properties:
        if p.kind == "transition":
            msg = p.fn(model, before, action, after)
            if msg:
                out.append(f"{p.name}: {msg}")
    return out


def describe_difference(model, expected: State, actual: State) -> List[str]:
    """What differs, as 'spec says X, implementation has Y' lines."""
    lines = diff_itf(state_to_itf(model, expected), state_to_itf(model, actual))
    return [f"implementation differs: {line}" for line in lines] or ["states differ"]


def check_step(model, step: int, expected: State, actual: State, verify: List[str], z3_check=None,
               before: Optional[State] = None, action=None) -> Optional[Mismatch]:
    """``before``/``action``: the implementation's previous state and the step taken, for
    the transition properties (omitted for the initial state)."""
    exp, act = observable(expected), observable(actual)
    if exp != act:
        return Mismatch(step, "state", "; ".join(describe_difference(model, exp, act)), expected, actual)
    bad = state_invariants(model, actual)
    if before is not None:
        bad += step_properties(model, before, action, actual)
    if bad:
        return Mismatch(step, "invariant", "implementation state breaks " + "; ".join(bad), expected, actual)
    if z3_check is not None:
        bad = z3_check(model, actual)
        if bad:
            return Mismatch(step, "invariant", "z3: " + "; ".join(bad), expected, actual)
    if verify:
        return Mismatch(step, "bytes", "; ".join(verify), expected, actual)
    return None
