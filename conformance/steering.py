"""How a conformance example picks its next action among those the spec enables.

``index`` (the original rule): an integer draw over the enabled action kinds. Hypothesis
biases small integers towards 0, so the first kind (insert) took 53-62% of the steps and
kinds late in the spec's table (prefetch_io, check_prefetch_progress) starved.

``swarm`` (Groce et al., "Swarm testing", ISSTA 2012): each example first draws a profile,
a random subset of the action kinds with a random weight each; its steps then choose among
the enabled actions of that subset by weight. An example that leaves insert out runs long
sequences of the rare kinds. A step the spec says leaves the state unchanged (an insert
that only hits, a sync round with nothing to agree on) keeps a quarter of its weight
(the implementation must stay put there, worth checking, but such stutters took over half
of all steps). When no enabled kind of the subset can move the state (a sync round is
due, say), the enabled kinds that can join in, so no example gets stuck.

``rare`` adds run-level feedback: a kind's weight is divided by one plus the steps the run
has already given it. ``coverage`` also multiplies the weight of an action whose outcome
(tiercheck.conformance.run_coverage) the run has not produced yet, and starts half of
its examples by walking the spec's shortest path (tiercheck.conformance.atlas) to an
(action, outcome) pair the run has not taken yet.

Every choice is one draw from Hypothesis's data (three bytes read as a fraction, salted,
so the draw carries no bias towards the first kind: Fractions), so an example is a
function of its data
and the run-level counts, which change only between examples and freeze at the first
failure: Hypothesis's replay of the failing example repeats it exactly.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Dict, List, Optional

from hypothesis import strategies as st

from .atlas import atlas_for
from .run_coverage import RunCoverage, outcome

STRATEGIES = ("index", "swarm", "rare", "coverage")
_WEIGHTS = (1, 2, 4, 8)
UNCOVERED_BOOST = 16.0  # an action with an outcome the run has not seen yet
STUTTER_WEIGHT = 1 / 4  # a step the spec says changes nothing (a hit, an idle round)


class Fractions:
    """Numbers in [0, 1) from Hypothesis's data. Three raw bytes each, not ``integers`` or
    ``floats``: those put most draws near 0 (measured: 94% of integers(0, 2**20 - 1) fall
    in the lower half), bytes are close to uniform. Each draw is offset by a salt from a
    generator seeded by the run's name (the same for every example of the run, so an
    example is still a function of its data): Hypothesis starts every run with the
    all-zero example, which unsalted would take the first action at every step."""

    def __init__(self, data, salt_seed):
        self.data = data
        self.salt = random.Random(salt_seed)

    def __call__(self, label: str) -> float:
        v = int.from_bytes(self.data.draw(st.binary(min_size=3, max_size=3), label=label), "big")
        return ((v + self.salt.getrandbits(24)) % (1 << 24)) / (1 << 24)


def draw_profile(fraction, names) -> Dict[str, float]:
    """A swarm profile: action kind -> weight, the kinds left out absent (at least one kept)."""
    profile = {}
    for name in names:
        v = int(fraction(f"swarm:{name}") * 2 * len(_WEIGHTS))
        if v % 2:
            profile[name] = float(_WEIGHTS[v // 2])
    return profile or {name: 1.0 for name in names}


class Chooser:
    """One example's action choice; ``cov`` is the run's shared coverage."""

    def __init__(self, strategy: str, model, cov: RunCoverage, data=None, salt_seed: str = ""):
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
        self.strategy, self.model, self.cov = strategy, model, cov
        self.profile: Optional[Dict[str, float]] = None
        self.plan: List = []  # actions to take first (a path to an uncovered pair)
        atlas = atlas_for(model)
        if not cov.known:  # the coverage report's denominator, whatever the strategy
            cov.known.update(atlas.pairs)
        if strategy != "index" and data is not None:
            # Drawn whatever the strategy and the run's coverage: the shape of an
            # example's draws must not depend on state outside it (Hypothesis checks).
            self.fraction = Fractions(data, salt_seed)
            self.profile = draw_profile(self.fraction, model.profiled_action_names())
            start, which = self.fraction("start"), self.fraction("target")
            if strategy == "coverage" and start < 0.5:
                todo = [p for p in atlas.pairs if p not in cov.pairs]
                if todo:
                    self.plan = atlas.path(todo[int(which * len(todo))])
        # This example's own tallies, merged into ``cov`` when it ends.
        self.steps: Counter = Counter()
        self.pairs, self.seen = set(), set()

    def choose(self, data, s, enabled: List):
        """(action, its spec successor) for the next step; None when nothing is enabled."""
        u = self.fraction("action") if self.strategy != "index" else None
        if not enabled:
            return None
        if self.plan:
            a = self.plan.pop(0)
            t = self.model.next_state(s, a)
            return self._took(a, t, (a.name, outcome(self.model, s, t)))
        by_name: Dict[str, list] = {}
        succ, pair = {}, {}
        for x in enabled:  # actions() lists them grouped, in ACTIONS order
            by_name.setdefault(x.name, []).append(x)
            t = succ[x] = self.model.next_state(s, x)
            pair[x] = (x.name, outcome(self.model, s, t))
        self.seen.update(pair.values())
        if self.strategy == "index":
            groups = list(by_name.values())
            group = groups[data.draw(st.integers(0, len(groups) - 1), label="action")]
            a = group[data.draw(st.integers(0, len(group) - 1), label="params")] if len(group) > 1 else group[0]
            return self._took(a, succ[a], pair[a])
        moving = [n for n, group in by_name.items() if any(succ[a] != s for a in group)]
        kinds = [n for n in by_name if n in self.profile]
        if not any(n in moving for n in kinds):
            kinds += [n for n in moving if n not in kinds]
        kinds = kinds or list(by_name)
        weights = []
        for n in kinds:
            group = by_name[n]
            w = self.profile.get(n, 1.0) / len(group)
            if self.strategy in ("rare", "coverage"):
                w /= 1.0 + self.cov.steps[n] + self.steps[n]
            for a in group:
                wa = w * STUTTER_WEIGHT if succ[a] == s else w
                if self.strategy == "coverage" and pair[a] not in self.cov.pairs and pair[a] not in self.pairs:
                    wa *= UNCOVERED_BOOST
                weights.append((a, wa))
        u *= sum(w for _a, w in weights)
        for a, w in weights:
            u -= w
            if u < 0:
                break
        return self._took(a, succ[a], pair[a])

    def _took(self, a, t, pair):
        self.steps[a.name] += 1
        self.pairs.add(pair)
        return a, t

    def finish(self) -> None:
        self.cov.record(self.steps, self.pairs, self.seen)
