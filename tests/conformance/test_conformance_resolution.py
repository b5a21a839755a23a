"""The spec at the seeds' resolution against the reference HiCache: slot identities (with
a prefetch's reserved and released slots), pages of two tokens, and the LRU victim order
with rank-local touches conform on their shipped models."""

from __future__ import annotations

import pytest

from tiercheck.conformance import machine
from tiercheck.conformance.reference import ReferenceDriver
from tiercheck.models import model_file
from tiercheck.spec.config import CONSTANTS


class _Counting(ReferenceDriver):
    taken: dict = {}

    def apply(self, action):
        super().apply(action)
        _Counting.taken[action.name] = _Counting.taken.get(action.name, 0) + 1


@pytest.mark.parametrize("name, key, exercised", [
    ("slots-prefetch-1r", "slots", "check_prefetch_progress"),
    ("paged-1r", "page_size", "load_back"),
    ("lru-2r", "victim_order", "local_access"),
])
def test_reference_conforms_at_the_finer_resolution(name, key, exercised):
    cfg = model_file.load(name).config
    assert getattr(cfg, key) != CONSTANTS[key].default
    _Counting.taken = {}
    machine.run(lambda: _Counting(cfg), examples=12, steps=30, seed=5)
    assert _Counting.taken.get(exercised, 0) >= 2
