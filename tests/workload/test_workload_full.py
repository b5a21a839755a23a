"""Full-size runs (minutes): seed 000's table on the file store, Mooncake and two
engines, with every direction reproduced and the flag-off overhead under 1%; seed 001's
duplicate reclaim at full size."""

import pytest

from storage_helpers import require_mooncake
from tiercheck.impl.workload import seedtable as stb
from tiercheck.impl.workload.arms import reclaim_setup, seed_setup

pytestmark = pytest.mark.slow


def test_full_seed_table_directions():
    require_mooncake()
    t = stb.run_seed_table(seed_setup("full"), ("file", "mooncake"), "file")
    failed = [d for d in stb.directions(t) if not d[1]]
    assert not failed, stb.format_seed_table(t)


def test_full_reclaim_directions():
    t = stb.run_reclaim_table(reclaim_setup("full"))
    failed = [d for d in stb.reclaim_directions(t) if not d[1]]
    assert not failed, stb.format_reclaim_table(t)
