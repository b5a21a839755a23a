"""Seed 004's CP load-back planner in the bounded encoding (proofs/encode/cp_planner.py):
the correct planner's obligations are proved, planner-local-tiebreak fails
planner_determinism with a CTI the explicit spec replays, and the planner is out of the
page-sorted audit (load_back stays bounded there)."""

from tiercheck.proofs.obligations import prove_action

# The planner plans load_back's victims itself (load_back_evicts does not apply under it);
# the half of load_back with that option on is tests/proofs/test_proofs_scheduler_evicts.py's.
PLAIN = {"load_back_evicts": False}


def test_planner_obligations_proved_at_three_pages():
    """Every obligation of load_back (which runs the planner) and local_access (its
    touches) at 3 pages: the smallest universe with an admitted ancestor."""
    for action in ("load_back", "local_access"):
        results = prove_action(action, k=3, fix=PLAIN if action == "load_back" else None)
        assert {r.target for r in results} >= {"planner_determinism", "locked_never_evicted", "rank_agreement"}
        assert all(r.status == "proved" for r in results), [r for r in results if r.status != "proved"]


def test_planner_local_tiebreak_fails_planner_determinism_with_a_cti_the_spec_replays():
    r = prove_action("load_back", ["planner_determinism"], variants=frozenset({"planner-local-tiebreak"}), k=3,
                     fix=PLAIN)[0]
    assert r.status == "failed"
    cfg = r.cti["config"]
    assert cfg["cp_planner"] and cfg["ranks"] >= 2
    ex = r.cti["explicit"]
    assert ex["successor"] == "same" and "different victims" in ex["property"]


def test_planner_local_tiebreak_needs_three_pages():
    """Two pages hold one candidate and the node loaded: no tie, nothing to decide."""
    r = prove_action("load_back", ["planner_determinism"], variants=frozenset({"planner-local-tiebreak"}), k=2,
                     fix=PLAIN)[0]
    assert r.status == "proved"
