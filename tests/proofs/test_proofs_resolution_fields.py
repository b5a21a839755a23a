"""The proofs' encoding of the fields added for the seeds' resolution (issue 15):
victim_order = "lru", the bounded durable LRU (durable_capacity, refresh_rounds) and the
prefetch stop vote (prefetch_stop) in the bounded encoding; page_size (prefix_closed) in
both; slot identities (slot_ownership's device half) in the page-sorted one. On states
of the models that exercise them, the encodings agree with the explicit spec (steps in
both directions for the bounded one, every explicit step admitted for the page-sorted
one, the properties' values), and each field's safety variant fails an obligation with a
CTI."""

import pytest

from tiercheck.proofs.agreement import check_state
from tiercheck.proofs.obligations import prove_action
from tiercheck.spec.properties import BY_NAME as BY_NAME_SPEC
from tiercheck.spec.state import is_host_leaf, live_nodes

from .proof_helpers import model, reachable, walk


def _marks_at_capacity(m, s):
    """A drain round will mark a page while the durable LRU is full and a release is
    planned (where marking before the commit would differ)."""
    return any(rs.plan and rs.sdone and len(rs.dlru) >= m.cfg.durable_capacity and any(x.actual > 0 for x in rs.sdone)
               for rs in s.ranks)


def _churn_gate(m, s):
    """An insert may hit a released, fully durable node: the age gate decides whether it
    is staged again."""
    from tiercheck.spec.state import ABSENT, all_durable

    return any(rs.dlru and any(rs.nodes[e].host == ABSENT and all_durable(m.pages, rs, e) for e in live_nodes(rs))
               for rs in s.ranks)


def _without_variants(name):
    import dataclasses

    from tiercheck.spec.model import Model

    return Model(dataclasses.replace(model(name).cfg, variants=frozenset()))


def _host_leaves(m, s):
    return sum(is_host_leaf(m.pages, s.ranks[0], e) for e in live_nodes(s.ranks[0])) >= 2


def _votes_differ(m, s):
    return any(rs.pq for rs in s.ranks) and len({rs.pdone for rs in s.ranks}) > 1


