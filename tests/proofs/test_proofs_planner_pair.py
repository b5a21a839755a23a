"""planner_determinism for any number of pages, and rank_agreement under load_back and the
drain round over two ranks' views (proofs/epr_planner.py, proofs/epr_rank_agreement.py).

The CP planner's victims are one choice per rank, tied by the congruence "equal planner
inputs give equal plans": the spec's planner gives the same plan when every rank field
but those inputs comes from another state, and under planner-local-tiebreak the clock
alone changes it. The page-sorted property has the spec's value on load_back steps,
every explicit load_back and drain round from agreeing replicas is a behaviour of the
pair encoding, a divergent variant step is one only where its choice is per rank, the
obligations are proved, and the variants fail with two-rank counterexamples."""

import dataclasses

import pytest

from tiercheck.proofs import epr_planner as pl
from tiercheck.proofs import epr_rank_agreement as ra
from tiercheck.proofs.epr_obligations import covered
from tiercheck.proofs.epr_rank_concrete import pair_admits, pair_value, spec_same
from tiercheck.spec.cp_planner import lane_deficits, plan_victims
from tiercheck.spec.load_path import _chain_pages, nodes_to_load
from tiercheck.spec.model import Model
from tiercheck.spec.properties import BY_NAME as SPEC, replica
from tiercheck.spec.state import ABSENT, path_to_root

from .proof_helpers import model, reachable, walk

TIEBREAK = "variants/planner-local-tiebreak"
CP_MODELS = ["cp-planner-2r", "cp-planner-lanes-2r", TIEBREAK]


def _plan(m, rs, e):
    """The spec's plan for load_back(e) on one rank, as load_back computes it."""
    deficits = lane_deficits(m, rs, _chain_pages(m, rs, nodes_to_load(m, rs, e)))
    return plan_victims(m, rs, deficits, set(path_to_root(m.pages, rs, e))) if any(deficits) else ()


def _inputs_from(m, rs, donor):
    """``donor`` with the planner's inputs of ``rs`` (epr_planner: owner, node fields,
    the free device count, the order key: the replicated LRU order, and each rank's
    clock under the variant); every other field is the donor's."""
    keep = {"owner": rs.owner, "nodes": rs.nodes, "dev_free": rs.dev_free, "lru": rs.lru}
    if m.cfg.has(pl.TIEBREAK):
        keep["clock"] = rs.clock
    return donor._replace(**keep)


def _load_backs(m, limit, steps=30):
    """Distinct (state, load_back, successor) from seeded walks where the planner runs on
    some rank and the replicas agree."""
    seen, out = set(), []
    for seed in range(10):
        for s in walk(m, seed, steps):
            if s in seen or len({replica(rs) for rs in s.ranks}) > 1:
                continue
            seen.add(s)
            for a in m.actions(s):
                if a.name == "load_back" and any(_plan(m, rs, a["node"]) for rs in s.ranks):
                    out.append((s, a, m.next_state(s, a)))
            if len(out) >= limit:
                return out
    return out


@pytest.mark.parametrize("name", ["cp-planner-2r", "cp-planner-lanes-2r", "cp-planner-lru-1r", TIEBREAK])
def test_the_spec_planner_is_a_function_of_its_inputs(name):
    """Every other rank field taken from another reachable state (its durable marks,
    queues, registry, plan, slots, and the clock unless the variant keys on it): the
    same plan."""
    m = model(name)
    donors = [rs for s in walk(m, 99, 25) for rs in s.ranks]
    checked = 0
    for s, a, _t in _load_backs(m, 6):
        for rs in s.ranks:
            plan = _plan(m, rs, a["node"])
            for donor in donors[::5]:
                assert _plan(m, _inputs_from(m, rs, donor), a["node"]) == plan
                checked += 1
    assert checked


