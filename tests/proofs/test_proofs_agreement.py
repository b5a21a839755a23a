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
