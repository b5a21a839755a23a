"""The SGLang lane tests. Run them with a lane's interpreter:

    $(tiercheck lane setup sglang==0.5.23) -m pytest tests/sglang -m sglang -p no:cacheprovider

Tests marked ``sglang`` (deselected by the default test command) skip when no supported
SGLang release is importable; test_lane_logic.py (pure lane/shim logic) runs by default.
"""

import importlib.metadata as md

import pytest


@pytest.fixture(scope="session", autouse=True)
def _mirror_release_patch_before_sglang_imports():
    """On a 0.5.23 lane, apply the mirror-release patch (inert unless its flag is set) before
    any test imports sglang: a module imported before the patch reached the disk would keep
    the unpatched code for the whole session (tests/sglang/test_starvation.py needs it)."""
    if "0.5.23" not in [d.version for d in md.distributions(name="sglang")]:
        return
    from tiercheck.conformance.sglang_workload import patch

    root, version = patch.lane_sglang(None)
    patch.apply_patch("mirror-release", root, version)  # idempotent
