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
    path = LIBRARY / f"{VARIANTS[name].model}.toml"
    assert path.exists(), f"variant {name} has no model at {path}"
    return model_file.load(str(path))


def _params():
    """Every variant; those whose model file says slow run under -m slow."""
    return [pytest.param(n, marks=pytest.mark.slow if model_file.load(VARIANTS[n].model).slow else (), id=n)
            for n in sorted(VARIANTS)]


@pytest.mark.parametrize("name", _params())
def test_variant_is_caught_with_the_expected_property(name):
    mf = _variant_model(name)
    assert mf.config.variants == {name}
    assert mf.expect_violation == VARIANTS[name].expect
    res = Checker(Model(mf.config), [mf.expect_violation]).run()
    assert res.verdicts[mf.expect_violation] == "violated", res.verdicts


@pytest.mark.parametrize("name", _params())
def test_the_same_model_without_the_variant_satisfies_it(name):
    mf = _variant_model(name)
    cfg = replace(mf.config, variants=frozenset())
    res = Checker(Model(cfg), [mf.expect_violation], max_states=300_000).run()
    assert res.complete and res.verdicts[mf.expect_violation] == "holds", res.verdicts


def test_every_variant_record_is_complete():
    """What the rest of tiercheck derives from a variant's record (docs/extending.md)."""
    from tiercheck.spec.model import ACTION_SPECS
    from tiercheck.spec.properties import BY_NAME
    from tiercheck.spec.variants import LIVENESS_ONLY, OBLIGATION, OUT_OF_SCOPE, THEOREM

    for v in VARIANTS.values():
        assert v.expect in BY_NAME, f"{v.name}: expect {v.expect!r} is no property"
        assert v.action in ACTION_SPECS, f"{v.name}: action {v.action!r} is no spec action"
        assert v.proof == OBLIGATION or v.proof == LIVENESS_ONLY or v.proof_note(), v.name
        assert v.proof != OBLIGATION or BY_NAME[v.expect].proofs or v.proof.startswith(OUT_OF_SCOPE), (
            f"{v.name}: a proof obligation needs a property the proofs encode ({v.expect})")
        assert (v.proof == LIVENESS_ONLY) == (BY_NAME[v.expect].kind in ("progress", "liveness")), v.name
        # a variant whose symptom is replica divergence ends rank symmetry (models/symmetry.py)
        assert v.breaks_rank_symmetry or v.expect != "rank_agreement", v.name
        assert v.proof.startswith((OBLIGATION, LIVENESS_ONLY, THEOREM, OUT_OF_SCOPE)), v.name


def test_every_variant_model_names_a_known_variant():
    for path in (LIBRARY / "variants").glob("*.toml"):
        assert path.stem in VARIANTS, f"{path.name} does not match a variant name"


@pytest.mark.parametrize("path", sorted((LIBRARY / "findings").glob("*.toml")), ids=lambda p: p.stem)
def test_findings_reproduce_on_the_correct_spec(path):
    mf = model_file.load(str(path))
    assert not mf.config.variants
    res = Checker(Model(mf.config), [mf.expect_violation]).run()
    assert res.verdicts[mf.expect_violation] == "violated"
