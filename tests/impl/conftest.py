"""Fixtures for the HiCache implementation tests: file storage in a temp dir, and a REAL
mooncake_master on loopback (the same helpers as tests/storage; skipped only when the
package or binary is absent, a failure under TIERCHECK_REQUIRE_MOONCAKE=1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
from storage_helpers import require_mooncake, start_master  # noqa: E402

from tiercheck.impl.hicache import FileStorage  # noqa: E402


@pytest.fixture
def file_storage(tmp_path):
    return FileStorage(str(tmp_path / "l3"))


@pytest.fixture
def faulty_storage(tmp_path):
    return FileStorage(str(tmp_path / "l3"), faulty=True)


@pytest.fixture(scope="session")
def hicache_mooncake_master():
    require_mooncake()
    m = start_master()
    yield m
    m.stop()
