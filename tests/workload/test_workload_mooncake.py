"""The mirror-release arm on a real Mooncake master (loopback): flag on, small load; no
write rejections, everything written, bytes verified against the store."""

import pytest

from storage_helpers import require_mooncake
from tiercheck.impl.workload.arms import run_mirror_arm, seed_setup
from tiercheck.impl.workload.sessions import SessionLoad

pytestmark = pytest.mark.mooncake


def test_mirror_release_on_mooncake():
    require_mooncake()
    s = seed_setup("small", load=SessionLoad(sessions=16, user_pages=8, output_pages=4), device_pages=512)
    on = run_mirror_arm(s, "mooncake", True)
    assert on.problems == []
    assert on.rejected_tokens() == 0, on.rejected()
    assert on.written_pct == pytest.approx(100.0)
    assert on.stored_pages == on.distinct_pages > 0
