"""The sync rounds' collective outcomes over the page sort (proofs.epr_drain): the drain
round's plan consensus, durable marks and release queue, check_prefetch_progress's release
queue, the hung / halted codes and the digest check, for any number of pages.

Agreement: on reachable states of shipped models with storage, mirror release, a durable
LRU and age gate, a single writer, prefetch with revokes and duplicate reclaim, every
explicit round is a behaviour of its page-sorted encoding (each rank's part) and the
transition properties have the spec's / the bounded encoding's values with the round's
collective choices bound to the explicit step's; a wrong successor of a drain round
(a mirror released outside the plan, a mark outside the stored prefix, a mismatch not
counted) is noticed; the obligations are proved and the variants fail them with CTIs."""

import pytest

from tiercheck.proofs.epr_agreement import _all_hold, _base, _lift, admits, step_setup, transition_values
from tiercheck.proofs.epr_drain import DRAIN, HYPOTHESES, TARGETS, bind
from tiercheck.proofs.epr_obligations import prove_action
from tiercheck.proofs.epr_properties import UPROPS
from tiercheck.spec.properties import BY_NAME as SPEC
from tiercheck.spec.state import ABSENT

from .proof_helpers import model
from .test_proofs_unbounded import _agrees, _bounded_transition

ROUNDS = tuple(TARGETS) + ("storage_backup_done",)


def _rounds(name, per_action=3, cap=1500, want=ROUNDS):
    """Breadth-first from the initial state: up to ``per_action`` explicit steps of each
    round that change the state, with their pre-states."""
    m = model(name)
    s0 = m.init_states()[0]
    seen, todo, done, out = {s0}, [s0], {}, []
    while todo and len(seen) < cap:
        s = todo.pop(0)
        for a, t in m.successors(s):
            if a.name in want and done.get(a.name, 0) < per_action and t != s:
                out.append((s, a, t))
                done[a.name] = done.get(a.name, 0) + 1
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return m, out, done


def _check_rounds(name, need, per_action=3, cap=1500):
    m, steps, done = _rounds(name, per_action, cap)
    assert set(need) <= set(done), done
    for s, a, t in steps:
        for r in range(m.cfg.ranks):
            assert admits(m, s, a, t, r), (name, a, r)
            _agrees(m, s, a, t, r, transition_values(m, s, a, t, r))
            assert _hypotheses(m, s, r) == {n: True for n in HYPOTHESES}, (name, s, r)


def _hypotheses(m, s, r):
    u, pages, facts = _base(m)
    v, vf = _lift(m, s, r, u, pages)
    return _all_hold(pages, facts + vf, {n: h(u, v) for n, h in HYPOTHESES.items()}, u.slot_consts)


def test_mirror_rounds_admitted_with_the_spec_values():
    """wt-mirror-1r (partial backups, mirror release): drain rounds that ack, mark,
    commit and plan, and the other rounds."""
    _check_rounds("wt-mirror-1r", (DRAIN, "writing_check", "storage_backup_done"), per_action=6, cap=3000)


@pytest.mark.slow
@pytest.mark.parametrize("name,need", [
    ("wt-durable-lru-1r", (DRAIN, "writing_check")),
    ("wt-mirror-mla-2r", (DRAIN, "writing_check", "storage_backup_done")),
    ("wt-mirror-2r", (DRAIN, "writing_check")),
    ("wt-mirror-prefetch-1r", (DRAIN, "check_prefetch_progress")),
    ("wt-prefetch-revoke-1r", (DRAIN, "check_prefetch_progress")),
    ("wt-prefetch-2r", ("check_prefetch_progress",)),
    ("wb-reclaim-2r", ("writing_check",)),
])
def test_rounds_admitted_with_the_spec_values(name, need):
    _check_rounds(name, need)


def _drain_with(name, pred, cap=4000):
    """A reachable drain round (breadth-first) whose explicit step satisfies pred."""
    m, steps, _done = _rounds(name, per_action=10 ** 6, cap=cap, want=(DRAIN,))
    for s, a, t in steps:
        if pred(m, s, t):
            return m, s, a, t
    pytest.fail(f"no such drain round on {name}")


def _released(m, s, t):
    rs, rt = s.ranks[0], t.ranks[0]
    return [e for e, n in enumerate(rs.nodes) if n is not None and rt.nodes[e] is not None
            and n.host != ABSENT and rt.nodes[e].host == ABSENT]


