"""The timeout policy's allowance per page, as seed 004 derives it: page_size / 1024 *
prefetch_timeout_per_ki_token (a per-token figure applied per page would make the timer
page_size times too short)."""

import pytest

from tiercheck.errors import UserError
from tiercheck.impl.hicache.config import HiCacheConfig
from tiercheck.impl.kvdata import KVLayout


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_allowance_scales_with_the_page(page_size):
    cfg = HiCacheConfig(layout=KVLayout(page_size=page_size), prefetch_timeout_per_ki_token=0.5)
    assert cfg.timeout_per_page == pytest.approx(page_size * 0.5 / 1024)


def test_an_explicit_per_page_allowance_overrides_the_scaling():
    cfg = HiCacheConfig(layout=KVLayout(page_size=16), prefetch_timeout_per_page=0.0)
    assert cfg.timeout_per_page == 0.0


@pytest.mark.parametrize("field, value", [
    ("prefetch_timeout_base", -1.0), ("prefetch_timeout_per_ki_token", -0.75),
    ("prefetch_timeout_per_page", float("inf")), ("prefetch_timeout_per_ki_token", "0.25"),
])
def test_a_negative_or_non_numeric_allowance_is_refused(field, value):
    with pytest.raises(UserError, match=field):
        HiCacheConfig(**{field: value})
