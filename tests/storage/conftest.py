"""Fixtures for the storage tier: file stores, and a REAL mooncake_master on loopback.

Mooncake tests skip only when the package or the master binary is genuinely absent; with
TIERCHECK_REQUIRE_MOONCAKE=1 (set it in CI) that is a failure instead of a skip.
"""

from __future__ import annotations

import uuid

import pytest

from storage_helpers import make_client, require_mooncake, start_master
from tiercheck.impl.storage import FileStore


@pytest.fixture(scope="session")
def mooncake_master():
    """A real master for the whole session (healthy before any client setup())."""
    require_mooncake()
    m = start_master()
    yield m
    m.stop()


@pytest.fixture(scope="session")
def mooncake_backend(mooncake_master):
    """One client for the session: close() costs about 1 s."""
    b = make_client(mooncake_master)
    yield b
    b.close()


@pytest.fixture
def ns() -> str:
    """A unique key namespace per test (stores are shared across tests)."""
    return uuid.uuid4().hex[:12]


@pytest.fixture
def file_store(tmp_path):
    s = FileStore(tmp_path / "l3")
    yield s
    s.close()
