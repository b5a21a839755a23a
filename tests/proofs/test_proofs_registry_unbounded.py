"""The registry scalars across the steps that write them, for any number of pages
(proofs.epr_registry): every explicit step of those actions that changes a registry or
a victim list is a behaviour of the page-sorted encoding (the scalars compared by
proofs.epr_agreement.same_view), a successor whose list lost its shape is not, and
registry is proved for any number of pages under each of them."""

import pytest

from tiercheck.proofs.epr_agreement import admits, invariant_values
from tiercheck.proofs.epr_obligations import covered, prove_action
from tiercheck.proofs.epr_registry import ACTIONS

from .proof_helpers import model, reachable


def _registry_steps(name, limit, per_action=2):
    """(m, s, a, t): explicit steps of ``ACTIONS`` that change some rank's registry or
    victim list, up to ``per_action`` each, breadth-first."""
    m = model(name)
    done = {}
    for s in reachable(m, limit):
        for a, t in m.successors(s):
            if a.name not in ACTIONS or done.get(a.name, 0) >= per_action:
                continue
            if all((x.dups, x.digest) == (y.dups, y.digest) for x, y in zip(s.ranks, t.ranks)):
                continue
            done[a.name] = done.get(a.name, 0) + 1
            yield m, s, a, t


@pytest.mark.parametrize("name,limit,want", [
    # the victim list tracked: evict's reclaims append to it, the rounds clear it
    ("wb-reclaim-2r", 1500, {"insert", "evict", "writing_check", "loading_check"}),
    pytest.param("wb-reclaim-prefetch-1r", 3000, {"prefetch_from_storage"}, marks=pytest.mark.slow),
])
def test_registry_writers_admit_every_explicit_step(name, limit, want):
    seen = set()
    for m, s, a, t in _registry_steps(name, limit):
        for r in range(m.cfg.ranks):
            assert admits(m, s, a, t, r), (name, a, r)
            assert invariant_values(m, t, r, ("registry",)) == {"registry": True}
        seen.add(a.name)
    assert want <= seen, seen


def test_a_victim_listed_twice_is_not_a_behaviour():
    """A successor whose victim list (or registry) names a node twice is not admitted:
    the encoding keeps the lists' shape."""
    m = model("wb-reclaim-2r")
    for s in reachable(m, 1500):
        for a, t in m.successors(s):
            rt = t.ranks[0]
            if a.name != "evict" or not rt.digest or not rt.dups:
                continue
            assert admits(m, s, a, t, 0)
            bad = t._replace(ranks=(rt._replace(digest=rt.digest + rt.digest[:1]),) + t.ranks[1:])
            assert not admits(m, s, a, bad, 0)
            assert invariant_values(m, bad, 0, ("registry",)) == {"registry": False}
            twice = t._replace(ranks=(rt._replace(dups=rt.dups + rt.dups[:1]),) + t.ranks[1:])
            assert not admits(m, s, a, twice, 0)
            return
    pytest.fail("no evict appending to a victim list with a registry left")


def test_registry_proved_for_any_pages_under_every_writer():
    for action in ACTIONS:
        assert covered("registry", action)
        (r,) = prove_action(action, targets=["registry"])
        assert (r.status, r.pages) == ("proved", "any"), r


@pytest.mark.slow  # the finite-model search: about 10 CPU-s
def test_registry_fails_under_evict_without_the_round_guard(monkeypatch):
    """The replicated steps' guard (no round due while the victim list is tracked) is
    what keeps the list distinct: without it, evict may append a victim already listed,
    and registry fails with a finite counterexample."""
    from tiercheck.proofs import epr_registry

    monkeypatch.setattr(epr_registry, "guard", lambda u, pre: [])
    (r,) = prove_action("evict", targets=["registry"])
    assert r.status == "failed" and r.cti is not None and r.cti["pre"]["ranks"], r
