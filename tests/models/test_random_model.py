"""The random model drawer (tiercheck.models.random_model): every model-file key is drawn,
a seed reproduces a model, and every settled model loads, refusals counted."""

from __future__ import annotations

import random
from collections import Counter

from tiercheck.models import model_file, random_model
from tiercheck.spec.config import CONSTANTS


def test_every_constant_has_a_drawer():
    # A constant added to spec/config.py without a drawer fails here.
    assert set(random_model.DRAWERS) == set(CONSTANTS)


def test_a_seed_reproduces_the_model():
    a = random_model.to_toml(random_model.settle(random.Random("7/3"), Counter())[0])
    b = random_model.to_toml(random_model.settle(random.Random("7/3"), Counter())[0])
    c = random_model.to_toml(random_model.settle(random.Random("7/4"), Counter())[0])
    assert a == b and a != c


def test_settled_models_load_and_cover_every_key():
    seen, refusals = Counter(), Counter()
    for i in range(300):
        raw, mf = random_model.settle(random.Random(f"0/{i}"), refusals)
        again = model_file.parse(model_file.loads(random_model.to_toml(raw), "m.toml"), "m.toml")
        assert again.config == mf.config and again.properties == mf.properties
        seen.update(k for k in raw["model"])
        seen.update(f"check.{k}" for k in raw.get("check", {}))
    # Every constant but the bug variants (benchmarks/random_models.py adds those) is
    # drawn away from its default somewhere in 300 models, and both [check] keys too.
    assert set(CONSTANTS) - {"variants"} <= set(seen)
    assert {"check.symmetry", "check.properties"} <= set(seen)
    assert sum(refusals.values()) > 0  # the draws the loader refuses are counted


def test_a_refusal_drops_the_key_it_names(monkeypatch):
    refusals = Counter()
    raw = {"model": {"requests": [[1, 2]], "policy": "write_through", "faults": ["store_loss"]}}
    monkeypatch.setattr(random_model, "draw", lambda _rng: raw)
    out, mf = random_model.settle(random.Random("0/0"), refusals)
    assert "faults" not in out["model"] and not mf.config.faults  # store_loss needs storage
    assert refusals == Counter({"model.faults: 'store_loss' needs storage = true": 1})


def test_refusal_kind_strips_path_and_numbers():
    msg = "a/b.toml: model.host_pages: is 1, but eviction_progress under write_back needs it >= 3"
    assert random_model.refusal_kind(msg).startswith("model.host_pages: is N, but")
