"""slot_ownership's host half in the bounded encoding (proofs/host_slots.py,
proofs/encode/host_slots.py): on states of the slot models the encoding has the spec's
value (and notices a double free, a leak, two owners), its steps are exactly the spec's
(both directions, host slots included), the host-slot variants fail the obligation
with a counterexample the explicit spec replays, and the correct protocol proves it."""

import dataclasses

import pytest

from tiercheck.proofs import host_slots
from tiercheck.proofs.agreement import check_state
from tiercheck.spec.model import Model
from tiercheck.spec.prefetch_end import FREED
from tiercheck.spec.properties import BY_NAME as SPEC

from .proof_helpers import model, reachable, walk

SLOT_MODELS = ("slots-1r", "slots-prefetch-1r")


def _host_half(m, s):
    """spec slot_ownership restricted to the host pool: a host violation message, or None.
    The encoding also asks a reservation to hold a slot for each page it fetches (spec
    slot_ownership lists the slots it got; a short one, reachable only after a double
    free, is slot_conservation's there)."""
    why = SPEC["slot_ownership"].fn(m, s)
    if why is not None and ("host" in why or "prefetch" in why or "release" in why):
        return why
    for r, rs in enumerate(s.ranks):
        for i, got in enumerate(rs.pslots):
            freed = rs.pflags and rs.pflags[i] & FREED
            if not freed and len(got) < rs.pq[i][3]:
                return f"rank {r}: prefetch {i} holds {len(got)} slots for {rs.pq[i][3]} pages"
    return None


def _with(name, **kw):
    return Model(dataclasses.replace(model(name).cfg, **kw))


def _states(m, seeds=6, steps=30):
    out = []
    for seed in range(seeds):
        out += walk(m, seed, steps)
    return list(dict.fromkeys(out))


