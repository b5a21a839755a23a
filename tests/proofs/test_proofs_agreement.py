"""The explicit spec and the z3 transition formula agree (both directions) on random
reachable states; and the check notices when one side is deliberately changed."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiercheck.proofs.agreement import check_state
from tiercheck.spec import write_path

from .proof_helpers import model, walk

MODELS = ["wt-1r", "wt-2r", "wb-reclaim-2r", "wts-mirror-1r", "wt-prefetch-1r"]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(MODELS), seed=st.integers(0, 10_000), steps=st.integers(0, 12))
def test_encoding_agrees_with_explicit_spec(name, seed, steps):
    m = model(name)
    s = walk(m, seed, steps)[-1]
    assert check_state(m, s) == []


def test_agreement_fails_when_the_spec_effect_changes(monkeypatch):
    """Break one side on purpose: writing_check forgets to unlock. The encoding then
    admits no explicit successor of that step, and the check must say so."""
    m = model("wt-1r")
    states = walk(m, 3, 40)
    target = next(s for s in states if any(a.name == "writing_check" for a in m.actions(s)))
    assert check_state(m, target) == []
    real = write_path.writing_check

    def broken(mm, s, a):
        t = real(mm, s, a)
        ranks = tuple(rs._replace(host_free=rs.host_free + 1) for rs in t.ranks)
        return t._replace(ranks=ranks)

    import tiercheck.spec.model as spec_model

    specs = [sp._replace(effect=broken) if sp.name == "writing_check" else sp for sp in spec_model.ACTIONS]
    monkeypatch.setattr(spec_model, "ACTIONS", specs)
    monkeypatch.setattr(spec_model, "ACTION_SPECS", {sp.name: sp for sp in specs})
    problems = check_state(m, target)
    assert any("does not admit writing_check" in p for p in problems), problems
    assert any("writing_check" in p and "does not reach" in p for p in problems), problems


# --- seed 004's CP load-back planner (proofs/encode/cp_planner.py) ------------------------

PLANNER = ["cp-planner-2r", "cp-planner-ancestors-1r", "cp-planner-lanes-2r", "cp-planner-lru-1r",
           "variants/planner-local-tiebreak"]


def _planner_states(m, limit, seeds=range(8), steps=30):
    """Distinct reachable states (seeded walks) where some load_back evicts a device copy
    on some rank: the steps the planner decides."""
    from tiercheck.spec.state import ABSENT

    def evicts(s, a):
        t = m.next_state(s, a)
        return any(n is not None and n.dev != ABSENT and (rt.nodes[e] is None or rt.nodes[e].dev == ABSENT)
                   for rs, rt in zip(s.ranks, t.ranks) for e, n in enumerate(rs.nodes))

    seen, out = set(), []
    for seed in seeds:
        for s in walk(m, seed, steps):
            if s in seen:
                continue
            seen.add(s)
            lbs = [a for a in m.actions(s) if a.name == "load_back" and evicts(s, a)]
            if lbs:
                out.append((s, lbs))
                if len(out) >= limit:
                    return out
    return out


@pytest.mark.parametrize("name", PLANNER)
def test_planner_steps_agree_with_the_encoding(name):
    """On states where the planner evicts: both directions for every action (load_back's
    victims, local_access on device leaves, insert's lane check), and planner_determinism
    has the spec's value on each such load_back (the variant's model reaches a step that
    breaks it)."""
    from tiercheck.proofs.agreement import transition_value
    from tiercheck.spec.properties import BY_NAME

    m = model(name)
    states = _planner_states(m, limit=8)
    assert states, "no evicting load_back on the walks"

    def breaks(s, lbs):
        return any(BY_NAME["planner_determinism"].fn(m, s, a, m.next_state(s, a)) for a in lbs)

    # the first such state, and the first whose load_back breaks planner_determinism
    states = states[:1] + [x for x in states[1:] if breaks(*x)][:1]
    broken = 0
    for s, lbs in states:
        assert check_state(m, s) == []
        for a in lbs:
            t = m.next_state(s, a)
            spec = BY_NAME["planner_determinism"].fn(m, s, a, t) is None
            assert transition_value(m, s, a, t, "planner_determinism") is spec, a
            broken += not spec
    assert bool(broken) == m.cfg.has("planner-local-tiebreak")


def test_planner_agreement_fails_when_the_spec_order_changes(monkeypatch):
    """Break the spec's planner on purpose (ties decided by the largest end page): the
    encoding no longer admits its load_back, and the check says so."""
    from tiercheck.spec import cp_planner

    m = model("cp-planner-2r")
    states = _planner_states(m, limit=8)
    before = [[m.next_state(s, a) for a in lbs] for s, lbs in states]
    monkeypatch.setattr(cp_planner, "victim_key", lambda mm, rs: (lambda e: -e))
    # a state with a tie, where the reversed order plans another victim
    s = next(s for (s, lbs), old in zip(states, before) if [m.next_state(s, a) for a in lbs] != old)
    monkeypatch.undo()
    assert check_state(m, s) == []
    monkeypatch.setattr(cp_planner, "victim_key", lambda mm, rs: (lambda e: -e))
    problems = check_state(m, s)
    assert any("does not admit load_back" in p for p in problems), problems
