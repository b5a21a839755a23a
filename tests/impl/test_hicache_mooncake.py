"""The protocol on a real Mooncake store (master on loopback): backup, durable marks,
mirror release, pruning, prefetch back and load-back with bytes verified; a batch that
fails partway is counted and never served."""

import uuid

import pytest

from hicache_helpers import backup_all, group, load_all, metric, node, nodes, ranks_agree, write_all
from tiercheck.impl.hicache import MooncakeStorage
from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.storage import FaultyBackend, StorageBackend, codes

pytestmark = pytest.mark.mooncake


class Shared(StorageBackend):
    """One real client shared by the ranks (a client's close() costs seconds); each rank
    wraps it in its own FaultyBackend, so faults stay per rank."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.name = inner, inner.name

    def batch_put(self, keys, values):
        return self.inner.batch_put(keys, values)

    def batch_get(self, keys, outs):
        return self.inner.batch_get(keys, outs)

    def batch_exists(self, keys):
        return self.inner.batch_exists(keys)

    def delete(self, keys):
        return self.inner.delete(keys)

    def close(self):
        pass  # the fixture closes the real client


@pytest.fixture(scope="module")
def mooncake(hicache_mooncake_master):
    m = hicache_mooncake_master
    client = MooncakeStorage(m.address, health_url=m.health_url).make(0)
    yield lambda rank: FaultyBackend(Shared(client))
    client.close()


def test_protocol_round_trip_on_mooncake(mooncake):
    # Keys carry the page hash, so a fresh token alphabet keeps tests apart on one master.
    base = uuid.uuid4().int % 10**9 * 10
    a, b, c = base + 1, base + 2, base + 3
    with group(2, mooncake, device_pages=6, host_pages=3, storage=True, prefetch=True,
               mirror_release=True, host_free_target=1) as g:
        g.storage_fault(1, "fail_from", 1, codes.NO_SPACE)  # rank 1's batch fails partway
        g.insert([a, b, c])
        write_all(g)
        backup_all(g)
        assert metric(g, mt.STORAGE_FAILED_PAGES, 1) == 2 and metric(g, mt.BACKUPED, 0) == 3
        snaps = g.snapshot()
        assert snaps[0]["store"] == [(a,), (a, b), (a, b, c)] and snaps[1]["store"] == [(a,)]
        g.insert([a, b, c])  # re-hit: rank 1's durable marks stop at (a,)
        for r in (0, 1):
            g.storage_fault(r, "clear")
        g.insert([a])  # split: (a,) is fully durable on both ranks
        g.drain_storage_control_queues()  # plan (a,) under pressure...
        g.drain_storage_control_queues()  # ...agreed and committed
        assert node(g, [a])["released"] and ranks_agree(g)
        g.evict_node([a, b, c])
        g.evict_node([a])  # released mirror: deleted with its host-only child
        assert nodes(g) == {}
        assert g.prefetch_from_storage([a, b, c]) == [0, 0]
        assert [g.prefetch_io(r, 0) for r in (0, 1)] == [3, 1]  # rank 1: stops at its miss
        g.check_prefetch_progress(0)
        assert list(nodes(g)) == [(a,)]
        assert g.verify() == []  # the prefetched bytes are right
        g.load_back([a])
        load_all(g)
        g.drain_storage_control_queues()
        assert g.verify() == [] and ranks_agree(g)