def _spread(states, n):
    return states[:: max(1, len(states) // n)][:n]


# The durable LRU's two-rank variant model, without the variant (its states reach a full
# LRU with a planned release): the commit-before-marks order must agree.
DURABLE_2R = "variants/durable-evicted-while-planned"
CASES = {
    "wt-durable-lru-1r": lambda m: _spread([s for s in reachable(m) if _churn_gate(m, s)], 4),
    DURABLE_2R: lambda m: _spread([s for seed in range(40) for s in walk(m, seed, 60) if _marks_at_capacity(m, s)], 4),
    "lru-2r": lambda m: _spread([s for seed in range(8) for s in walk(m, seed, 40) if _host_leaves(m, s)], 4),
    "variants/lru-local-clock": lambda m: _spread(
        [s for seed in range(8) for s in walk(m, seed, 40) if _host_leaves(m, s)], 3),
    "wt-prefetch-wait-2r": lambda m: _spread([s for seed in range(8) for s in walk(m, seed, 40) if _votes_differ(m, s)], 3),
    "variants/prefetch-vote-skipped": lambda m: _spread(
        [s for seed in range(8) for s in walk(m, seed, 40) if _votes_differ(m, s)], 3),
    "request-locks-2r": lambda m: _spread([s for s in reachable(m) if s.ranks[0].running], 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_encoding_agrees_with_the_spec_where_the_field_matters(name):
    m = _without_variants(name) if name == DURABLE_2R else model(name)
    states = CASES[name](m)
    assert states, f"{name}: no state exercises the field"
    for s in states:
        assert check_state(m, s) == []


def test_prefetch_vote_skipped_fails_no_collective_hang_with_a_cti():
    r = next(r for r in prove_action("check_prefetch_progress", ["no_collective_hang"],
                                     variants=frozenset({"prefetch-vote-skipped"}), k=2))
    assert r.status == "failed" and r.cti["post"]["hung"] == "check_prefetch_progress"
    assert r.cti["config"]["prefetch_stop"] in ("wait_complete", "timeout")  # a vote that can say wait


def test_durable_evicted_while_planned_fails_rank_agreement_with_a_cti():
    r = next(r for r in prove_action("drain_storage_control_queues", ["rank_agreement"],
                                     variants=frozenset({"durable-evicted-while-planned"}), k=2))
    assert r.status == "failed" and r.cti["config"]["durable_capacity"] > 0
    assert r.cti["explicit"]["property"]  # the spec's rank_agreement fails on the post-state
    # and on the explicit spec's own successor: the CTI's pre-state carries the durable LRU
    # order the encoding chose (free there), so the spec evicts the same mark
    m, pre, a, _post = r.cti["_states"]
    assert any(rs.dlru for rs in pre.ranks)
    assert BY_NAME_SPEC["rank_agreement"].fn(m, m.next_state(pre, a))


@pytest.mark.slow
def test_lru_local_clock_cti_replays_in_the_spec():
    """Bounded, 3 pages: the CTI's pre-state carries the per-rank LRU keys its evict_host
    used (each rank's clock), so the explicit spec takes the same host victims and its own
    successor parts the replicas (without them it raised KeyError on the empty clock)."""
    r = next(r for r in prove_action("evict", ["rank_agreement"], variants=frozenset({"lru-local-clock"}), k=3))
    assert r.status == "failed" and r.cti["explicit"]["successor"] == "same"
    m, pre, a, _post = r.cti["_states"]
    assert all(rs.clock for rs in pre.ranks)
    assert BY_NAME_SPEC["rank_agreement"].fn(m, m.next_state(pre, a))


def test_the_fields_are_proved_where_their_variants_fail():
    """The same obligations, without the variants: proved for every configuration
    (durable_capacity, refresh_rounds and prefetch_stop symbolic)."""
    for action, target in (("check_prefetch_progress", "no_collective_hang"),
                           ("drain_storage_control_queues", "rank_agreement"),
                           ("drain_storage_control_queues", "release_safety")):
        assert [r.status for r in prove_action(action, [target], k=2)] == ["proved"], (action, target)


# --- page_size: prefix_closed and page-ceil-match ------------------------------------------

PAGED = "variants/page-ceil-match"  # pages of two tokens, siblings sharing a leading token


def test_prefix_closed_has_one_meaning_in_spec_bounded_and_unbounded_encodings():
    """On every reachable state of the paged model, with and without the variant (which
    detaches a node): spec/properties.py, the bounded encoding (proofs.snapshot) and the
    page-sorted one give prefix_closed the same value."""
    from tiercheck.proofs.epr_agreement import invariant_values
    from tiercheck.proofs.snapshot import z3_invariant_check
    from tiercheck.spec.properties import BY_NAME

    seen = set()
    for m in (model(PAGED), _without_variants(PAGED)):
        for s in reachable(m):
            spec = BY_NAME["prefix_closed"].fn(m, s) is None
            assert ("prefix_closed" not in z3_invariant_check(m, s)) == spec
            assert invariant_values(m, s, 0, ["prefix_closed"])["prefix_closed"] == spec
            seen.add(spec)
    assert seen == {True, False}


def test_unbounded_insert_admits_the_variants_steps():
    """Every explicit insert of the variant model, the detaching one included, is a
    behaviour of the page-sorted insert with the variant."""
    from tiercheck.proofs.epr_agreement import admits
    from tiercheck.spec.properties import BY_NAME

    m = model(PAGED)
    detached = 0
    for s in reachable(m):
        if BY_NAME["prefix_closed"].fn(m, s):
            continue  # a detached tree: outside the invariants the encoding assumes
        for a in m.actions(s):
            if a.name == "insert":
                t = m.next_state(s, a)
                assert admits(m, s, a, t, 0), a
                detached += bool(BY_NAME["prefix_closed"].fn(m, t)) and not BY_NAME["prefix_closed"].fn(m, s)
    assert detached


@pytest.mark.slow
def test_page_ceil_match_fails_prefix_closed_unbounded_with_a_cti():
    from tiercheck.proofs.epr_obligations import prove_action as prove_unbounded

    r = next(r for r in prove_unbounded("insert", ["prefix_closed"], frozenset({"page-ceil-match"})))
    assert r.status == "failed" and r.cti["config"]["page_size"] == 2
    assert [r.status for r in prove_unbounded("insert", ["prefix_closed"])] == ["proved"]


# --- slots: the device pool's slot_ownership and split-slice-off-by-one ---------------------

SLOTS = "slots-1r"
SLICED = "variants/split-slice-off-by-one"


def _device_owners_ok(m, s):
    """spec slot_ownership restricted to the device pool (the half the page-sorted
    encoding holds): a device violation message, or None."""
    why = BY_NAME_SPEC["slot_ownership"].fn(m, s)
    return None if why is None or "host" in why else why


@pytest.mark.parametrize("name", [SLOTS, SLICED])
def test_slot_ownership_device_half_has_the_spec_value(name):
    from tiercheck.proofs.epr_agreement import invariant_values

    m = model(name)
    seen = set()
    for s in _spread(reachable(m), 25):
        ok = _device_owners_ok(m, s) is None
        assert invariant_values(m, s, 0, ["slot_ownership"])["slot_ownership"] == ok, s
        seen.add(ok)
    assert True in seen and (name == SLOTS or False in seen)


@pytest.mark.parametrize("name", [SLOTS, SLICED])
def test_device_slot_steps_are_behaviours_of_the_page_sorted_encoding(name):
    """Up to three explicit steps per covered action (insert, evict, load_back,
    loading_check, the drain, ...) from states inside the invariants: each is admitted,
    the slots taken and given included."""
    from tiercheck.proofs.epr_agreement import admits
    from tiercheck.proofs.epr_obligations import COVERED_ACTIONS

    m = model(name)
    seen = {}
    for s in _spread(reachable(m), 60):
        if BY_NAME_SPEC["slot_ownership"].fn(m, s):
            continue
        for a in m.actions(s):
            if a.name in COVERED_ACTIONS and seen.get(a.name, 0) < 3:
                assert admits(m, s, a, m.next_state(s, a), 0), a
                seen[a.name] = seen.get(a.name, 0) + 1
    assert {"insert", "evict"} <= set(seen), seen


@pytest.mark.slow
def test_split_slice_off_by_one_fails_slot_ownership_unbounded_with_a_cti():
    from tiercheck.proofs.epr_obligations import prove_action as prove_unbounded

    r = prove_unbounded("insert", ["slot_ownership"], frozenset({"split-slice-off-by-one"}))[0]
    assert r.status == "failed"
    post = r.cti["slots"]["post"]["owner"]
    assert len(set(post.values())) < len(post)  # two pages own one slot
    assert [x.status for x in prove_unbounded("insert", ["slot_ownership"])] == ["proved"]


def test_prove_asks_for_unbounded_where_only_the_page_sorted_encoding_models_the_variant(capsys):
    from tiercheck.cli import main

    for name in ("page-ceil-match", "split-slice-off-by-one"):
        assert main(["prove", "--variant", name]) == 2
        assert "--unbounded" in capsys.readouterr().err


def test_the_audit_lists_the_page_sorted_only_obligations_when_unbounded():
    from tiercheck.proofs.audit import audit_targets

    assert "slot_ownership" not in audit_targets("insert", False)
    assert "slot_ownership" in audit_targets("insert", True)
    assert "prefix_closed" in audit_targets("insert", False)


# --- how a prefetch ends: prefetch_stop = "timeout", prefetch_read_fail, prefetch_revoke ----

ENDINGS = ("wt-prefetch-timeout-2r", "wt-prefetch-fail-1r", "wt-prefetch-revoke-1r",
           "variants/timeout-local-vote", "variants/revoke-frees-in-flight")


def _retiring(m, s):
    """A drain round is about to retire a revoke."""
    from tiercheck.spec.prefetch_end import revokes_ready

    return bool(revokes_ready(m, s))


def _voting(m, s):
    """The flags decide check_prefetch_progress: its vote (or the variant's skipped vote)
    differs from what it would be with every flag clear."""
    from tiercheck.spec.prefetch_end import skips_vote, terminate_vote

    clear = s._replace(ranks=tuple(rs._replace(pflags=(0,) * len(rs.pflags)) for rs in s.ranks))
    return any((terminate_vote(m, s, i), skips_vote(m, s, i)) != (terminate_vote(m, clear, i), skips_vote(m, clear, i))
               for i in range(len(s.ranks[0].pq)))


def _read_failed(m, s):
    """Some rank's read failed (terminated, not revoked): the vote's terminated half."""
    from tiercheck.spec.prefetch_end import REVOKED, TERMINATED

    return any(f & TERMINATED and not f & REVOKED for rs in s.ranks for f in rs.pflags)


@pytest.mark.parametrize("name", ENDINGS)
def test_prefetch_endings_encoding_agrees_with_the_spec(name):
    """Both directions of every action on states where a prefetch's flags matter: a
    drain about to retire a revoke, a vote the flags decide, a read that failed (the
    checks fail when the retirement frees nothing, the vote ignores a fired timer or
    drops its terminated half)."""
    m = model(name)
    reach = reachable(m)
    states = [x for pick in (_retiring, _voting, _read_failed) for x in _spread([s for s in reach if pick(m, s)], 2)]
    assert states, f"{name}: no state carries a prefetch flag"
    for s in states:
        assert check_state(m, s) == []


def test_prefetch_endings_invariants_have_the_spec_values():
    """no_use_after_free and slot_conservation (the pq entries' flags: a read in flight
    into freed slots, slots no longer held) on every reachable state of the revoke variant
    and the fail model: the bounded encoding agrees with spec/properties.py, both values
    of no_use_after_free seen."""
    from tiercheck.proofs.snapshot import z3_invariant_check

    seen = set()
    for name in ("variants/revoke-frees-in-flight", "wt-prefetch-fail-1r"):
        m = model(name)
        for s in reachable(m):
            failing = z3_invariant_check(m, s)
            for prop in ("no_use_after_free", "slot_conservation"):
                spec = BY_NAME_SPEC[prop].fn(m, s) is None
                assert (prop not in failing) == spec, (name, prop, s)
                seen.add((prop, spec))
    assert ("no_use_after_free", False) in seen and ("no_use_after_free", True) in seen


@pytest.mark.parametrize("variant,action,target", [
    ("timeout-local-vote", "check_prefetch_progress", "no_collective_hang"),
    ("revoke-frees-in-flight", "prefetch_revoke", "no_use_after_free"),
])
def test_prefetch_ending_variants_fail_with_a_cti_the_spec_replays(variant, action, target):
    r = next(r for r in prove_action(action, [target], variants=frozenset({variant}), k=2))
    assert r.status == "failed"
    assert r.cti["explicit"]["successor"] == "same" and r.cti["explicit"]["property"]
    cfg = r.cti["config"]
    assert cfg["prefetch_stop"] == "timeout" if variant == "timeout-local-vote" else cfg["prefetch_revoke"]
    assert [x.status for x in prove_action(action, [target], k=2)] == ["proved"]


# --- release_safety: the node the step itself protects ------------------------------------


def test_release_safety_ignores_the_held_anchor_in_spec_and_both_encodings():
    """wb-reclaim-prefetch-1r: a prefetch_from_storage whose reclaim demoted a device
    leaf while its own anchor, protected during the step, was a reclaimable non-leaf
    duplicate. spec release_safety holds there only because it ignores the held node
    (prefetch.held_during_step); the bounded and the page-sorted encodings give the same
    value, and every other prefetch step of the model agrees too."""
    from tiercheck.proofs.agreement import transition_value
    from tiercheck.proofs.epr_agreement import transition_values
    from tiercheck.spec.prefetch import held_during_step
    from tiercheck.spec.properties import _release_ok

    m = model("wb-reclaim-prefetch-1r")
    steps = [(s, a, m.next_state(s, a)) for s in reachable(m) for a in m.actions(s) if a.name == "prefetch_from_storage"]
    held = [x for x in steps if held_during_step(m, x[0], x[1]) >= 0
            and _release_ok(m, x[0].ranks[0], x[2].ranks[0], -1)]
    assert held, "no step where the held anchor matters"
    for s, a, t in held[:1] + _spread(steps, 2):
        spec = BY_NAME_SPEC["release_safety"].fn(m, s, a, t) is None
        assert transition_value(m, s, a, t, "release_safety") == spec, (a, s)
        assert transition_values(m, s, a, t, 0)["release_safety"] == spec, (a, s)


@pytest.mark.parametrize("name", ["wt-prefetch-revoke-1r", "wt-prefetch-fail-1r", "variants/revoke-frees-in-flight",
                                  "request-locks-1r"])
def test_strengthening_invariants_hold_on_reachable_states(name):
    """The strengthening invariants (prefetch_queue's flag clause, lock accounting with
    the running requests' locks, reference accounting) are true of reachable states: the
    proofs assume nothing the spec breaks."""
    from tiercheck.proofs.agreement import concrete_ctx, lift
    from tiercheck.proofs.formula import value
    from tiercheck.proofs.strengthen import STRENGTHENING

    m = model(name)
    for s in _spread(reachable(m), 30):
        ctx = concrete_ctx(m)
        terms = lift(ctx, m, s)
        bad = [n for n, inv in STRENGTHENING.items() if not value(ctx.space, inv.fn(ctx, terms))]
        assert not bad, (bad, s)


def test_request_lock_steps_are_behaviours_of_the_page_sorted_encoding():
    """Every explicit lock_request / unlock_request of request-locks-1r from a sample of
    states (the split where the device match ends included) is admitted by the
    page-sorted encoding, with the spec's transition property values."""
    from tiercheck.proofs.agreement import transition_value
    from tiercheck.proofs.epr_agreement import admits, transition_values

    m = model("request-locks-1r")
    seen = {}
    for s in _spread(reachable(m), 40):
        for a in m.actions(s):
            if a.name in ("lock_request", "unlock_request") and seen.get(a.name, 0) < 3:
                t = m.next_state(s, a)
                assert admits(m, s, a, t, 0), a
                for n, v in transition_values(m, s, a, t, 0).items():
                    # the consensus obligations have no spec predicate: the bounded encoding's value
                    want = BY_NAME_SPEC[n].fn(m, s, a, t) is None if n in BY_NAME_SPEC else \
                        transition_value(m, s, a, t, n)
                    assert v == want, (n, a)
                seen[a.name] = seen.get(a.name, 0) + 1
    assert set(seen) == {"lock_request", "unlock_request"}, seen