def test_a_release_outside_the_plan_is_noticed():
    """A drain round that releases a mirror: the same round with the plan emptied
    beforehand releases outside the plan; release_after_consensus says violated, as the
    bounded encoding does."""
    m, s, a, t = _drain_with("wt-mirror-1r", lambda m, s, t: bool(_released(m, s, t)))
    assert transition_values(m, s, a, t, 0)["release_after_consensus"] is True
    unplanned = s._replace(ranks=(s.ranks[0]._replace(plan=()),))
    assert transition_values(m, unplanned, a, t, 0)["release_after_consensus"] is False
    assert _bounded_transition(m, "release_after_consensus", unplanned, a, t) is False


def test_a_mark_outside_the_stored_prefix_is_noticed():
    """A drain round that marks pages durable: marking one more (cached, not stored)
    page violates durable_only_when_acked, in the page-sorted form as in the spec."""
    def marks(m, s, t):
        rs, rt = s.ranks[0], t.ranks[0]
        return rt.durable & ~rs.durable and any(o >= 0 and not (rt.durable >> p & 1) for p, o in enumerate(rt.owner))

    m, s, a, t = _drain_with("wt-mirror-1r", marks)
    assert transition_values(m, s, a, t, 0)["durable_only_when_acked"] is True
    rt = t.ranks[0]
    p = next(p for p, o in enumerate(rt.owner) if o >= 0 and not rt.durable >> p & 1)
    more = t._replace(ranks=(rt._replace(durable=rt.durable | 1 << p),))
    assert SPEC["durable_only_when_acked"].fn(m, s, a, more)
    assert transition_values(m, s, a, more, 0)["durable_only_when_acked"] is False


def _values(m, s, a, t, names, **fix):
    """Rank 0's page-sorted transition properties on s -a-> t, the round's choices bound
    as the explicit step makes them but for ``fix``."""
    u, pages, facts, pre, params, _post = step_setup(m, s, 0, a.name)
    target, tf = _lift(m, t, 0, u, pages)
    return _all_hold(pages, facts + u.facts + tf + bind(m, s, a, 0, params, pages, **fix),
                     {n: UPROPS[n].fn(u, pre, target, params) for n in names}, u.slot_consts)


def test_a_commit_without_agreement_is_noticed():
    """A drain round that commits a plan: were the triples different (the one-rank round
    agrees with itself), the commit is a release without consensus and a mismatch not
    counted."""
    m, s, a, t = _drain_with("wt-mirror-1r", lambda m, s, t: bool(s.ranks[0].plan) and bool(_released(m, s, t)))
    names = ("mismatch_fail_closes", "release_after_consensus")
    assert _values(m, s, a, t, names) == {n: True for n in names}
    assert _values(m, s, a, t, names, agree=False) == {n: False for n in names}


def test_round_obligations_proved():
    for action, targets in TARGETS.items():
        results = prove_action(action, targets=targets)
        assert {r.target for r in results} == set(targets)
        assert all(r.status == "proved" and r.pages == "any" for r in results), results


@pytest.mark.parametrize("variant,action,target", [
    ("durable-on-ack", DRAIN, "durable_only_when_acked"),
    ("release-no-consensus", DRAIN, "release_after_consensus"),
    pytest.param("negated-pair-overflow", DRAIN, "release_after_consensus", marks=pytest.mark.slow),
    ("digest-unchecked", "writing_check", "reclaim_digest_checked"),
    ("early-return-collective", "writing_check", "no_collective_hang"),
    pytest.param("prefetch-vote-skipped", "check_prefetch_progress", "no_collective_hang", marks=pytest.mark.slow),
])
def test_variants_fail_with_a_cti(variant, action, target):
    r = next(r for r in prove_action(action, targets=(target,), variants=frozenset({variant})))
    assert r.status == "failed" and r.cti and r.cti["post"]["ranks"], r


def _profile_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "prove_profile.py"
    spec = importlib.util.spec_from_file_location("prove_profile", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_profile_of_some_actions_runs_only_their_jobs(capsys):
    """benchmarks/prove_profile.py --actions (the CPU figures of docs/proofs.md for the
    rounds): only the named actions' jobs; an unknown action is a one-line error, exit 2."""
    prof = _profile_script()
    assert prof.main(["--actions", "store_lose"]) == 0
    out = capsys.readouterr().out
    jobs = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert jobs and all(j.startswith("store_lose/") for j in jobs), out
    with pytest.raises(SystemExit) as e:
        prof.main(["--actions", "no_such_action"])
    assert e.value.code == 2 and "no_such_action" in capsys.readouterr().err