def test_under_the_variant_the_clock_alone_changes_the_plan():
    """planner-local-tiebreak: two ranks with the same replica and different clocks plan
    differently (the key is per rank, so the congruence does not apply)."""
    m = model(TIEBREAK)
    for s, a, _t in _load_backs(m, 40, steps=40):
        r0, r1 = s.ranks[0], s.ranks[1]
        if _plan(m, r0, a["node"]) != _plan(m, r1, a["node"]):
            assert replica(r0) == replica(r1) and r0.clock != r1.clock
            return
    pytest.fail("no load_back with plans that differ by the clock")


@pytest.mark.parametrize("name", CP_MODELS)
def test_holds_has_the_spec_value_and_every_load_back_is_admitted(name):
    m = model(name)
    steps = _load_backs(m, 5, steps=40)
    values = set()
    for s, a, t in steps:
        spec = SPEC["planner_determinism"].fn(m, s, a, t) is None
        assert pair_value(m, s, 1, lambda u, *v: pl.holds(u, a.name, *v), t) is spec, a
        values.add(spec)
        assert pair_admits(m, s, a, t, 1), (a, s)
    assert steps and (False in values) == m.cfg.has(pl.TIEBREAK)


def test_a_divergent_plan_needs_a_per_rank_key(monkeypatch):
    """The variant's load_back that breaks planner_determinism is a behaviour of the pair
    encoding with the variant (each rank's clock is its own key); with one key for both
    ranks, or without the variant, the congruence refuses it."""
    m = model(TIEBREAK)
    s, a, t = next((s, a, t) for s, a, t in _load_backs(m, 40, steps=40)
                   if SPEC["planner_determinism"].fn(m, s, a, t) is not None)
    assert pair_admits(m, s, a, t, 1)
    fixed = Model(dataclasses.replace(m.cfg, variants=frozenset()))
    assert not pair_admits(fixed, s, a, t, 1)
    shared = pl.order_keys(frozenset())
    monkeypatch.setattr(pl, "order_keys", lambda variants: shared)
    assert not pair_admits(m, s, a, t, 1)


def _drains(m, want, limit=3000):
    """Breadth-first: drain rounds from agreeing replicas that release some mirror."""
    from tiercheck.spec.state import HOST_RESIDENT

    out = []
    for s in reachable(m, limit):
        if not spec_same(m, s, 1):
            continue
        for a, t in m.successors(s):
            if a.name != "drain_storage_control_queues":
                continue
            if any(n is not None and n.host == HOST_RESIDENT and t.ranks[h].nodes[e] is not None
                   and t.ranks[h].nodes[e].host == ABSENT
                   for h, rs in enumerate(s.ranks) for e, n in enumerate(rs.nodes)):
                out.append((s, a, t))
                if len(out) >= want:
                    return out
    return out


def test_drain_rounds_are_admitted_and_the_divergent_release_needs_a_per_rank_choice(monkeypatch):
    """On the durable-evicted-while-planned model without the variant, drain rounds that
    release mirrors are behaviours of the pair encoding (the release a shared choice);
    with the variant, its divergent round is one with the release per rank and is not
    one with it shared."""
    v = model("variants/durable-evicted-while-planned")
    fixed = Model(dataclasses.replace(v.cfg, variants=frozenset()))
    steps = _drains(fixed, 2)
    assert steps
    for s, a, t in steps:
        assert spec_same(fixed, t, 1) and pair_admits(fixed, s, a, t, 1), s
    s, a, t = next((s, a, t) for s, a, t in _drains(v, 50) if not spec_same(v, t, 1))
    assert SPEC["rank_agreement"].fn(v, t) and pair_admits(v, s, a, t, 1)
    monkeypatch.setattr(ra, "PER_RANK_UNDER", {k: x for k, x in ra.PER_RANK_UNDER.items() if k != "released"})
    assert not pair_admits(v, s, a, t, 1)


# the drain round's collective outcomes (proofs.epr_drain drain_params): the digest
# comparison's halt, any rank closed, any rank holding a plan, the triples agreeing, the
# all-reduce passing; each rank's next plan is its own
COLLECTIVE = ("drain_halt", "drain_any_closed", "drain_any_plan", "drain_agree", "drain_passes")


