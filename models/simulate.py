"""Random walks through a model too large to exhaust (TLC's -simulate), with swarm testing.

``walks`` walks of at most ``depth`` steps from the initial state. Walk k draws from its
own generator, seeded with (seed, k), so every walk is reproducible on its own and the
run is the same for the same seed. Swarm testing (Groce et al., ISSTA 2012): each walk
takes only a random subset of the actions the model can take (each kept with probability
1/2, at least one), which reaches states that a walk over all actions almost never does
(a DMA that never finishes, a sync round that never runs). A walk ends at ``depth``, in a
state with no enabled non-stuttering action of its subset, in a state outside the model's
constraint, or at a violation.

Checked: the invariants on every state reached, the transition properties on every step
the walk computes (the successors of each state it visits, not only the one it takes).
Progress and liveness need the whole graph and are not checked. A counterexample is the
walk up to the violation with its cycles cut out (a walk that returns to a state it
visited continues from the earlier visit), so it is a run of the spec, not a shortest one.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from tiercheck.models.codec import Codec
from tiercheck.models.coverage import not_applicable
from tiercheck.spec.model import ACTION_SPECS

NOT_VIOLATED = "not violated in {walks:,} walks"
NOT_CHECKED = "not checked (simulation)"


@dataclass
class Found:
    prop: str
    message: str
    states: list  # concrete states, initial state first
    actions: list
    walk: int
    kind: str = ""
    loop_start: Optional[int] = None
    extra: Optional[dict] = None  # written into the trace's metadata


@dataclass
class Simulation:
    seed: int
    walks: int = 0  # walks run
    steps: int = 0  # steps taken
    distinct: int = 0  # distinct states reached (visited or computed as a successor)
    longest: int = 0  # steps of the longest walk (cycles included)
    seconds: float = 0.0
    stop_reason: str = ""  # why fewer walks than asked ran ("" when all ran)
    violations: Dict[str, List[Found]] = field(default_factory=dict)
    coverage: Dict[str, List[int]] = field(default_factory=dict)  # action -> [enabled, taken]


def walk_rng(seed: int, k: int) -> random.Random:
    return random.Random(f"{seed}/{k}")


def swarm(m, rng: random.Random) -> frozenset:
    """A random non-empty subset of the actions that can occur in this model."""
    names = [n for n in m.action_names() if not not_applicable(m.cfg, n)]
    keep = frozenset(n for n in names if rng.random() < 0.5)
    return keep or frozenset([rng.choice(names)])


def simulate(
    m,
    props,
    walks: int,
    depth: int,
    seed: int,
    use_swarm: bool = True,
    max_hits: int = 1,
    time_limit: Optional[float] = None,
) -> Simulation:
    """Run the walks; ``props`` are spec Property objects (invariants and transition
    properties are checked, the others ignored)."""
    invariants = [p for p in props if p.kind == "invariant"]
    transitions = [p for p in props if p.kind == "transition"]
    open_names = {p.name for p in invariants + transitions}
    res = Simulation(seed=seed)
    cov = {n: [0, 0] for n in m.action_names()}
    seen = set()
    codec = Codec(m)
    t0 = time.monotonic()

    def hit(p, msg, states, actions, k):
        lst = res.violations.setdefault(p.name, [])
        final = codec.encode(states[-1])
        if any(codec.encode(f.states[-1]) == final for f in lst):
            return
        lst.append(Found(p.name, msg, list(states), list(actions), k, p.kind, extra={"simulation": {"seed": seed, "walk": k}}))
        if len(lst) >= max_hits:
            open_names.discard(p.name)

    def check_state(s, states, actions, k) -> bool:
        key = codec.encode(s)
        if key in seen:
            return False
        seen.add(key)
        bad = False
        for p in invariants:
            if p.name in open_names:
                msg = p.fn(m, s)
                if msg:
                    hit(p, msg, states, actions, k)
                    bad = True
        return bad

    for k in range(walks):
        if not open_names:
            res.stop_reason = "every property already violated"
            break
        if time_limit and time.monotonic() - t0 > time_limit:
            res.stop_reason = f"--time-limit {time_limit:g}s reached"
            break
        rng = walk_rng(seed, k)
        allowed = swarm(m, rng) if use_swarm else None
        s = m.init_states()[0]
        states, actions = [s], []
        where = {codec.encode(s): 0}  # state key -> its index in the walk (cycles are cut)
        res.walks += 1
        if check_state(s, states, actions, k):
            continue
        taken = 0
        while taken < depth and m.constraint(s):
            moves = []
            for a in m.actions(s):
                cov[a.name][0] += 1
                if allowed is not None and a.name not in allowed:
                    continue
                t = ACTION_SPECS[a.name].effect(m, s, a)
                if t == s:
                    continue
                moves.append((a, t))
            stop = False
            for a, t in moves:
                for p in transitions:
                    if p.name in open_names:
                        msg = p.fn(m, s, a, t)
                        if msg:
                            hit(p, msg, states + [t], actions + [a], k)
                            stop = True
                if check_state(t, states + [t], actions + [a], k):
                    stop = True
            if stop or not moves:
                break
            a, t = moves[rng.randrange(len(moves))]
            cov[a.name][1] += 1
            taken += 1
            key = codec.encode(t)
            j = where.get(key)
            if j is not None:  # back to an earlier state of this walk: cut the cycle
                for x in states[j + 1 :]:
                    where.pop(codec.encode(x), None)
                del states[j + 1 :], actions[j:]
            else:
                where[key] = len(states)
                states.append(t)
                actions.append(a)
            s = t
        res.steps += taken
        res.longest = max(res.longest, taken)
    res.distinct = len(seen)
    res.seconds = time.monotonic() - t0
    res.coverage = {n: c for n, c in cov.items() if c[0]}
    return res


def verdicts(props, res: Simulation) -> Dict[str, str]:
    out = {}
    for p in props:
        if p.name in res.violations:
            out[p.name] = "violated"
        elif p.kind in ("invariant", "transition"):
            out[p.name] = NOT_VIOLATED.format(walks=res.walks)
        else:
            out[p.name] = NOT_CHECKED
    return out
