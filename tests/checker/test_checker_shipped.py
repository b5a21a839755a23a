"""Every shipped model: its actions are exercised, and symmetry reduction changes no
verdict. Small models run by default, the rest under ``-m slow`` (pins.py)."""

from __future__ import annotations

import pytest
from checker_helpers import default_run
from pins import correct_names, params, shipped_names

from tiercheck.models import coverage, model_file
from tiercheck.models.checker import UNCHECKED_SYMMETRY, UNSOUND_SYMMETRY
from tiercheck.spec.model import Model

SYM_FAST = 500  # the symmetric rerun doubles the cost: a lower bar for the default set


@pytest.mark.parametrize("name", params(correct_names()))
def test_a_correct_model_leaves_no_action_never_enabled(name):
    res = default_run(name)
    assert res.complete
    m = Model(model_file.load(name).config)
    assert coverage.never_enabled(m, res.coverage) == []
    # Every relevant action was also taken (changed the state) at least once.
    assert [r.action for r in coverage.table(m, res.coverage) if r.status == "never taken"] == []


@pytest.mark.parametrize("name", params(shipped_names(), fast=SYM_FAST))
def test_verdicts_agree_with_and_without_symmetry(name):
    full = default_run(name)
    red = default_run(name, symmetry=True)
    assert full.complete and red.complete
    kinds = {p: k for p, k in _kinds(model_file.load(name).properties).items()}
    for p, v in full.verdicts.items():
        if red.verdicts[p] == UNSOUND_SYMMETRY:
            # Withdrawn because replicas diverged: they really do, and nothing is lost.
            assert full.verdicts["rank_agreement"] == "violated" and v != "violated", p
        elif kinds[p] in ("invariant", "transition"):
            assert red.verdicts[p] == v, p
        else:
            # Progress and liveness are never judged on the reduced graph.
            assert red.verdicts[p] == (UNCHECKED_SYMMETRY if red.symmetry else v), p
    if red.symmetry and UNSOUND_SYMMETRY not in red.verdicts.values():
        # The representatives stand for exactly the unreduced state space.
        assert red.symmetry["represented"] == full.distinct
        assert red.distinct <= full.distinct


def _kinds(props):
    from tiercheck.models.checker import resolve_property

    return {p: resolve_property(p).kind for p in props}
