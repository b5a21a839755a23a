"""The implementation's defaults of the protocol's fields are the spec's
(tiercheck.conformance.impl_defaults); a default that drifts is caught."""

from __future__ import annotations

from tiercheck.conformance import impl_defaults
from tiercheck.impl.hicache.config import HiCacheConfig


def test_the_protocol_defaults_are_the_specs():
    assert impl_defaults.problems() == []


def test_a_default_that_drifts_is_caught(monkeypatch):
    monkeypatch.setattr(impl_defaults, "HiCacheConfig", lambda: HiCacheConfig(duplicate_reclaim=True, fail_close_after=3))
    assert impl_defaults.problems() == [
        "HiCacheConfig().duplicate_reclaim = True, the spec's default gives False",
        "HiCacheConfig().fail_close_after = 3, the spec's default gives 2",
    ]