def test_a_drain_round_with_one_rank_planned_is_admitted():
    """On wt-mirror-2r, drain rounds from agreeing replicas where one rank alone holds a
    plan (every rank counts the mismatch) are behaviours of the pair encoding, whose
    round outcomes are one choice for both ranks."""
    m = model("wt-mirror-2r")
    steps = [(s, a, t) for s in reachable(m, 400) if spec_same(m, s, 1) for a, t in m.successors(s)
             if a.name == "drain_storage_control_queues" and len({bool(rs.plan) for rs in s.ranks}) == 2]
    assert steps
    for s, a, t in steps[:2]:
        assert t.ranks[0].mismatch == t.ranks[1].mismatch == s.ranks[0].mismatch + 1
        assert pair_admits(m, s, a, t, 1), s
    ps = ra.setup("drain_storage_control_queues")
    assert not {d.name().split("!")[0] for d, _twin in ps.subs} & set(COLLECTIVE)
    assert set(COLLECTIVE) <= set(ra.SHARED)


@pytest.mark.slow
def test_a_drain_round_outcome_per_rank_fails(monkeypatch):
    """About 9 CPU-s: with "some rank holds a plan" chosen per rank, one rank counts a
    mismatch and fail-closes while the other does not, a two-rank CTI no round makes."""
    monkeypatch.setattr(ra, "SHARED", tuple(n for n in ra.SHARED if n != "drain_any_plan"))
    r = ra.prove("drain_storage_control_queues")
    assert r.status == "failed" and len(r.cti["post"]["ranks"]) == 2, r
    post = r.cti["post"]["ranks"]
    assert post[0]["closed"] != post[1]["closed"]


def test_covered_and_proved_for_any_number_of_pages():
    from tiercheck.proofs.obligations import ACTION_NAMES, targets_for

    actions = [a for a in ACTION_NAMES if pl.TARGET in targets_for(a)]
    assert len(actions) == 20 and all(covered(pl.TARGET, a) for a in actions)
    assert covered("rank_agreement", "load_back") and covered("rank_agreement", "drain_storage_control_queues")
    for a in actions:
        targets = (pl.TARGET, "rank_agreement") if a == pl.ACTION else (pl.TARGET,)
        rs = pl.prove(a, targets)
        assert [(r.target, r.status, r.pages) for r in rs] == [(t, "proved", "any") for t in targets], rs
    r = ra.prove("drain_storage_control_queues")
    assert (r.status, r.pages) == ("proved", "any"), r


def test_the_property_is_read_off_load_back_only():
    """Off load_back the property is the constant true (z3 confirms it without a step);
    with the planner on, a load_back whose ranks drop different copies breaks it."""
    assert all(pl.vacuous(a) for a in ("insert", "evict", "local_access"))
    assert not pl.vacuous(pl.ACTION, {"cp": True}) and pl.vacuous(pl.ACTION, {"cp": False})


def _two_rank_cti(r):
    assert r.status == "failed" and r.pages == "any" and len(r.cti["post"]["ranks"]) == 2, r
    pre, post = r.cti["pre"]["ranks"], r.cti["post"]["ranks"]
    assert pre[0]["nodes"] == pre[1]["nodes"] and post[0]["nodes"] != post[1]["nodes"]


@pytest.mark.slow
def test_planner_local_tiebreak_fails_with_two_rank_ctis():
    """About 16 CPU-s: the finite-model search for both obligations under load_back."""
    rs = pl.prove(pl.ACTION, (pl.TARGET, "rank_agreement"), frozenset({pl.TIEBREAK}))
    for r in rs:
        _two_rank_cti(r)
        assert r.cti["config"]["cp_planner"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["durable-evicted-while-planned", "release-no-consensus"])
def test_drain_variants_fail_with_two_rank_ctis(variant):
    """About 8 CPU-s each: one planned mirror released on one rank only."""
    _two_rank_cti(ra.prove("drain_storage_control_queues", frozenset({variant})))
