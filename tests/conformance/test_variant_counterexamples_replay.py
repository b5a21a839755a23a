"""Every bug variant's counterexample replays on the reference implementation with that
variant on (the promise `tiercheck replay TRACE --impl reference --variant NAME` makes).

The checker's counterexample on the variant's shipped model replays there: a safety trace
stops at its last step, breaking a property, or earlier where the spec's own trace breaks
the property the replay names (the checker searches on past one property's violation for
the others'); a progress or liveness trace replays to its end. The storage variants run by
default (failed-batch-acked's stopped one step early on the failed-pages counter while the
refinement took its lying ack for the stored count, docs/random-models.md); the rest under
-m slow.
"""

from __future__ import annotations

import pytest

from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.conformance.runner import replay
from tiercheck.models import model_file
from tiercheck.models.checker import Checker
from tiercheck.models.replay import replay as spec_replay
from tiercheck.spec.model import Model
from tiercheck.spec.properties import BY_NAME
from tiercheck.spec.variants import VARIANTS

STORAGE = ("failed-batch-acked", "durable-on-ack", "split-during-backup", "release-busy")


def _broken_at(model, actions, step: int, message: str) -> bool:
    """Whether the spec's own states break, at ``step`` (0-based action index), a property
    the mismatch ``message`` names."""
    states = spec_replay(model, actions[: step + 1])
    for name, p in BY_NAME.items():
        if f"{name}:" not in message:
            continue
        if p.kind == "invariant" and p.fn(model, states[-1]):
            return True
        if p.kind == "transition" and p.fn(model, states[-2], actions[step], states[-1]):
            return True
    return False


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=() if n in STORAGE else pytest.mark.slow) for n, v in VARIANTS.items() if v.impl
])
def test_the_counterexamples_replay_on_the_reference_with_the_variant_on(name):
    mf = model_file.load(VARIANTS[name].model)
    model = Model(mf.config)
    res = Checker(model, mf.properties, time_limit=300).run()
    assert res.complete and res.violations, res.verdicts
    for prop, found in res.violations.items():
        v = found[0]
        driver = ReferenceDriver(mf.config)
        try:
            out = replay(driver, v.actions)
        finally:
            driver.close()
        mm = out.mismatch
        if BY_NAME.get(prop) is None or BY_NAME[prop].kind not in ("invariant", "transition"):
            assert mm is None, (prop, mm)  # a progress path or a lasso: replayed to its end
            continue
        assert mm is not None and mm.kind == "invariant", (prop, mm)
        last = len(v.actions) - 1
        assert mm.step == last or _broken_at(model, v.actions, mm.step, mm.message), (prop, mm.step, last, mm.message)
