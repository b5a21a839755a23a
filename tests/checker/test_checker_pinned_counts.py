"""Pinned state-space sizes and verdicts of every shipped model (tables in pins.py).

The checker's speed-ups (packed states, interning, memo identity layer, worker
processes) must not change what is explored, and a TLA+ twin of the spec is compared
against these numbers, so they are pinned: distinct states and transitions of each
correct model, and the set of violated properties (default properties) and distinct
states of each variant and finding model. Models above a few thousand states run under
``-m slow`` (wt-mirror-2r, 1.5M states, is the >= 10^6-state check).
"""

from __future__ import annotations

import pytest
from checker_helpers import default_run
from pins import CORRECT, EXPECTED, FAST, other_lane, shipped_names

from tiercheck.models import model_file
from tiercheck.spec.variants import VARIANTS


def _params(table):
    return [
        pytest.param(name, marks=() if pin[0] < FAST else pytest.mark.slow, id=name)
        for name, pin in sorted(table.items())
    ]


def test_every_shipped_model_is_pinned():
    mine = {n for n in shipped_names() if not other_lane(n)}
    assert mine == set(CORRECT) | set(EXPECTED)


def test_every_variant_is_pinned_violating_the_property_its_record_names():
    for v in VARIANTS.values():
        assert v.expect in EXPECTED[v.model][1], v.name


@pytest.mark.parametrize("name", _params(CORRECT))
def test_correct_model_state_space(name):
    res = default_run(name)
    assert res.complete
    assert (res.distinct, res.transitions) == CORRECT[name]


@pytest.mark.parametrize("name", _params(EXPECTED))
def test_variant_and_finding_verdicts(name):
    distinct, violated = EXPECTED[name]
    res = default_run(name)
    assert {p for p, v in res.verdicts.items() if v == "violated"} == violated
    assert model_file.load(name).expect_violation in violated
    assert res.complete and res.distinct == distinct
