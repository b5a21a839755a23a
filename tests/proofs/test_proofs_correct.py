"""The correct spec: coverage of the encoding, the cheap obligations at default speed,
all of them (and the command) under -m slow."""

import json

import pytest

from tiercheck.proofs import encode, properties
from tiercheck.proofs.audit import run_audit
from tiercheck.proofs.consensus import THEOREMS, run_theorem
from tiercheck.proofs.obligations import ACTION_NAMES, SPLIT_FLAGS, prove_action

# The one obligation not proved yet (docs/proofs.md, "Open"). Pinned so that a regression
# elsewhere, or its fix, shows up here.
KNOWN_OPEN: set = set()  # every obligation of the correct spec is proved

CHEAP = ["init", "write_dma_done", "load_back", "load_dma_done", "loading_check", "storage_backup_done",
         "prefetch_io", "store_lose", "registry_skew", "drain_storage_control_queues"]


def test_every_spec_action_and_property_is_encoded():
    from tiercheck.proofs.encode.actions import coverage_gaps

    assert coverage_gaps() == []
    assert properties.coverage_gaps() == []


@pytest.mark.parametrize("action", CHEAP)
def test_cheap_obligations_proved(action):
    # load_back with its own eviction (load_back_evicts) is not cheap:
    # tests/proofs/test_proofs_scheduler_evicts.py proves that half
    fix = {SPLIT_FLAGS[action]: False} if action in SPLIT_FLAGS else None
    bad = {(r.target, action) for r in prove_action(action, k=2, fix=fix) if r.status != "proved"}
    assert bad == {x for x in KNOWN_OPEN if x[1] == action}


@pytest.mark.parametrize("th", THEOREMS, ids=[t.name for t in THEOREMS])
def test_consensus_theorems(th):
    r = run_theorem(th)
    assert r.status == ("exhibited" if th.expect == "sat" else "proved"), r
    if th.name == "overflow_witness":
        assert "-9223372036854775808" in r.detail


@pytest.mark.slow
def test_whole_audit_of_correct_spec(tmp_path):
    from tiercheck.proofs.audit import write_reports

    audit = run_audit()
    write_reports(audit, tmp_path)
    data = json.loads((tmp_path / "proofs.json").read_text())
    assert len(data["obligations"]) == len(audit.obligations) > 400
    assert {(r.target, r.action) for r in audit.obligations if r.status != "proved"} == KNOWN_OPEN
    assert all(r.cti for r in audit.failed)


def test_prove_command_refuses_bad_input(capsys, monkeypatch):
    from tiercheck.cli import main
    from tiercheck.proofs import scope

    assert main(["prove", "--variant", "no-such-bug"]) == 2
    # Every variant is in scope today: the refusal is shown on one marked out of scope here.
    monkeypatch.setitem(scope.OUT_OF_SCOPE_VARIANTS, "release-busy", "its bug lives in code the encoding lacks")
    assert main(["prove", "--variant", "release-busy"]) == 2
    err = capsys.readouterr().err
    assert "no-such-bug" in err and "variant 'release-busy' is out of scope for the z3 encoding" in err
    assert err.count("\n") == 2


def test_prove_command_one_action(tmp_path, capsys):
    from tiercheck.cli import main

    rc = main(["prove", "--action", "load_dma_done", "--workers", "1", "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "load_dma_done" in out and "proved" in out and "obligations proved" in out
    assert (tmp_path / "proofs.md").read_text().startswith("# tiercheck prove")


def test_prove_command_takes_the_pages_a_variant_needs(capsys):
    # planner-local-tiebreak needs 3 pages (two tied device leaves and the node loaded):
    # proved clean at the default 2, so `--variant` alone must raise the bound, and an
    # explicit lower --pages must say that it cannot show the variant.
    from tiercheck.cli import main
    from tiercheck.spec.variants import VARIANTS

    assert VARIANTS["planner-local-tiebreak"].proof_pages == 3
    argv = ["prove", "--variant", "planner-local-tiebreak", "--action", "local_access", "--workers", "1"]
    main(argv)
    out = capsys.readouterr().out
    assert "note: pages 3: planner-local-tiebreak needs 3 pages to show" in out and "pages <= 3" in out
    main(argv + ["--pages", "2"])
    out = capsys.readouterr().out
    assert "note: --pages 2 cannot show planner-local-tiebreak (needs 3)" in out and "pages <= 2" in out
