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
from tiercheck.models.replay import breaks_at
from tiercheck.spec.model import Model
from tiercheck.spec.properties import BY_NAME
from tiercheck.spec.variants import VARIANTS

STORAGE = ("failed-batch-acked", "durable-on-ack", "split-during-backup", "release-busy")


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
        named = [n for n in BY_NAME if f"{n}:" in mm.message]
        assert mm.step == last or breaks_at(model, v.actions, mm.step, named), (prop, mm.step, last, mm.message)
