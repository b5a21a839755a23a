"""Every catalogued bug variant has a shipped model that exhibits it, and the same model
without the variant satisfies the property the variant breaks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tiercheck.models import model_file
from tiercheck.models.checker import Checker
from tiercheck.spec.model import Model
from tiercheck.spec.variants import VARIANTS

LIBRARY = Path(model_file.LIBRARY)


def _variant_model(name):
    path = LIBRARY / "variants" / f"{name}.toml"
    assert path.exists(), f"variant {name} has no model at {path}"
    return model_file.load(str(path))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_is_caught_with_the_expected_property(name):
    mf = _variant_model(name)
    assert name in mf.config.variants
    assert mf.expect_violation == VARIANTS[name].expect
    res = Checker(Model(mf.config), [mf.expect_violation]).run()
    assert res.verdicts[mf.expect_violation] == "violated", res.verdicts


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_same_model_without_the_variant_satisfies_it(name):
    mf = _variant_model(name)
    cfg = replace(mf.config, variants=frozenset())
    res = Checker(Model(cfg), [mf.expect_violation], max_states=300_000).run()
    assert res.complete and res.verdicts[mf.expect_violation] == "holds", res.verdicts


def test_every_variant_model_names_a_known_variant():
    for path in (LIBRARY / "variants").glob("*.toml"):
        assert path.stem in VARIANTS, f"{path.name} does not match a variant name"


@pytest.mark.parametrize("path", sorted((LIBRARY / "findings").glob("*.toml")), ids=lambda p: p.stem)
def test_findings_reproduce_on_the_correct_spec(path):
    mf = model_file.load(str(path))
    assert not mf.config.variants
    res = Checker(Model(mf.config), [mf.expect_violation]).run()
    assert res.verdicts[mf.expect_violation] == "violated"
