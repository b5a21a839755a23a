"""Seed 000's starvation on SGLang 0.5.23 and the mirror-release patch removing it
(docs/findings/sglang-starvation.md), at a size that runs in seconds."""

import importlib.metadata as md
from pathlib import Path

import pytest

LANE = "0.5.23" in [d.version for d in md.distributions(name="sglang")]
pytestmark = [pytest.mark.sglang,
              pytest.mark.skipif(not LANE, reason="needs the SGLang 0.5.23 lane (tiercheck lane setup sglang==0.5.23)")]


def test_patch_applies_to_a_copy_of_the_release_idempotently(tmp_path):
    from tiercheck.conformance.sglang_workload import patch
    from tiercheck.errors import UserError

    root, version = patch.lane_sglang(None)
    rel = "sglang/srt/mem_cache/unified_radix_cache.py"
    (tmp_path / "sglang/srt/mem_cache").mkdir(parents=True)
    original = Path(root, rel).read_text()
    for h in patch.parse_diff(patch._data("mirror-release.diff")):  # work on the unpatched text
        original = original.replace("\n".join(h.after) + "\n", "\n".join(h.before) + "\n")
    (tmp_path / rel).write_text(original)
    assert "applied to sglang 0.5.23" in patch.apply_patch("mirror-release", str(tmp_path), version)
    assert "already applied" in patch.apply_patch("mirror-release", str(tmp_path), version)
    assert patch.is_applied("mirror-release", str(tmp_path))
    assert "maybe_install(self)" in (tmp_path / rel).read_text()
    patch.revert_patch("mirror-release", str(tmp_path), version)
    assert (tmp_path / rel).read_text() == original
    assert not (tmp_path / "sglang/srt/mem_cache/hicache_mirror_release.py").exists()
    with pytest.raises(UserError, match="fits sglang 0.5.23, this lane has 0.5.9"):
        patch.apply_patch("mirror-release", str(tmp_path), "0.5.9")


def test_small_workload_starves_and_the_patch_admits_every_backup():
    from tiercheck.conformance.sglang_workload import patch
    from tiercheck.conformance.sglang_workload.arms import arms, run_arm
    from tiercheck.conformance.sglang_workload.traffic import traffic

    root, version = patch.lane_sglang(None)
    patch.apply_patch("mirror-release", root, version)  # idempotent; inert unless the flag is set
    t = traffic("plain", 256, sessions=32)  # the table's plain arms
    by_name = {a.name.split(":")[0]: a for a in arms(1024, 0.25, patched=True)}
    base = run_arm(by_name["baseline"], t)
    fixed = run_arm(by_name["patched"], t)
    for r in (base, fixed):
        assert not r.error and r.problems == [], (r.error, r.problems)
        assert r.stored_pages > 0  # store pages were read back and verified
    b, f = base.counters, fixed.counters
    assert b.backup_rejected > 0 and base.write_out_pct < 50.0  # starvation: host < device, wt + L3
    assert f.backup_rejected < b.backup_rejected and f.backup_admitted > b.backup_admitted
    assert fixed.released_tokens > 0 and fixed.stored_pages > base.stored_pages
    assert fixed.write_out_pct > 95.0


ROOT = Path(__file__).resolve().parents[2]
MIRROR_MODEL = ROOT / "docs" / "findings" / "models" / "wt-mirror-sglang-1r.toml"


def _mirror_run(rank_cls=None, examples=25, steps=30):
    from tiercheck.conformance import machine
    from tiercheck.conformance.sglang_workload import mirror_conformance as mc
    from tiercheck.conformance.sglang_workload import patch
    from tiercheck.models import model_file

    root, version = patch.lane_sglang(None)
    patch.apply_patch("mirror-release", root, version)
    cfg = model_file.load(str(MIRROR_MODEL)).config
    before = dict(mc.TOTALS)
    saved = mc.MirrorRank
    if rank_cls is not None:
        mc.MirrorRank = rank_cls(saved)
    try:
        machine.run(lambda: mc.MirrorDriver(cfg), examples=examples, steps=steps, seed=1, record_dir=None,
                    label="sglang+mirror-release", stats={})
    finally:
        mc.MirrorRank = saved
    return {k: mc.TOTALS[k] - before[k] for k in before}


def test_patched_sglang_conforms_to_the_spec_mirror_release_model():
    done = _mirror_run()
    assert done["committed_plans"] > 0 and done["released_tokens"] > 0  # the release ran, not only conformed


def test_a_release_that_marks_the_whole_ack_durable_is_caught():
    from tiercheck.conformance import machine

    def durable_on_ack(base):
        class Sabotaged(base):  # seed 000's "an ack is not success", broken on purpose
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                mr = self.mr
                mr._mark_durable = lambda op: mr._mark_hashes(list(op.hash_value or ()))
        return Sabotaged

    with pytest.raises(machine.ConformanceFailure, match="durable"):
        _mirror_run(durable_on_ack, examples=200, steps=50)
