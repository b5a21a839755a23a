"""Helpers shared by the storage tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import os

import pytest
import torch

from tiercheck.errors import UserError
from tiercheck.impl.storage.mooncake_master import MooncakeMaster, find_master_binary


def make_pages(n: int, shape=(16, 64), dtype=torch.bfloat16, seed: int = 0) -> list[torch.Tensor]:
    """n distinct host-pool pages (rows of one pool tensor, like the real host pool)."""
    g = torch.Generator().manual_seed(seed)
    pool = torch.randn((n, *shape), generator=g).to(dtype)
    return [pool[i] for i in range(n)]


def sentinel_like(pages, value: int = 0x5A) -> list[torch.Tensor]:
    """Destination pages pre-filled with a byte pattern no real page has."""
    outs = [torch.empty_like(p) for p in pages]
    for o in outs:
        o.reshape(-1).view(torch.uint8).fill_(value)
    return outs


def is_sentinel(t: torch.Tensor, value: int = 0x5A) -> bool:
    return bool((t.reshape(-1).view(torch.uint8) == value).all())


# Small store so that a real "no space" and real lease-expiry eviction are cheap to reach.
MOONCAKE_SEGMENT_BYTES = 16 << 20
# Lease after put/get/exists; evictable (above the 90% watermark) once it expires.
MOONCAKE_LEASE_MS = 300


def mooncake_unavailable() -> str | None:
    """Why the Mooncake lane cannot run here, or None."""
    try:
        from tiercheck.impl.storage.mooncake import load_store_class
        load_store_class()
    except UserError as e:
        return str(e)
    if find_master_binary() is None:
        return "mooncake_master binary not found (pip install mooncake-transfer-engine-non-cuda==0.3.13.post1)"
    return None


def require_mooncake() -> None:
    reason = mooncake_unavailable()
    if reason is None:
        return
    if os.environ.get("TIERCHECK_REQUIRE_MOONCAKE") == "1":
        pytest.fail(f"TIERCHECK_REQUIRE_MOONCAKE=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def start_master() -> MooncakeMaster:
    return MooncakeMaster(extra_args=(f"--default_kv_lease_ttl={MOONCAKE_LEASE_MS}",)).start()


def make_client(master: MooncakeMaster):
    from tiercheck.impl.storage.mooncake import MooncakeBackend
    return MooncakeBackend(master.address, segment_bytes=MOONCAKE_SEGMENT_BYTES,
                           local_buffer_bytes=4 << 20, staging_bytes=4 << 20,
                           master_health_url=master.health_url)
