"""Symmetry reduction: sound where it is offered, refused where the spec is not symmetric."""

from __future__ import annotations

import pytest
from checker_helpers import explore, reachable, shipped

from tiercheck.models import model_file, symmetry
from tiercheck.models.codec import Codec
from tiercheck.spec.config import Config, build_pages
from tiercheck.spec.model import Model

SYM4 = "wt-mirror-sym4-2r"


def _images(sym, s):
    """Every image of ``s`` under the group (rank permutations included)."""
    from itertools import permutations

    out = set()
    for perm, rq in sym.maps:
        ranks = [symmetry.relabel_rank(rs, perm, rq) for rs in s.ranks]
        stores = [symmetry._bits(x, perm) for x in s.store]
        pairs = list(zip(ranks, stores))
        orders = permutations(pairs) if sym.ranks else [pairs]
        for order in orders:
            out.add(type(s)(tuple(p[0] for p in order), tuple(p[1] for p in order), s.hung, s.halted))
    return out


def _commutes(m, sym, states):
    """succ(g(s)) == g(succ(s)) up to orbits, for every group element g and state s,
    and the safety verdicts agree on s and g(s)."""
    from tiercheck.spec.properties import PROPERTIES

    codec = Codec(m)
    canon = lambda t: codec.encode(sym.canonical(t))  # noqa: E731
    invariants = [p for p in PROPERTIES if p.kind == "invariant"]
    for s in states:
        base = {canon(t) for _a, t in m.successors(s)} if m.constraint(s) else set()
        verdict = [bool(p.fn(m, s)) for p in invariants]
        assert canon(s) == canon(sym.canonical(s))
        for g in _images(sym, s):
            assert canon(g) == canon(s), "images of one state have different representatives"
            succ = {canon(t) for _a, t in m.successors(g)} if m.constraint(g) else set()
            assert succ == base, "the relabeling does not commute with the spec"
            assert [bool(p.fn(m, g)) for p in invariants] == verdict


def test_prefix_automorphisms_of_small_forests():
    assert len(symmetry.prefix_automorphisms(build_pages(((1,), (2,), (3,), (4,))))) == 24
    assert len(symmetry.prefix_automorphisms(build_pages(((1, 2), (1, 3))))) == 2
    assert len(symmetry.prefix_automorphisms(build_pages(((1,), (1, 2), (1, 2, 3))))) == 1
    # Two two-level subtrees, each with two leaves: 2 * 2 * 2 relabelings.
    assert len(symmetry.prefix_automorphisms(build_pages(((1, 2), (1, 3), (4, 5), (4, 6))))) == 8


def test_the_symmetric_model_reduces_more_than_tenfold_and_represents_every_state():
    m = shipped(SYM4)
    sym, why = symmetry.for_model(m)
    assert sym is not None and len(sym.maps) == 24 and sym.ranks, why
    _c, red = explore(m, ["no_ghost", "slot_conservation", "release_safety"], symmetry=True)
    assert red.complete and red.symmetry["factor"] >= 10, red.symmetry
    assert set(red.verdicts.values()) == {"holds"}


@pytest.mark.slow
def test_the_symmetric_model_represents_exactly_the_unreduced_state_space():
    m = shipped(SYM4)
    props = model_file.load(SYM4).properties
    _c, red = explore(m, props, symmetry=True)
    _c, full = explore(m, props)
    assert red.symmetry["represented"] == full.distinct
    assert full.distinct / red.distinct >= 10
    for p, v in red.verdicts.items():
        assert v == full.verdicts[p] or v == "not checked (symmetry)"


@pytest.mark.parametrize("name", [SYM4, "wt-2r", "wb-reclaim-2r", "wt-prefetch-2r", "wt-alloc-2r"])
def test_every_offered_relabeling_commutes_with_the_spec(name):
    m = shipped(name)
    sym, why = symmetry.for_model(m)
    assert sym is not None, why
    # 50 states spread over the first 150 in breadth-first order (shallow and deeper).
    _commutes(m, sym, reachable(m, 150)[::3])


def test_rank_symmetry_is_refused_for_a_single_writer():
    sym, why = symmetry.for_model(shipped("wt-mirror-mla-2r"))
    assert sym is None and "single_writer" in why


def test_prefix_relabelings_are_refused_when_page_order_can_decide():
    # Three one-page prefixes, two host pages, a store that loses keys: two demoted nodes
    # can sit in the host pool, one of them backed by the store and one not, and
    # evict_host takes the lower page first. Swapping the prefixes changes which one goes.
    cfg = Config(requests=((1,), (2,), (3,)), device_pages=2, host_pages=2, storage=True, faults=frozenset({"store_loss"}))
    m = Model(cfg)
    sym, why = symmetry.for_model(m)
    assert sym is None and "victim order" in why
    # And indeed it is not a symmetry there: some state's successors do not commute.
    bad = symmetry.Symmetry(m, False, symmetry.prefix_automorphisms(m.pages))
    states = reachable(m, 1400)  # the first such state is number 1256 in BFS order
    with pytest.raises(AssertionError, match="does not commute"):
        _commutes(m, bad, states[1200:])
    # With two ranks the rank swap is still offered, on its own.
    sym2, _why = symmetry.for_model(Model(Config(**{**cfg.__dict__, "ranks": 2})))
    assert sym2 is not None and sym2.ranks and len(sym2.maps) == 1 and "victim order" in sym2.note


def test_no_symmetry_at_all_is_reported_plainly():
    m = Model(Config(requests=((1,), (1, 2)), ranks=1))
    sym, why = symmetry.for_model(m)
    assert sym is None and why
    _c, res = explore(m, ["no_ghost"], symmetry=True)
    assert res.symmetry is None and any("symmetry off" in n for n in res.notes)


def test_symmetric_counterexamples_are_concrete_runs():
    # A variant model under rank symmetry: the trace is rebuilt by re-execution and is a
    # real run of the unreduced spec that ends in a violating state.
    from tiercheck.models import replay

    m = shipped("variants/early-return-collective")
    _c, res = explore(m, ["no_collective_hang"], symmetry=True)
    (v,) = res.violations["no_collective_hang"]
    assert replay.replay(m, v.actions) == v.states
    assert v.states[-1].hung


def test_rank_symmetry_is_refused_under_a_variant_whose_replicas_diverge():
    for name in ("variants/digest-unchecked", "variants/negated-pair-overflow", "variants/release-no-consensus"):
        sym, why = symmetry.for_model(shipped(name))
        assert sym is None and "diverge" in why, name


def test_holds_verdicts_are_withdrawn_when_replicas_diverge_under_rank_symmetry(monkeypatch):
    # Force the rank swap onto a model whose replicas diverge: the checker notices the
    # diverged states it explored and claims nothing, but keeps the real counterexample.
    m = shipped("variants/release-no-consensus")
    ident = [(tuple(range(m.pages.count)), tuple(range(len(m.pages.request_pages))))]
    monkeypatch.setattr(symmetry, "for_model", lambda m: (symmetry.Symmetry(m, True, ident), ""))
    from tiercheck.models.checker import UNSOUND_SYMMETRY

    _c, res = explore(m, ["rank_agreement", "no_ghost"], symmetry=True)
    assert res.verdicts == {"rank_agreement": "violated", "no_ghost": UNSOUND_SYMMETRY}
    assert any("replicas diverge" in n for n in res.notes)
