"""The write-rejection counters against the spec (tiercheck.conformance.rejections): on the
shortest trace to a step that rejects, in each stage, the reference counts what the spec's
step rejects, and a rank that forgets to count is caught; on diverged replicas (a bug on
both sides) the rank-disagreement rejections agree with the spec's too."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

from tiercheck.conformance import rejections
from tiercheck.conformance import situations as st
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.runner import replay
from tiercheck.impl.hicache.metrics import rejected
from tiercheck.impl.hicache.write_path import WritePath
from tiercheck.models import model_file
from tiercheck.spec.action import act
from tiercheck.spec.model import Model

ROOT = Path(__file__).resolve().parents[2]

CASES = [  # (model, overrides, reason, stage)
    ("wt-1r", {"host_pages": 1, "requests": ((1, 2), (3,))}, "host_alloc_failed", "write_through"),
    ("wt-alloc-2r", {}, "host_alloc_failed", "write_through"),  # the alloc_asymmetry fault
    ("wb-2r", {"host_pages": 1, "requests": ((1, 2), (3,))}, "host_alloc_failed", "write_back"),
    ("wt-prefetch-1r", {}, "host_alloc_failed", "storage_prefetch"),
]


def _trace(model, overrides, key):
    cfg = replace(model_file.load(model).config, **overrides)
    m = Model(cfg)
    path = st.first_path(m, lambda s, a, t: rejections.rejections(m, s, a)[0][key] > 0)
    assert path is not None
    return cfg, path


def _replay(cfg, path):
    driver = driver_factory("reference", cfg)()
    try:
        return replay(driver, path).mismatch
    finally:
        driver.close()


@pytest.mark.parametrize("model,overrides,reason,stage", CASES, ids=lambda c: c if isinstance(c, str) else None)
def test_the_reference_counts_what_the_spec_rejects_and_a_rank_that_does_not_is_caught(
        model, overrides, reason, stage, monkeypatch):
    key = rejected(reason, stage)
    cfg, path = _trace(model, overrides, key)
    assert _replay(cfg, path) is None
    monkeypatch.setattr(WritePath, "_reject", lambda self, pages, reason, stage: None)
    mm = _replay(cfg, path)
    assert mm is not None and f"counter {key} went up by 0 in {path[-1]}" in mm.message


def test_a_rejection_in_a_stage_the_spec_does_not_reject_is_caught(monkeypatch):
    reject = WritePath._reject
    monkeypatch.setattr(WritePath, "_reject", lambda self, pages, reason, stage: reject(self, pages, reason, "write_back"))
    cfg, path = _trace("wt-1r", {"host_pages": 1, "requests": ((1, 2), (3,))}, rejected("host_alloc_failed", "write_through"))
    mm = _replay(cfg, path)
    assert mm is not None and 'stage="write_back"} went up by 2' in mm.message


def test_a_step_the_spec_disables_rejects_nothing_and_own_evictions_leave_write_back_unchecked():
    cfg = replace(model_file.load("wt-1r").config, device_pages=2, host_pages=1, requests=((1,), (2, 3)))
    m = Model(cfg)
    s = m.next_state(m.init_states()[0], act("insert", req=0))
    full = act("insert", req=1)  # no device room: disabled (its staging would find no host room either)
    assert s.ranks[0].host_free == 0
    assert m.next_state(s, full) is None
    assert not any(rejections.rejections(m, s, full))
    assert not rejections.unchecked(m, full)
    evicts = Model(model_file.load("wb-evicts-2r").config)  # write_back, insert_evicts
    assert rejections.unchecked(evicts, full) == {rejected("host_alloc_failed", "write_back")}


def test_diverged_replicas_reject_what_the_spec_with_the_bug_rejects(monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_mutation_suite", ROOT / "benchmarks" / "mutation_suite.py")
    ms = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ms)
    sit = next(s for s in st.TWIN_SITUATIONS if s.name == "an insert the diverged replicas stage different nodes for")
    cfg, actions, _probes = st.trace(sit)
    m = Model(cfg)
    s, disagreed = m.init_states()[0], 0
    for a in actions:
        disagreed += sum(c[rejected("rank_disagreement", "write_through")] for c in rejections.rejections(m, s, a))
        s = m.next_state(s, a)
    assert disagreed > 0
    assert ms._twin_departs(cfg, actions, next(iter(cfg.variants))) == ""
    monkeypatch.setattr(WritePath, "_reject", lambda self, pages, reason, stage: None)
    assert "rank_disagreement" in ms._twin_departs(cfg, actions, next(iter(cfg.variants)))
