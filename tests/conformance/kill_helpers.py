"""The kill-matrix step shared by the spec-mutant and reference-implementation tests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tiercheck.conformance import machine
from tiercheck.conformance.adapters import driver_factory
from tiercheck.models import model_file
from tiercheck.spec.variants import VARIANTS


def kill(impl: str, name: str, record_dir, examples: int, shrink_budget: int):
    """Run conformance on variant ``name``'s model with the variant switched on in the
    implementation only; it must fail. Returns (the spec's config, the run's stats)."""
    cfg = replace(model_file.load(VARIANTS[name].model).config, variants=frozenset())
    stats = {}
    with pytest.raises(machine.ConformanceFailure):
        machine.run(driver_factory(impl, cfg, {name}), examples=examples, steps=40, seed=1,
                    record_dir=str(record_dir), label=name, stats=stats, shrink_budget=shrink_budget)
    return cfg, stats
