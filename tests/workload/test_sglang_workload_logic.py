"""Pure parts of the SGLang starvation workload: traffic shapes, the table, the patch
applier (on a synthetic file carrying the diff's context)."""

from types import SimpleNamespace

import pytest

from tiercheck.conformance.sglang_workload import patch
from tiercheck.conformance.sglang_workload.table import format_table, precondition
from tiercheck.conformance.sglang_workload.traffic import traffic
from tiercheck.errors import UserError


def test_traffic_shapes_are_deterministic_and_sized_against_the_host_pool():
    plain, hot = traffic("plain", 256, sessions=8), traffic("hot", 256, sessions=8)
    assert plain.rounds() == traffic("plain", 256, sessions=8).rounds()
    assert len(plain.rounds()) == 2 and all(len(r) == 8 for r in plain.rounds())
    assert len({r.prompt[:96] for r in hot.rounds()[0]}) == 2  # two hot prompts of 3/8 host each
    assert hot.load.system_pages == 96 and hot.load.page_size == 1
    assert plain.distinct_tokens() > plain.load.system_pages * plain.load.groups
    with pytest.raises(UserError, match="unknown traffic shape"):
        traffic("cold", 256)


def _result(name, host, rejected, admitted, patched=False, mode="cache"):
    setup = SimpleNamespace(device_tokens=1024, host_tokens=host, storage=True, policy="write_through",
                            host_memory_mode=mode)
    c = SimpleNamespace(backup_admitted=admitted, backup_rejected=rejected, prefetch_hit=5, prefetch_loaded=4)
    return SimpleNamespace(arm=SimpleNamespace(name=name, setup=setup, patched=patched), shape="plain",
                           counters=c, host_capacity=host, error="", problems=[], released_tokens=7,
                           write_out_pct=100.0 * admitted / (admitted + rejected), stored_pct=50.0,
                           full_share=lambda: 0.5)


def test_table_and_precondition():
    rows = [_result("baseline", 256, 900, 100), _result("patched", 256, 0, 1000, patched=True),
            _result("between", 256, 20, 80)]
    text = format_table(rows, "t")
    assert "| plain | baseline" in text and "100 / 900" in text and "| 10.0 " in text and "| 7 " in text
    pre = precondition(rows)
    assert pre[0].startswith("  [starves] plain: baseline") and "host 256 < device 1024: True" in pre[0]
    assert pre[1].startswith("  [ok     ] plain: patched") and pre[2].startswith("  [partly ] plain: between")


def test_patch_applier_on_a_synthetic_release(tmp_path):
    hunks = patch.parse_diff(patch._data("mirror-release.diff"))
    assert len(hunks) == 1 and any("maybe_install(self)" in line for line in hunks[0].after)
    f = tmp_path / hunks[0].path
    f.parent.mkdir(parents=True)
    body = "head\n" + "\n".join(hunks[0].before) + "\ntail\n"
    f.write_text(body)
    assert "applied" in patch.apply_patch("mirror-release", str(tmp_path), "0.5.23")
    assert "already applied" in patch.apply_patch("mirror-release", str(tmp_path), "0.5.23")
    patch.revert_patch("mirror-release", str(tmp_path), "0.5.23")
    assert f.read_text() == body
    f.write_text("a release without the hunk's context\n")
    with pytest.raises(UserError, match="does not match this release"):
        patch.apply_patch("mirror-release", str(tmp_path), "0.5.23")
    with pytest.raises(UserError, match="fits sglang 0.5.23"):
        patch.apply_patch("mirror-release", str(tmp_path), "0.5.10")
    assert "+++ b/sglang/srt/mem_cache/hicache_mirror_release.py" in patch.full_diff("mirror-release")
