"""Seed 004 as shipped (spec/shipped.py) is a named model set, models/library/seed004/, and
`tiercheck attribute` says which of its behaviours breaks which property."""

from __future__ import annotations

import pytest

from tiercheck.cli import main
from tiercheck.models import model_file
from tiercheck.models.attribution import attribute
from tiercheck.spec.shipped import SHIPPED, variants_of
from tiercheck.spec.variants import VARIANTS


def _set(name):
    return sorted(p.stem for p in (model_file.LIBRARY / name).glob("*.toml"))


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_model_of_the_set_switches_on_exactly_the_configuration(name):
    assert all(b.variant in VARIANTS for b in SHIPPED[name])
    models = _set(name)
    assert models
    for m in models:
        assert model_file.load(f"{name}/{m}").config.variants == variants_of(name), m


# model -> the behaviour that breaks its properties alone, and what it breaks
ATTRIBUTED = {
    "seed004/wt-split-1r": ("split-write-lock-leak", ("lock_release",)),
    "seed004/wt-orphan-1r": ("orphan-host-subtree", ("slot_conservation",)),
    "seed004/wt-alloc-2r": ("partial-backup-leak", ("rank_agreement",)),
}


@pytest.mark.parametrize("model", sorted(ATTRIBUTED))
def test_each_violation_is_attributed_to_one_behaviour(model):
    mf = model_file.load(model)
    att = attribute(mf)
    culprit, broken = ATTRIBUTED[model]
    assert att.baseline.violated == ()  # tiercheck's protocol: every property holds
    assert {v: att.breaks(v) for v in att.alone} == {v: (broken if v == culprit else ()) for v in variants_of("seed004")}
    assert att.together.violated == broken and att.interactions() == ()


@pytest.mark.slow
def test_host_starvation_masks_the_orphaned_subtree_with_storage():
    """With storage, the orphaned host subtree alone also breaks no_use_after_free; as
    shipped, starvation keeps the pool pinned and only the host channel fails."""
    att = attribute(model_file.load("seed004/wt-storage-1r"))
    assert att.breaks("host-starvation") == ("host_channel", "host_channel_fair")
    assert att.breaks("orphan-host-subtree") == ("no_use_after_free", "slot_conservation", "counter_sanity")
    assert att.together.violated == ("host_channel", "host_channel_fair")
    assert set(att.masked()) == {"no_use_after_free", "slot_conservation", "counter_sanity"}


def test_attribute_command(capsys):
    assert main(["attribute", "seed004/wt-orphan-1r"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("orphan-host-subtree "))
    assert "slot_conservation" in row
    assert "_evict_regular -> _delete_leaf" in out


def test_attribute_refuses_a_model_without_variants(capsys):
    assert main(["attribute", "wt-1r"]) != 0
    assert "switches on no variant" in capsys.readouterr().err
