"""Survivors of the mutation sample killed in session 11 (kil5), each against its mutant,
as benchmarks/mutation_suite.py runs the unit that kills it:

- the silent-rank fault: a default driver timeout of 3 * collective ** 120 (gloo.py) is
  reported as a hang by the unit's watchdog instead of being waited out;
- the Mooncake lane: MooncakeStorage's default local buffer of 4 - 20, 4 / 20 or 4 ** 20
  bytes (storage_setup.py) fails the reference's start on a real master.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tiercheck.conformance import process_faults as pf
from tiercheck.impl.hicache import storage_setup
from tiercheck.impl.hicache.gloo import GlooHiCache

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "storage"))
from storage_helpers import require_mooncake  # noqa: E402

from mutant_helpers import load_mutation_suite, recompiled  # noqa: E402


@pytest.fixture(scope="module")
def suite():
    return load_mutation_suite("bench_mutation_suite_kil5")


# -- the silent rank's default driver timeout ----------------------------------------------

@pytest.mark.gloo
@pytest.mark.slow
def test_the_silent_rank_watchdog_reports_a_driver_that_waits_forever(monkeypatch):
    made = recompiled(GlooHiCache.__init__, "3 * collective_timeout + 120.0", "3 * collective_timeout ** 120.0")
    monkeypatch.setattr(GlooHiCache, "__init__", made["__init__"])
    got = pf.guarded(pf.silent_rank_without_failure)
    assert "did not report the silent rank 1 within its default timeout 135s" in got


# -- Mooncake with the default sizes -------------------------------------------------------

@pytest.mark.mooncake
def test_the_mooncake_units_pass_with_the_default_sizes(suite, capsys):
    require_mooncake()
    units = suite.mooncake_units()
    assert [n for n, _ in units] == [f"mooncake tour {t} 0" for t in sorted(suite.MOONCAKE_TOURS)]
    name, run = units[0]
    assert suite.run_unit(name, run), capsys.readouterr().out
    assert "skipped" not in capsys.readouterr().out


@pytest.mark.mooncake
@pytest.mark.parametrize("size", ["4 - 20", "4 / 20", "4 ** 20"])
def test_a_mooncake_unit_kills_a_bad_default_local_buffer(suite, monkeypatch, capsys, size):
    require_mooncake()
    import tiercheck.impl.hicache as hicache

    made = recompiled(storage_setup.MooncakeStorage, "local_buffer_bytes: int = 4 << 20",
                       f"local_buffer_bytes: int = {size}")
    monkeypatch.setattr(hicache, "MooncakeStorage", made["MooncakeStorage"])
    name, run = suite.mooncake_units()[0]
    assert not suite.run_unit(name, run)
    assert "the reference does not start on Mooncake" in capsys.readouterr().out
