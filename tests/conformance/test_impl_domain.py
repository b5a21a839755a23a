"""The implementation accepts the configurations the spec has and refuses the rest with a
UserError (tiercheck.conformance.impl_domain); a drifted check is caught."""

from __future__ import annotations

import pytest

from tiercheck.conformance import impl_domain
from tiercheck.errors import UserError
from tiercheck.impl.hicache.config import HiCacheConfig


def test_the_implementations_domain_is_the_specs():
    assert impl_domain.problems() == []


def _accepting(monkeypatch, **accept):
    """HiCacheConfig that also accepts the given field=value pairs (a validation dropped)."""
    def build(**kw):
        (name, value), = kw.items()
        if name in accept and type(value) is type(accept[name]) and value == accept[name]:
            return None
        return HiCacheConfig(**kw)
    monkeypatch.setattr(impl_domain, "HiCacheConfig", build)
    monkeypatch.setattr(impl_domain.dataclasses, "fields", lambda cls: HiCacheConfig.__dataclass_fields__.values())


def test_a_value_the_spec_has_no_configuration_for_is_caught(monkeypatch):
    _accepting(monkeypatch, durable_capacity=0)
    assert impl_domain.problems() == [
        "HiCacheConfig(durable_capacity=0) ok, but the spec's durable_capacity in 0..64 maps to "
        "[1, 2, None] near 0: want refused"]


def test_a_value_of_the_wrong_type_is_caught(monkeypatch):
    _accepting(monkeypatch, storage="false")
    assert impl_domain.problems() == [
        "HiCacheConfig(storage='false') ok: a bool field must refuse it with a UserError"]


def test_a_refusal_that_is_not_a_user_error_is_caught(monkeypatch):
    def build(**kw):
        if kw.get("prefetch_timeout_base") == "7":
            raise TypeError("'<=' not supported")
        return HiCacheConfig(**kw)
    monkeypatch.setattr(impl_domain, "HiCacheConfig", build)
    monkeypatch.setattr(impl_domain.dataclasses, "fields", lambda cls: HiCacheConfig.__dataclass_fields__.values())
    assert impl_domain.problems() == [
        "HiCacheConfig(prefetch_timeout_base='7') raised TypeError: a float field must refuse it with a UserError"]


@pytest.mark.parametrize("kw", [{"storage": "false"}, {"verify_loads": 1}, {"device": 7}, {"variants": 1.5},
                                {"variants": [3]}, {"fail_close_after": 0}])
def test_the_implementation_refuses_in_one_line(kw):
    with pytest.raises(UserError) as e:
        HiCacheConfig(**kw)
    assert "\n" not in str(e.value)
