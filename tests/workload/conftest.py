"""Workload tests: small-scale runs of the seed benchmarks (seconds); the full-size runs
are @pytest.mark.slow. Mooncake arms start a real master on loopback (skipped only when
the package or binary is absent, a failure under TIERCHECK_REQUIRE_MOONCAKE=1)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "storage"))
