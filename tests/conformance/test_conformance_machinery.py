"""The conformance machinery on the spec itself: a spec mutant (a variant switched on in
the 'implementation' only) is always told apart from the spec, shrunk, written and
replayed; the spec agrees with itself; bad traces are one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kill_helpers import kill
from tiercheck.conformance import machine
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.driver import SpecDriver
from tiercheck.conformance.runner import replay
from tiercheck.conformance.tour import build_tour
from tiercheck.models import model_file
from tiercheck.models.trace import read_trace
from tiercheck.spec.model import Model
from tiercheck.spec.variants import VARIANTS


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_spec_mutant_is_killed_and_its_file_replays(name, tmp_path):
    cfg, stats = kill("spec", name, tmp_path, examples=300, shrink_budget=10)
    assert stats["steps_after_shrink"] <= stats["steps_before_shrink"]
    trace = read_trace(stats["file"])
    assert len(trace.actions) == stats["steps_after_shrink"]
    # The file replays: the mutant disagrees again, the spec agrees with itself.
    assert replay(SpecDriver(cfg, {name}), trace.actions).mismatch is not None
    assert replay(SpecDriver(cfg), trace.actions).mismatch is None


def test_the_spec_conforms_to_itself_on_a_two_rank_model():
    cfg = model_file.load("wt-mirror-mla-2r").config
    machine.run(driver_factory("spec", cfg), examples=30, steps=40, seed=7)


def test_tour_covers_every_transition_and_probes_guards():
    model = Model(model_file.load("wt-2r").config)
    tour = build_tour(model)
    assert tour.transitions_covered == tour.transitions_total
    assert tour.labels_covered == tour.labels_total
    assert "writing_check" in tour.probe_names
    for tr in tour.traces:
        assert replay(SpecDriver(model.cfg), list(tr.actions), expect_disabled=set(tr.probes)).mismatch is None
    # A mutant that only misbehaves on one rare interleaving is caught by some trace.
    caught = [replay(SpecDriver(model.cfg, {"early-return-collective"}), list(tr.actions),
                     expect_disabled=set(tr.probes)).mismatch for tr in tour.traces]
    assert any(caught)


def test_replay_rejects_a_corrupt_trace_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"#meta": {"source": "tiercheck-trace/1", "tiercheck": {"model": 3}}}))
    out = subprocess.run([sys.executable, "-m", "tiercheck", "replay", str(bad), "--impl", "spec"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "corrupt trace" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([sys.executable, "-m", "tiercheck", "conform", "--impl", "nope", "--model", "wt-1r"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "unknown implementation 'nope'" in out.stderr
