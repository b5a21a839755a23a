"""The halt message read back (tiercheck.conformance.halt_report): the message of a real
halt tells the truth, and one that names another digest or other victims is caught."""

from __future__ import annotations

import pytest

from tiercheck.conformance import halt_report
from tiercheck.impl.hicache import HiCacheConfig, LockstepHiCache, ReplicaDivergenceError
from tiercheck.impl.kvdata import KVLayout


@pytest.fixture
def halted():
    """Two ranks that reclaimed different duplicates (rank 1's registry order drifted):
    the next ready-count round halts. Yields (group, the halt message)."""
    cfg = HiCacheConfig(layout=KVLayout(layers=1, heads=1, head_dim=4, page_size=1), device_pages=6,
                        host_pages=2, policy="write_back", duplicate_reclaim=True, victim_order="path",
                        manual=True)
    g = LockstepHiCache(cfg, 2, timeout=5.0)
    try:
        for t in (1, 2):
            g.insert([t])
            g.evict_node([t])
            g.insert([t])
        g.registry_skew(1)
        g.insert([3])
        g.evict_node([3])
        with pytest.raises(ReplicaDivergenceError) as exc:
            g.writing_check()
        yield g, str(exc.value)
    finally:
        g.close()


def _problems(g, message):
    return halt_report.problems(message, g.ranks, g.snapshot(store=False), g.cfg)


def test_the_message_of_a_real_halt_tells_the_truth(halted):
    g, message = halted
    assert _problems(g, message) == []


def test_a_message_with_another_digest_max_is_caught(halted):
    g, message = halted
    hi = max(r.digest for r in g.ranks)
    wrong = message.replace(f"max {hi};", f"max {-hi};")
    assert wrong != message
    assert "halt message says digest min" in _problems(g, wrong)[0]


def test_a_message_with_other_victims_is_caught(halted):
    g, message = halted
    wrong = message.replace("this rank reclaimed [", "this rank reclaimed [(9,), ")
    assert "its snapshot says" in _problems(g, wrong)[0]


def test_a_message_without_the_digests_is_caught(halted):
    g, _message = halted
    assert "does not name the digest min and max" in _problems(g, "rank 0: something diverged")[0]
