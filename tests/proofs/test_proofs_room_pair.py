"""rank_agreement under insert and load_back with their own eviction (make_room) over two
ranks' views (proofs/epr_room_pair.py): where the ranks reclaim the same sequence of
duplicates, make_room's outcome is one choice for both.

On the spec: ranks whose registries differ end an evicting step with the same replica
whenever they reclaimed the same sequence (the registry enters only through it), and
some registries make the sequences differ (the case the next round's digest check
excuses). Every explicit evicting step from agreeing replicas whose sequences agree is
a behaviour of the pair encoding with the option on. Both obligations are proved with
the option on (insert's through the view after the eviction, proofs/epr_insert_room.py),
and (-m slow) insert's fails with the outcome per rank."""

import dataclasses

import pytest

from tiercheck.proofs import epr_rank_agreement as ra
from tiercheck.proofs import epr_room_pair as rp
from tiercheck.proofs.epr_rank_concrete import pair_admits
from tiercheck.proofs.epr_sched_evict import UNDECIDED_ON, spec_short
from tiercheck.spec.model import Model
from tiercheck.spec.properties import replica

from .proof_helpers import model, reachable

EVICTING = ("insert", "load_back")


def _reclaim_2r():
    """wb-reclaim-evicts-1r on two ranks: make_room stages write_back victims, and their
    host allocations reclaim registered duplicates."""
    m = model("wb-reclaim-evicts-1r")
    return Model(dataclasses.replace(m.cfg, ranks=2))


def _evicting(m, limit, want, reclaims=False):
    """(state, step) from agreeing replicas where some rank lacks room (make_room runs);
    ``reclaims``: only steps that reclaim some duplicate."""
    out = []
    for s in reachable(m, limit):
        if replica(s.ranks[0]) != replica(s.ranks[1]) or s.halted or s.hung:
            continue
        out += [(s, a) for a in m.actions(s) if a.name in EVICTING and spec_short(m, s, a)
                and (not reclaims or m.next_state(s, a).ranks[0].digest != s.ranks[0].digest)]
        if len(out) >= want:
            break
    return out


def _with_registry(s, dups):
    return s._replace(ranks=(s.ranks[0], s.ranks[1]._replace(dups=dups)))


def _skewed(m, limit=2000, want=12):
    """Evicting steps that reclaim, with rank 1's registry replaced by one another state
    held: (state, step, successor)."""
    states = reachable(m, limit)
    registries = sorted({rs.dups for s in states for rs in s.ranks})
    return [(s2, a, m.next_state(s2, a)) for s, a in _evicting(m, limit, want, reclaims=True)
            for s2 in (_with_registry(s, d) for d in registries) if a in m.actions(s2)]


def test_make_room_reads_the_registry_only_through_the_reclaim_sequence():
    m = _reclaim_2r()
    same = differ = 0
    for s, _a, t in _skewed(m):
        if t.ranks[0].digest == t.ranks[1].digest:
            assert replica(t.ranks[0]) == replica(t.ranks[1]), (s, _a)
            same += s.ranks[0].dups != s.ranks[1].dups
        else:
            differ += 1
    assert same and differ


@pytest.mark.parametrize("name", ["wb-evicts-2r", "reclaim-2r"])
def test_evicting_steps_with_equal_sequences_are_behaviours(name):
    m = _reclaim_2r() if name == "reclaim-2r" else model(name)
    steps = [(s, a, m.next_state(s, a)) for s, a in _evicting(m, 3000, 400)]
    steps = [(s, a, t) for s, a, t in steps if t.ranks[0].digest == t.ranks[1].digest]
    for name in EVICTING:  # the first two of each
        some = [(s, a, t) for s, a, t in steps if a.name == name][:2]
        assert some, name
        for s, a, t in some:
            assert pair_admits(m, s, a, t, 1), (a, s)


def test_proved_with_the_option_on(monkeypatch):
    """load_back's and insert's parts with the option on are proved for any pages
    (insert's in two parts, proofs/epr_insert_room.py: decided at once, z3's effort on it
    varied with the symbols' names, 1 to 40 s)."""
    r = ra.prove("load_back", fix={"cp": False, "load_back_evicts": True})
    assert (r.status, r.pages) == ("proved", "any"), r
    assert "rank_agreement" not in UNDECIDED_ON["insert"] and "load_back" not in UNDECIDED_ON
    calls, setup = [], ra.setup
    monkeypatch.setattr(ra, "setup", lambda action, variants, fix: calls.append(fix) or setup(action, variants, fix))
    r = ra.prove("insert")
    assert (r.status, r.pages) == ("proved", "any") and calls == [{"insert_evicts": False}, {"insert_evicts": True}]


@pytest.mark.slow
def test_with_the_outcome_per_rank_insert_fails(monkeypatch):
    """About 8 CPU-s: make_room's outcome per rank (nothing ties the two ranks' victims and
    fit), the obligation fails with a two-rank counterexample."""
    monkeypatch.setattr(ra, "SHARED", tuple(n for n in ra.SHARED if n not in rp.SHARED))
    r = ra.prove("insert", fix={"insert_evicts": True})
    assert r.status == "failed" and len(r.cti["post"]["ranks"]) == 2, r
    assert r.cti["config"]["insert_evicts"]
