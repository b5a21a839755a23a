"""TLC on the TLA+ twin finds exactly as many distinct states as tiercheck's BFS."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiercheck.spec.variants import VARIANTS as SPEC_VARIANTS
from tiercheck.models import model_file, tla_export
from tiercheck.models.tlc_run import run_tlc

from tlc_helpers import bfs_distinct, needs_tlc, tiercheck_distinct

pytestmark = needs_tlc


def _tlc(tmp_path, name, props):
    tla_export.export(model_file.load(name), tmp_path, props)
    res = run_tlc(tmp_path, workers=1, timeout=900)
    assert res.distinct is not None, res.output[-3000:]
    return res


def test_tlc_equals_tiercheck_on_a_small_model(tmp_path):
    want, props = tiercheck_distinct("wt-1r")
    res = _tlc(tmp_path, "wt-1r", props)
    assert res.ok, res.output[-3000:]
    assert res.distinct == want == 99
    # CPU seconds for the benchmark (Linux: the search part read from /proc).
    assert res.search_cpu is not None and 0 < res.search_cpu <= res.cpu


def test_jvm_options_reach_tlc(tmp_path):
    # The benchmark's --jvm-option: TLC runs under them (C1 only here) with the same count,
    # and an option the JVM rejects fails the run.
    _want, props = tiercheck_distinct("wt-1r")
    tla_export.export(model_file.load("wt-1r"), tmp_path, props)
    res = run_tlc(tmp_path, workers=1, timeout=900, jvm_options=["-XX:TieredStopAtLevel=1"])
    assert res.ok and res.distinct == 99
    bad = run_tlc(tmp_path, workers=1, timeout=900, jvm_options=["-XX:NoSuchOptionAtAll"])
    assert not bad.ok and bad.distinct is None and bad.returncode != 0


@pytest.mark.slow
def test_tlc_reports_the_invariant_a_variant_breaks(tmp_path):
    # partial-backup-leak: replicas diverge (rank_agreement) after one failed allocation.
    res = _tlc(tmp_path, "variants/partial-backup-leak", ["rank_agreement", "no_ghost"])
    assert not res.ok
    assert res.violated == ["rank_agreement"]


# Models of the features issue 15 added to the spec (the small ones in the default run).
# all-features-2r (tests/tla/models/) has every one but the CP planner at once: 2,780 states.
FEATURES = ["paged-1r", "slots-prefetch-1r", "wt-prefetch-fail-1r", "wt-prefetch-revoke-1r"]
FEATURES_SLOW = ["all-features-2r", "request-locks-1r", "request-locks-2r", "wt-prefetch-wait-2r", "lru-2r",
                 "slots-1r", "wt-durable-lru-1r", "cp-planner-ancestors-1r", "cp-planner-lanes-2r",
                 "wt-prefetch-timeout-2r", "cp-planner-lru-1r", "wt-prefetch-endings-2r"]
LOCAL_MODELS = Path(__file__).parent / "models"


@pytest.mark.parametrize("name", FEATURES + [pytest.param(n, marks=pytest.mark.slow) for n in FEATURES_SLOW])
def test_tlc_equals_tiercheck_on_the_feature_models(tmp_path, name):
    local = LOCAL_MODELS / f"{name}.toml"
    name = str(local) if local.is_file() else name
    want, props = tiercheck_distinct(name)
    res = _tlc(tmp_path, name, props)
    assert res.ok, res.output[-3000:]
    assert res.distinct == want


# The variants that issue 15's features make expressible: TLC stops at the property
# tiercheck expects them to break (the slow test below compares their whole state spaces).
# (terminated-half-dropped breaks prefetch_progress, a graph property of tiercheck's: TLC
# compares its state space only, in test_tlc_explores_bug_variants_like_the_spec.)
FEATURE_VARIANTS = ["page-ceil-match", "split-slice-off-by-one", "revoke-frees-in-flight"]
FEATURE_VARIANTS_SLOW = ["prefetch-vote-skipped", "lru-local-clock", "durable-evicted-while-planned",
                         "timeout-local-vote"]


@pytest.mark.parametrize("name", FEATURE_VARIANTS + [pytest.param(n, marks=pytest.mark.slow)
                                                     for n in FEATURE_VARIANTS_SLOW])
def test_tlc_reports_what_a_feature_variant_breaks(tmp_path, name):
    mf = model_file.load(SPEC_VARIANTS[name].model)
    inv, act, _rest = tla_export.split_properties(mf.properties)
    res = _tlc(tmp_path, SPEC_VARIANTS[name].model, inv + act)
    assert not res.ok
    assert res.violated == [SPEC_VARIANTS[name].expect]


CORRECT = [
    "wt-2r", "wb-1r", "wb-2r", "wts-1r", "wts-2r", "wt-alloc-2r", "wb-reclaim-1r",
    "wb-storage-1r", "wt-mirror-prefetch-1r", "wt-prefetch-2r", "wt-storage-1r",
    "wb-reclaim-2r", "wts-mirror-1r", "wb-reclaim-storage-1r", "wt-prefetch-1r",
    "wt-mirror-1r", "cp-planner-2r",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", CORRECT)
def test_tlc_equals_tiercheck_on_shipped_models(tmp_path, name):
    want, props = tiercheck_distinct(name)
    res = _tlc(tmp_path, name, props)
    assert res.ok, res.output[-3000:]
    assert res.distinct == want


# Every variant the TLA+ twin has (its record says ``twin``), the finding, and seed 004 as
# shipped (all its behaviours at once).
VARIANTS = [v.model for v in SPEC_VARIANTS.values() if v.twin] + [
    "findings/mirror-pinned-after-failed-backup", "seed004/wt-alloc-2r", "seed004/wt-orphan-1r",
    "seed004/wt-split-1r", "seed004/wt-storage-1r"]


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_tlc_explores_bug_variants_like_the_spec(tmp_path, name):
    """No properties: both explore everything, CONSTRAINT-bounded states included."""
    res = _tlc(tmp_path, name, [])
    assert res.distinct == bfs_distinct(name)