def _spread(states, n):
    return states[:: max(1, len(states) // n)][:n]


def _held_prefetch_or_release(s):
    return any(rs.pslots or rs.rslots for rs in s.ranks)


@pytest.mark.parametrize("name", SLOT_MODELS)
def test_host_slot_ownership_has_the_spec_value_on_reachable_states(name):
    m = model(name)
    states = _states(m)
    assert any(_held_prefetch_or_release(s) for s in states) or name == "slots-1r"
    for s in _spread(states, 30):
        assert host_slots.value(m, s) == (_host_half(m, s) is None), s


@pytest.mark.parametrize("name", ["variants/prefetch-double-free", "seed004/wt-orphan-1r"])
def test_host_slot_ownership_has_the_spec_value_where_a_variant_breaks_it(name):
    m = _with(name, slots=True)
    states = reachable(m, 4000)
    bad = [s for s in states if _host_half(m, s) is not None]
    assert bad, f"{name}: no reachable state breaks the host half"
    for s in _spread(bad, 10) + _spread([s for s in states if s not in bad], 20):
        assert host_slots.value(m, s) == (_host_half(m, s) is None), s


def test_host_slot_ownership_notices_a_double_free_a_leak_and_two_owners():
    m = model("slots-1r")
    s = next(s for s in _states(m) if any(x >= 0 for x in s.ranks[0].hslot))
    rs = s.ranks[0]
    p = next(p for p, x in enumerate(rs.hslot) if x >= 0)
    broken = {
        "double free": rs._replace(hfree=rs.hfree | 1 << rs.hslot[p]),
        "two owners": rs._replace(rslots=((rs.hslot[p],),), relq=(1,)),
    }
    init = m.init_states()[0]
    broken["leak"] = init.ranks[0]._replace(hfree=init.ranks[0].hfree & ~1)  # slot 0 neither free nor owned
    for why, bad in broken.items():
        t = (init if why == "leak" else s)._replace(ranks=(bad,))
        assert _host_half(m, t) is not None, why
        assert host_slots.value(m, t) is False, why


@pytest.mark.parametrize("name", SLOT_MODELS)
def test_host_slot_steps_are_exactly_the_spec_steps(name):
    """Both directions (proofs.agreement.check_state, host slots compared) on states
    where host slots are taken, held by a prefetch or queued for release."""
    m = model(name)
    states = [s for s in _states(m) if any(x >= 0 for rs in s.ranks for x in rs.hslot) or _held_prefetch_or_release(s)]
    assert states
    for s in _spread(states, 4):
        assert check_state(m, s) == []


def test_a_wrong_slot_choice_is_noticed_by_the_agreement(monkeypatch):
    """The highest free slot instead of the lowest: some explicit step is not admitted."""
    from tiercheck.proofs.encode import host_slots as enc

    def highest(A, j, cap):
        import z3

        out = z3.IntVal(-1)
        for x in range(cap):
            above = sum(z3.If(z3.Select(A, y), 1, 0) for y in range(x + 1, cap))
            out = z3.If(z3.And(z3.Select(A, x), above == j), x, out)
        return out

    m = model("slots-1r")
    states = [s for s in _states(m) if sum(1 for rs in s.ranks for x in rs.hslot if x >= 0) == 0
              and any(a.name == "insert" for a in m.actions(s))]
    assert states
    problems = []
    monkeypatch.setattr(enc, "_lowest", highest)
    for s in _spread(states, 6):
        problems += check_state(m, s)
        if problems:
            break
    assert problems


def test_a_step_that_frees_a_slot_twice_is_noticed_by_the_agreement():
    """prefetch-double-free with slots: the encoding's step is the spec's (the variant
    is in both), and the successor breaks the spec and the encoded property alike."""
    m = _with("variants/prefetch-double-free", slots=True)
    hit = 0
    for s in _states(m, seeds=10, steps=40):
        for a in m.actions(s):
            if a.name != "check_prefetch_progress" or host_slots.value(m, s) is False:
                continue
            t = m.next_state(s, a)
            if t == s or not any(rs.rslots for rs in t.ranks):
                continue
            assert check_state(m, s) == []
            assert _host_half(m, t) is not None and host_slots.value(m, t) is False
            hit += 1
            break
        if hit:
            break
    assert hit


@pytest.mark.parametrize("variant,action", [("prefetch-double-free", "check_prefetch_progress"),
                                            ("orphan-host-subtree", "evict")])
def test_host_slot_variants_fail_the_obligation_with_a_cti_the_spec_replays(variant, action):
    r = host_slots.prove(action, frozenset({variant}), 2)
    assert r.status == "failed" and r.cti is not None
    ex = r.cti["explicit"]
    assert ex["successor"] == "same", ex
    assert ex["property"], ex  # the spec's slot_ownership fails on the successor


@pytest.mark.parametrize("action", ["check_prefetch_progress", "evict", "prefetch_revoke"])
def test_the_correct_protocol_proves_the_host_half(action):
    assert host_slots.prove(action, frozenset(), 2).status == "proved"


def test_frame_actions_write_nothing_the_host_half_reads():
    from tiercheck.proofs.obligations import ACTION_NAMES

    framed = set(ACTION_NAMES) - set(host_slots.actions(ACTION_NAMES))
    assert {"write_dma_done", "load_dma_done", "prefetch_io", "store_lose", "local_access"} <= framed
    assert not framed & {"insert", "evict", "check_prefetch_progress", "prefetch_revoke",
                         "drain_storage_control_queues", "prefetch_from_storage"}


def test_the_audit_runs_the_host_half_only_when_asked():
    from tiercheck.proofs.audit import _jobs

    plain = _jobs(["evict", "load_dma_done"], (), 2, False)
    assert not any(host_slots.NAME in j[4] for j in plain)
    jobs = [j for j in _jobs(["evict", "load_dma_done"], (), 2, False, slots=True) if j[4] == (host_slots.NAME,)]
    assert sorted((j[0], j[1]) for j in jobs) == [("evict", "agree"), ("evict", "diverged"), ("load_dma_done", "agree")]
    assert all(dict(j[5]) == {"slots": True} for j in jobs)


def test_prove_command_with_slots(capsys):
    from tiercheck.cli import main

    rc = main(["prove", "--slots", "--action", "load_dma_done", "--workers", "1"])
    out = capsys.readouterr().out
    assert rc == 0, out
    row = next(line for line in out.splitlines() if line.startswith(host_slots.NAME))
    assert "load_dma_done" in row and "proved" in row
