"""StoreGuard: once the server behind a backend is gone, calls fail at once with the
codes a dead Mooncake master gives, nothing reaches the backend, and the outage is kept
for the report. A real file store behind it; the liveness flag is the injected fault."""

from __future__ import annotations

import torch

from tiercheck.impl.storage import FileStore, codes
from tiercheck.impl.storage.guard import StoreGuard


def test_a_dead_server_fails_calls_at_once_and_is_recorded(tmp_path):
    alive = [True]
    inner = FileStore(tmp_path)
    g = StoreGuard(inner, lambda: alive[0], "test master")
    page = torch.arange(64, dtype=torch.uint8)
    assert g.batch_put(["a"], [page]) == [codes.OK] and g.outages == []
    alive[0] = False
    assert g.batch_put(["b"], [page]) == [codes.RPC_FAIL]
    assert g.batch_exists(["a", "b"]) == [codes.EXISTS_ERROR] * 2
    out = torch.zeros(64, dtype=torch.uint8)
    assert g.batch_get(["a"], [out]) == [codes.RPC_FAIL] and not out.any()
    assert inner.batch_exists(["b"]) == [codes.ABSENT]  # the failed put never reached the store
    assert g.outages == ["test master stopped answering (found dead at a put); later calls failed at once"]
    assert g.stats["skipped.put"] == 1 and g.stats["skipped.exists"] == 2
    g.close()
