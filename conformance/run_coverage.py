"""What a conformance run has exercised: steps per action and (action, outcome) pairs.

An outcome is the set of spec-state fields a step changed (``dev_free``, ``sq``, ``store``,
...; ``-`` for a stutter): a ``storage_backup_done`` that leaves a node's pages durable
and one that only records a failed batch are different outcomes of the same action. The
spec says which outcomes an action can have in the states a run reaches, so the run
knows which pairs it has not taken yet and steers towards them (tiercheck.conformance.steering).
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, FrozenSet, Set, Tuple

from tiercheck.spec.state import State


def outcome(model, before: State, after: State) -> FrozenSet[str]:
    """The fields of the spec state one step changed, over all ranks."""
    if after is before or after == before:
        return frozenset(("-",))
    out = set()
    for rb, ra in zip(before.ranks, after.ranks):
        if rb != ra:
            out.update(f for f, x, y in zip(rb._fields, rb, ra) if x != y)
    out.update(f for f in ("store", "hung", "halted") if getattr(before, f) != getattr(after, f))
    for x, y in zip(before.ranks, after.ranks):
        if len(x.sdone) < len(y.sdone) and 0 <= y.sdone[-1].actual < len(model.pages.chain(*y.sq[len(x.sdone)])):
            out.add("partial-ack")  # a storage batch that failed part-way
    return frozenset(out)


class RunCoverage:
    """Counts shared by all examples of one run (and, per model, by a budgeted run's slices)."""

    def __init__(self):
        self.steps: Counter = Counter()  # action name -> steps taken
        self.pairs: Set[Tuple[str, FrozenSet[str]]] = set()  # (action, outcome) taken
        self.seen: Set[Tuple[str, FrozenSet[str]]] = set()  # (action, outcome) enabled somewhere
        self.known: Set[Tuple[str, FrozenSet[str]]] = set()  # ... in the spec's own exploration
        self.frozen = False  # set at the first failure: its replay must see the same counts

    def record(self, steps: Counter, pairs, seen) -> None:
        if self.frozen:
            return
        self.steps.update(steps)
        self.pairs |= pairs
        self.seen |= seen | pairs


def coverage_table(per_model: Dict[str, RunCoverage], action_order) -> str:
    """One line per action: steps, and outcomes taken / outcomes known (seen enabled by an
    example or met by the spec's exploration, tiercheck.conformance.atlas), over models."""
    total: Counter = Counter()
    taken: Dict[str, set] = {}
    seen: Dict[str, set] = {}
    for model, cov in per_model.items():
        total.update(cov.steps)
        for a, o in cov.pairs:
            taken.setdefault(a, set()).add((model, o))
        for a, o in cov.seen | cov.known:
            seen.setdefault(a, set()).add((model, o))
    all_steps = sum(total.values()) or 1
    lines = [f"{'action':30} {'steps':>7} {'share':>6} {'outcomes':>9}"]
    for name in action_order:
        if name not in total and name not in seen:
            continue
        n_taken, n_seen = len(taken.get(name, ())), len(seen.get(name, ()))
        lines.append(f"{name:30} {total[name]:>7} {100 * total[name] / all_steps:>5.1f}% {n_taken:>4}/{n_seen:<4}")
    return "\n".join(lines)
