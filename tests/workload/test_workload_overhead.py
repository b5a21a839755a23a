"""The flag-off overhead measurement compares the shipped drain round with a copy that has
the mirror-release lines taken out (impl/workload/overhead.py). That copy must behave
exactly like the shipped round when the flag is off, or the ratio compares different
work; with the flag on it must differ (the comparison sees a change)."""

import pytest

from tiercheck.impl.hicache import FileStorage, HiCacheConfig, LockstepHiCache
from tiercheck.impl.kvdata import KVLayout
from tiercheck.impl.workload import overhead as oh


def _script(g):
    """Insert, copy, commit, back up, drain, under host pressure (4 host pages)."""
    snaps = []
    for i, tokens in enumerate([[1, 2], [1, 2, 3, 4], [5, 6], [7, 8], [9, 10], [11, 12]]):
        g.insert(tokens)
        for _ in g.ranks[0].wq:
            g.write_dma_done(0)
        g.check_events()
        while any(o.ack is None for o in g.ranks[0].sq):
            g.storage_backup_done(0)
        g.check_events()
        g.check_events()
        snaps.append(g.snapshot(store=False))
    return snaps


def _run(tmp_path, name, mirror_release, variant):
    cfg = HiCacheConfig(layout=KVLayout(page_size=2), device_pages=8, host_pages=4,
                        policy="write_through", storage=True,
                        mirror_release=mirror_release, host_free_target=2, manual=True)
    with LockstepHiCache(cfg, 1, FileStorage(str(tmp_path / name))) as g:
        if variant is not None:
            oh.install(g.ranks[0], variant)
        return _script(g)


@pytest.mark.parametrize("variant", [oh.SHIPPED, oh.BASELINE])
def test_baseline_equals_shipped_with_flag_off(tmp_path, variant):
    ref = _run(tmp_path, "ref", False, None)
    assert _run(tmp_path, "v", False, variant) == ref


def test_baseline_differs_with_flag_on(tmp_path):
    # The comparison is sensitive: with the flag on, the baseline skips the release round.
    shipped = _run(tmp_path, "a", True, oh.SHIPPED)
    base = _run(tmp_path, "b", True, oh.BASELINE)
    assert shipped != base
    assert any(n["released"] for s in shipped for r in s for n in r["nodes"].values())


def test_ratio_summary_and_abba():
    s = oh.ratio_summary([2.0, 2.0, 2.0], [1.0, 1.0, 1.0], boot=200)
    assert s["ratio"] == 2.0 and s["lo"] == 2.0 and s["hi"] == 2.0
    assert [oh.abba(i) for i in range(8)] == [0, 1, 1, 0, 0, 1, 1, 0]
    assert oh.ratio_summary([], [1.0])["ratio"] != oh.ratio_summary([], [1.0])["ratio"]  # nan


def test_micro_cost_measures_both_bodies(tmp_path):
    cfg = HiCacheConfig(device_pages=8, host_pages=4, storage=True)
    with LockstepHiCache(cfg, 1, FileStorage(str(tmp_path / "m"))) as g:
        m = oh.micro_cost(g.ranks[0], blocks=4, per_block=200)
    assert m["shipped_ns"] > 0 and m["baseline_ns"] > 0
    assert m["added_ns"] == m["shipped_ns"] - m["baseline_ns"]
