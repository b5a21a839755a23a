"""The scale benchmark's models (benchmarks/models/, issue 16's 10^7 states) load, and the
default engine explores their first states exactly as the plain one does."""

from __future__ import annotations

from pathlib import Path

import pytest
from checker_helpers import explore

from tiercheck.models import model_file
from tiercheck.spec.model import Model

MODELS = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "models").glob("*.toml"))


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_a_scale_model_runs_the_same_on_both_engines(path):
    mf = model_file.load(str(path))
    runs = []
    for engine in ("plain", "memo"):
        c, r = explore(Model(mf.config), mf.properties, engine=engine, max_states=1500)
        runs.append((r.distinct, r.transitions, r.verdicts, list(c.search.keys), list(c.search.parent), list(c.search.via)))
    assert runs[0] == runs[1] and runs[0][0] == 1500


def test_the_scale_models_are_there():
    assert {p.stem for p in MODELS} >= {"wt-mirror-loss-2r", "wt-mirror-loss-h3-2r"}
