"""TLC on the TLA+ twin finds exactly as many distinct states as tiercheck's BFS."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from tiercheck.spec.variants import VARIANTS as SPEC_VARIANTS
from tiercheck.models import model_file, tla_export, tla_states
from tiercheck.models.checker import Checker
from tiercheck.models.tlc_run import run_tlc
from tiercheck.spec.model import Model

from tlc_helpers import bfs_distinct, bfs_states, needs_tlc, tiercheck_distinct

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
# The scheduler's own eviction (insert_evicts, load_back_evicts): wt-evicts-1r and
# evicts-reclaim-held-1r (tests/tla/models/) in the default run; evicts-lanes-1r,
# evicts-reclaim-lru-2r (write_back, duplicate reclaim, LRU, slots, 2 ranks) and
# evicts-all-features-2r (with every feature above) in the slow one.
# wb-reclaim-prefetch-1r: release_safety ignores the anchor a prefetch holds while it runs
# (the twin lacked it: TLC reported release_safety on this correct model).
FEATURES = ["paged-1r", "slots-prefetch-1r", "wt-prefetch-fail-1r", "wt-prefetch-revoke-1r",
            "wt-evicts-1r", "evicts-reclaim-held-1r", "wb-reclaim-prefetch-1r"]
FEATURES_SLOW = ["all-features-2r", "request-locks-1r", "request-locks-2r", "wt-prefetch-wait-2r", "lru-2r",
                 "slots-1r", "wt-durable-lru-1r", "cp-planner-ancestors-1r", "cp-planner-lanes-2r",
                 "wt-prefetch-timeout-2r", "cp-planner-lru-1r", "wt-prefetch-endings-2r",
                 "evicts-lanes-1r", "request-locks-evicts-1r", "wb-evicts-2r", "wb-reclaim-evicts-1r", "evicts-reclaim-lru-2r",
                 "evicts-all-features-2r"]
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


# The scheduler's own eviction variants: TLC checking the property the variant breaks stops
# there with a trace as long as tiercheck's shortest counterexample (with every property,
# TLC reports an invariant that breaks in the same step first), and the same model without
# the variant passes every property with tiercheck's count.
EVICTS_VARIANTS = ["lru-evicts-locked-parent", "load-back-evicts-chain-unlocked"]


@pytest.mark.parametrize("name", EVICTS_VARIANTS)
def test_tlc_catches_the_scheduler_eviction_variants(tmp_path, name):
    rec = SPEC_VARIANTS[name]
    mf = model_file.load(rec.model)
    found = Checker(Model(mf.config), [rec.expect]).run().violations[rec.expect]
    res = _tlc(tmp_path / "variant", rec.model, [rec.expect])
    assert not res.ok and res.violated == [rec.expect]
    assert res.trace_states == len(found[0].states)  # both count the initial state
    fixed = replace(mf, config=replace(mf.config, variants=frozenset()))
    inv, act, _rest = tla_export.split_properties(fixed.properties)
    want = Checker(Model(fixed.config), inv + act).run()
    assert want.complete and not want.violations
    tla_export.export(fixed, tmp_path / "fixed", inv + act)
    clean = run_tlc(tmp_path / "fixed", workers=1, timeout=900)
    assert clean.ok, clean.output[-3000:]
    assert clean.distinct == want.distinct


def test_release_safety_exempts_what_the_eviction_held(tmp_path):
    # evicts-reclaim-held-1r: an insert's eviction reclaims the host copy of the node it
    # holds locked. The twin passes with tiercheck's count (the default run checks the
    # count in the feature test); a copy whose exemption is FALSE reports release_safety.
    name = str(LOCAL_MODELS / "evicts-reclaim-held-1r.toml")
    tla_export.export(model_file.load(name), tmp_path, ["release_safety"])
    text = (tmp_path / "HiCache.tla").read_text()
    start, end = text.index("HeldWhileEvicting(r, e) =="), text.index("ReleaseOk(r, rs, rt, e) ==")
    (tmp_path / "HiCache.tla").write_text(text[:start] + "HeldWhileEvicting(r, e) == FALSE\n\n" + text[end:])
    res = run_tlc(tmp_path, workers=1, timeout=900)
    assert res.violated == ["release_safety"], res.output[-3000:]


# Option cases whose state sets the option changes where the case of
# tests/models/test_spec_options.py changes transitions only (wb_drop_unbacked: 200 states
# on, 158 off); evict_host_shortfall has none here (docs/tla.md).
EXTRA_OPTION_CASES = [
    ("wb_drop_unbacked", "sglang/wb-1r", {"requests": ((1,), (2,)), "device_pages": 2, "host_pages": 1,
                                          "storage": True, "duplicate_reclaim": True}),
]
DEFAULT_OPTIONS = {"backup_chain", "backup_path_lock", "settled_duplicates"}  # the rest: -m slow


def _option_cases():
    """The cases of tests/models/test_spec_options.py (per option of another HiCache
    version, a model where switching only that option changes the transition relation),
    and EXTRA_OPTION_CASES."""
    spec = importlib.util.spec_from_file_location(
        "spec_option_cases", Path(__file__).parents[1] / "models" / "test_spec_options.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cases = [(o, b, c, o) for o, b, c in mod.CASES]
    cases += [(o, b, c, f"{o}-more") for o, b, c in EXTRA_OPTION_CASES]
    return [pytest.param(o, b, c, id=i, marks=() if o in DEFAULT_OPTIONS else pytest.mark.slow)
            for o, b, c, i in cases]


def _tlc_on_the_spec_states(tmp_path, mf, edit_cfg=lambda text: text):
    """TLC with no properties but InSpecReach (the state is one the spec reaches): with
    equal counts, TLC's distinct states are the spec's reachable states, one for one.
    Returns TLC's result and the spec's count."""
    m = Model(mf.config)
    states = bfs_states(m)
    tla_export.export(mf, tmp_path, [])
    mc, cfg = tmp_path / "MC.tla", tmp_path / "MC.cfg"
    mc.write_text(tla_states.reach_module(mc.read_text(), m, states))
    cfg.write_text(edit_cfg(cfg.read_text()) + "\nINVARIANT\n    InSpecReach\n")
    return run_tlc(tmp_path, workers=1, timeout=900), len(states)


@pytest.mark.parametrize("option, base, change", _option_cases())
def test_tlc_reaches_the_spec_states_with_each_option(tmp_path, option, base, change):
    # State sets, not only counts: on several of these cases the option changes which
    # states are reached but not how many (e.g. backup_path_lock: lock counts).
    mf = model_file.load(base)
    mf = replace(mf, config=replace(mf.config, **change))
    assert getattr(mf.config, option)
    res, want = _tlc_on_the_spec_states(tmp_path, mf)
    assert res.ok, res.output[-3000:]
    assert res.distinct == want


EVICTS_MODELS = ["request-locks-evicts-1r", "wb-evicts-2r", "evicts-lanes-1r", "evicts-reclaim-held-1r",
                 "variants/lru-evicts-locked-parent", "variants/load-back-evicts-chain-unlocked"]


@pytest.mark.parametrize("name", ["wt-evicts-1r"] + [pytest.param(n, marks=pytest.mark.slow) for n in EVICTS_MODELS])
def test_tlc_reaches_the_spec_states_with_the_scheduler_eviction(tmp_path, name):
    local = LOCAL_MODELS / f"{name}.toml"
    res, want = _tlc_on_the_spec_states(tmp_path, model_file.load(str(local) if local.is_file() else name))
    assert res.ok, res.output[-3000:]
    assert res.distinct == want


def test_state_sets_tell_an_option_the_twin_ignored(tmp_path):
    # The check above fails on a twin run without backup_path_lock on sglang/wt-1r, where
    # the count is the same with the option on and off (99).
    res, _want = _tlc_on_the_spec_states(tmp_path, model_file.load("sglang/wt-1r"),
                                         lambda text: text.replace("BackupPathLock = TRUE", "BackupPathLock = FALSE"))
    assert res.violated == ["InSpecReach"]


# SGLang 0.5.23's configuration (every option on, models/library/sglang/).
SGLANG = ["sglang/wb-1r"]
SGLANG_SLOW = ["sglang/wt-1r", "sglang/wt-2r", "sglang/wts-1r", "sglang/wt-alloc-2r", "sglang/wt-storage-starvation-1r",
               "sglang/wb-2r", "sglang/wt-storage-1r", "sglang/wb-storage-1r", "sglang/wt-storage-mla-2r",
               "sglang/wt-prefetch-1r", "sglang/wt-prefetch-2r"]


@pytest.mark.parametrize("name", SGLANG + [pytest.param(n, marks=pytest.mark.slow) for n in SGLANG_SLOW])
def test_tlc_equals_tiercheck_on_sglang_models(tmp_path, name):
    want, props = tiercheck_distinct(name)
    res = _tlc(tmp_path, name, props)
    assert res.ok, res.output[-3000:]
    assert res.distinct == want


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


# Every variant the TLA+ twin has (its record says ``twin``), the finding, seed 004 as
# shipped (all its behaviours at once) and SGLang 0.5.23 without host admission agreement.
VARIANTS = [v.model for v in SPEC_VARIANTS.values() if v.twin] + [
    "findings/mirror-pinned-after-failed-backup", "seed004/wt-alloc-2r", "seed004/wt-orphan-1r",
    "seed004/wt-split-1r", "seed004/wt-storage-1r", "sglang/wt-alloc-leak-2r"]


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_tlc_explores_bug_variants_like_the_spec(tmp_path, name):
    """No properties: both explore everything, CONSTRAINT-bounded states included."""
    res = _tlc(tmp_path, name, [])
    assert res.distinct == bfs_distinct(name)
