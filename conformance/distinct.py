"""Distinct disagreements: a signature per disagreement, and runs that continue through
the ones already known.

A conformance run stops at its first disagreement, so a second bug that only shows after
the first one (or on the traces the first one always interrupts) stays hidden. Here a
disagreement gets a signature from what it is, not from where it happened in a trace:
the kind of mismatch, the action that showed it, and which fields differ (state), which
properties break (invariant), what the byte check reports (bytes), or the exception type
(error); plus whether only some replicas differ. A run given a set of known signatures
*passes* each mismatch that has one: the spec continues from the implementation's own
(refined) state, as if the spec had taken that step, and invariants already broken in
that state are not reported again. A crash stops the example (the implementation's
state after one is not a state to continue from). So each new run finds a disagreement
the earlier ones did not, and a trace records the known signatures it passed
(``meta.passes``), which its replay passes again.

Nothing here knows any implementation's bugs: signatures are computed from the spec's
own state fields and property names.
"""

from __future__ import annotations

import re
import time
from typing import List, NamedTuple, Optional

from tiercheck.models.trace import state_to_itf

from .compare import Mismatch, check_step, observable
from .crash import describe_crash
from .step_deadline import step_deadline, step_seconds


def _node_fields(a: dict, b: dict) -> list:
    if a is None:
        return ["node added"]
    if b is None:
        return ["node removed"]
    return [f"node.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def state_fields(model, expected, actual) -> tuple[list, bool]:
    """(sorted field names that differ, whether only some ranks differ)."""
    exp, act = state_to_itf(model, observable(expected)), state_to_itf(model, observable(actual))
    fields, ranks_differing = set(), 0
    for ra, rb in zip(exp["ranks"], act["ranks"]):
        differs = False
        na, nb = dict(map(tuple, ra["nodes"]["#map"])), dict(map(tuple, rb["nodes"]["#map"]))
        for name in set(na) | set(nb):
            got = _node_fields(na.get(name), nb.get(name))
            fields.update(got)
            differs |= bool(got)
        for key in ra:
            if key != "nodes" and ra[key] != rb.get(key):
                fields.add(key)
                differs = True
        ranks_differing += differs
    if exp["store"] != act["store"]:
        fields.add("store")
    for flag in ("hung", "halted"):
        if exp[flag] != act[flag]:
            fields.add(flag)
    some = 0 < ranks_differing < len(exp["ranks"])
    return sorted(fields), some


def broken_properties(model, state, before=None, action=None) -> set:
    """Names of the properties ``state`` (and the step before -> state) breaks."""
    out = set()
    for p in model.properties:
        if p.kind == "invariant" and p.fn(model, state):
            out.add(p.name)
        elif p.kind == "transition" and before is not None and p.fn(model, before, action, state):
            out.add(p.name)
    return out


def _bytes_kinds(message: str) -> list:
    """The byte check's lines without ranks, node names and numbers."""
    kinds = set()
    for line in message.split("; "):
        line = re.sub(r"rank \d+: |node [^:]*: |\[[^\]]*\]|-?\d+(\.\d+)?", "", line)
        kinds.add(" ".join(line.replace("!=", "").split()))
    return sorted(k for k in kinds if k)


def signature(model, mm: Mismatch, actions) -> str:
    """What a disagreement is, independent of the trace that led to it."""
    at = "init" if mm.step < 0 else actions[mm.step].name
    if mm.kind == "error":
        return f"error at {at}: {mm.message.split(':', 1)[0]}"
    if mm.kind == "state" and mm.expected is not None and mm.actual is not None:
        fields, some = state_fields(model, mm.expected, mm.actual)
        return f"state at {at}: {', '.join(fields)}{' (some ranks)' if some else ''}"
    if mm.kind == "invariant":
        names = sorted(p.name for p in model.properties if re.search(rf"\b{re.escape(p.name)}:", mm.message))
        return f"invariant at {at}: {', '.join(names) or mm.message.split(':', 1)[0]}"
    if mm.kind == "bytes":
        return f"bytes at {at}: {', '.join(_bytes_kinds(mm.message))}"
    return f"{mm.kind} at {at}"


class Passing:
    """One example's (or one replay's) checks, passing the known signatures."""

    def __init__(self, model, known=(), z3_check=None):
        self.model = model
        self.z3_check = z3_check
        self.known = frozenset(known)
        self.inherited: set = set()  # properties already broken in a state the run passed into
        self.passed: list = []  # signatures passed, in order
        self.dead = False  # a known crash: nothing after it is checked

    def check(self, step, expected, actual, verify, actions, before=None):
        """(mismatch or None, the spec state to continue from)."""
        action = actions[step] if step >= 0 else None
        mm = check_step(self.model, step, expected, actual, verify, self.z3_check, before=before, action=action)
        if mm is not None and mm.kind == "invariant" and self.inherited:
            if not broken_properties(self.model, actual, before, action) - self.inherited:
                mm = Mismatch(step, "bytes", "; ".join(verify), expected, actual) if verify else None
        if mm is None or not self.known:
            return mm, expected
        sig = signature(self.model, mm, actions)
        if sig not in self.known:
            return mm, expected
        self.passed.append(sig)
        self.inherited |= broken_properties(self.model, actual, before, action)
        return None, actual

    def crash(self, mm, actions):
        """A crash: the mismatch, or None (and the example ends) when it is a known one."""
        sig = signature(self.model, mm, actions) if self.known else None
        if sig not in self.known:
            return mm
        self.passed.append(sig)
        self.dead = True
        return None


class Outcome(NamedTuple):
    steps: int
    mismatch: Optional[Mismatch]
    states: list
    passed: list  # the known signatures passed on the way
    # A step the spec enables only past a known disagreement that did not happen here:
    # the implementation agreed up to it, and the rest of the trace cannot be taken.
    unreached: bool = False


def replay_past(driver, actions, known=(), expect_disabled=(), z3_check=None) -> Outcome:
    """tiercheck.conformance.runner.replay, passing the ``known`` signatures."""
    model = driver.model
    checks = Passing(model, known, z3_check)
    limit = step_seconds()
    s = model.init_states()[0]
    states = [s]
    try:
        got = driver.state()
        mm, s = checks.check(-1, s, got, driver.verify(), actions)
    except Exception as exc:  # noqa: BLE001 -- an implementation error is a finding
        return Outcome(0, Mismatch(-1, "error", f"{type(exc).__name__}: {exc}"), states, checks.passed)
    states[0] = s
    if mm:
        return Outcome(0, mm, states, checks.passed)
    prev = got
    for i, a in enumerate(actions):
        if checks.dead:
            return Outcome(i, None, states, checks.passed)
        t = model.next_state(s, a)
        if t is not None and i in expect_disabled and a not in model.actions(s):
            t = None  # a probe outside the model's actions (its option off) is disabled too
        if t is None:
            if checks.known and i not in expect_disabled:
                return Outcome(i, None, states, checks.passed, unreached=True)
            if i not in expect_disabled:
                return Outcome(i, Mismatch(i, "error", f"{a} is not enabled in the spec here (bad trace)"),
                               states, checks.passed)
            t = s
        try:
            with step_deadline(limit):
                driver.apply(a)
                got = driver.state()
                problems = driver.verify()
        except Exception as exc:  # noqa: BLE001
            states.append(t)
            mm = checks.crash(Mismatch(i, "error", describe_crash(exc, a, driver), t), actions)
            return Outcome(i + 1, mm, states, checks.passed)
        mm, t = checks.check(i, t, got, problems, actions, before=prev)
        states.append(t)
        if mm:
            return Outcome(i + 1, mm, states, checks.passed)
        s, prev = t, got
    return Outcome(len(actions), None, states, checks.passed)


def first_new(driver_factory, actions, known, expect_disabled=()) -> Outcome:
    driver = driver_factory()
    try:
        return replay_past(driver, actions, known, expect_disabled)
    finally:
        driver.close()


def shrink_past(driver_factory, model, found: list, known, budget: float = 60.0):
    """The shortest sequence found whose first disagreement past ``known`` has the same
    signature as ``found``'s; (actions, outcome).

    A sequence the spec allows on its own is shrunk by the spec-guided shrinker
    (tiercheck.conformance.shrink); one that is only valid from a passed state (a step
    the spec enables only in the implementation's state) by deleting chunks of steps,
    each candidate checked by replaying it."""
    from .shrink import shrink, spec_states

    first = first_new(driver_factory, found, known)
    key = None if first.mismatch is None else signature(model, first.mismatch, found)

    def still_fails(cand) -> bool:
        out = first_new(driver_factory, cand, known)
        return out.mismatch is not None and signature(model, out.mismatch, cand) == key

    if key is None:
        return found, first
    if spec_states(model, found) is not None:
        best = shrink(model, still_fails, found, budget)
    else:
        best = _delete_chunks(still_fails, found, time.monotonic() + budget)
    return best, first_new(driver_factory, best, known)


def _delete_chunks(still_fails, actions: List, deadline: float) -> List:
    """Delta debugging without the spec: drop chunks (halves down to single steps, latest
    first) while the sequence still fails the same way."""
    best = list(actions)
    size = max(len(best) // 2, 1)
    while size >= 1 and time.monotonic() < deadline:
        changed = False
        start = len(best) - size
        while start >= 0 and time.monotonic() < deadline:
            cand = best[:start] + best[start + size:]
            if cand and still_fails(cand):
                best, changed = cand, True
            start -= size
        if not changed:
            size //= 2
    return best


def find_distinct(driver_factory, examples: int, steps: int, seed: int = 0, record_dir=None, label="impl",
                  limit: int = 4, shrink_budget: float = 60.0, strategy: str = "coverage",
                  rounds: Optional[list] = None) -> tuple[list, dict]:
    """The stateful suite, continued past each disagreement it finds: round k passes the
    signatures rounds 0..k-1 found and runs with seed + k on what is left of the
    ``examples`` budget. Returns (findings, totals): each finding has its ``signature``,
    ``message``, trace ``file``, the signatures it ``passes``, steps before/after
    shrinking and the examples its round ran; at most ``limit`` findings. ``rounds``: a
    list that gets each round's stats dict (tiercheck.conformance.machine.run) as it starts."""
    from .machine import ConformanceFailure, run

    findings, known, used = [], [], 0
    totals = {"examples": 0, "rounds": 0}
    while used < examples and len(findings) < limit:
        stats: dict = {}
        if rounds is not None:
            rounds.append(stats)
        totals["rounds"] += 1
        try:
            run(driver_factory, examples=examples - used, steps=steps, seed=seed + len(findings),
                record_dir=record_dir, label=label, stats=stats, shrink_budget=shrink_budget,
                strategy=strategy, known=tuple(known))
        except ConformanceFailure as exc:
            sig = stats.get("signature")
            findings.append({
                "signature": sig, "message": str(exc).splitlines()[0], "file": stats.get("file"),
                "passes": stats.get("passed", []), "steps_before_shrink": stats.get("steps_before_shrink"),
                "steps_after_shrink": stats.get("steps_after_shrink"),
                "examples_to_failure": stats.get("first_failure_examples"),
            })
            ran = stats.get("first_failure_examples") or stats.get("examples", 1)
            used += max(ran, 1)
            totals["examples"] += ran
            if sig is None or sig in known:  # not a new one (cannot happen: it was passed)
                break
            known.append(sig)
            continue
        totals["examples"] += stats.get("examples", 0)
        break
    return findings, totals
