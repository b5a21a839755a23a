"""Seed 001 on a small run: write_back with duplicate reclaim frees duplicates under host
pressure, which leaves more host pages for host-only data; bytes verify in both arms."""

import pytest

from tiercheck.impl.hicache import metrics as mt
from tiercheck.impl.workload import seedtable as stb
from tiercheck.impl.workload.arms import reclaim_setup


@pytest.fixture(scope="module")
def table():
    return stb.run_reclaim_table(reclaim_setup("small"))


def test_reclaim_directions(table):
    off, on = table.off, table.on
    assert off.metrics.get(mt.DUP_RECLAIMED, 0) == 0
    assert on.metrics[mt.DUP_RECLAIMED] > 0
    assert off.trace.pressure_rows() and on.trace.pressure_rows()  # the host pool was under pressure
    assert on.trace.mean_under_pressure("mirror") < off.trace.mean_under_pressure("mirror")
    assert on.trace.mean_under_pressure("host_only") > off.trace.mean_under_pressure("host_only")
    assert on.hit_pct() >= off.hit_pct()
    assert all(ok for _, ok, _ in stb.reclaim_directions(table))


def test_reclaim_arms_verify(table):
    assert table.off.problems == [] and table.on.problems == []
    text = stb.format_reclaim_table(table)
    assert "effective host capacity" in text and "[NO ]" not in text
