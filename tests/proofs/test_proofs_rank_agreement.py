"""rank_agreement for any number of pages (proofs.epr_rank_agreement): two ranks' views,
replicated steps applied to both with the spec's shared choices shared. The encoding's
"replicas agree" has the spec's value on reachable states, every explicit replicated
step is one of its behaviours (so sharing a choice is sound), a diverged state is
noticed, the obligations are proved, and the rank-divergence variants fail with a
two-rank counterexample."""

import dataclasses

import pytest

from tiercheck.proofs import epr_rank_agreement as ra
from tiercheck.proofs.epr_rank_concrete import pair_admits, same_value, spec_same
from tiercheck.spec.model import Model
from tiercheck.spec.properties import BY_NAME as SPEC, replica

from .proof_helpers import model, walk

MODELS = ["wb-reclaim-2r"] + [pytest.param(n, marks=pytest.mark.slow)
                              for n in ("request-locks-2r", "lru-2r", "wt-prefetch-2r", "wt-alloc-2r")]


def _replicated_steps(m, s):
    return [(a, t) for a, t in m.successors(s) if a.name in ra.PAIR_ACTIONS]


@pytest.mark.parametrize("name", MODELS)
def test_agreement_value_and_every_replicated_step_admitted(name):
    m = model(name)
    states = walk(m, 1, 20)[::7] + walk(m, 2, 20)[::19]  # every check is a z3 query per step
    steps = 0
    for s in states:
        for r in range(1, len(s.ranks)):
            assert same_value(m, s, r) == spec_same(m, s, r) == (replica(s.ranks[0]) == replica(s.ranks[r]))
        if not spec_same(m, s, 1):
            continue  # the diverged case: a replicated step waits for the digest round
        for a, t in _replicated_steps(m, s):
            assert pair_admits(m, s, a, t, 1), (a, s)
            steps += 1
    assert steps > 0


def _steps_bfs(m, names, want):
    """Breadth-first: up to ``want`` steps of each action in ``names`` from agreeing
    replicas."""
    s0 = m.init_states()[0]
    seen, todo, out = {s0}, [s0], []
    count = dict.fromkeys(names, 0)
    while todo and min(count.values()) < want:
        s = todo.pop(0)
        for a, t in m.successors(s):
            if a.name in names and count[a.name] < want and spec_same(m, s, 1):
                count[a.name] += 1
                out.append((s, a, t))
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return out


def test_the_sync_rounds_steps_are_admitted():
    """writing_check, loading_check and check_prefetch_progress (rarely enabled on a
    random walk) from agreeing replicas, ranks 0 and 1 at once."""
    m = model("wt-prefetch-2r")
    steps = _steps_bfs(m, ("writing_check", "loading_check", "check_prefetch_progress"), 4)
    assert {a.name for _s, a, _t in steps} == {"writing_check", "loading_check", "check_prefetch_progress"}
    for s, a, t in steps:
        assert pair_admits(m, s, a, t, 1), (a, s)


def test_a_diverged_state_is_noticed():
    m = model("wb-reclaim-2r")
    s = next(s for s in walk(m, 1, 30) if any(n is not None for n in s.ranks[1].nodes))
    e = next(e for e, n in enumerate(s.ranks[1].nodes) if n is not None)
    nodes = list(s.ranks[1].nodes)
    nodes[e] = nodes[e]._replace(hits=nodes[e].hits + 1)
    bad = s._replace(ranks=(s.ranks[0], s.ranks[1]._replace(nodes=tuple(nodes))))
    assert same_value(m, s, 1) and spec_same(m, s, 1)
    assert not same_value(m, bad, 1) and not spec_same(m, bad, 1)


def _divergent_step(m):
    """BFS: the first replicated step from agreeing replicas to a state that breaks
    rank_agreement."""
    s0 = m.init_states()[0]
    seen, todo = {s0}, [s0]
    while todo:
        s = todo.pop(0)
        for a, t in m.successors(s):
            if a.name in ra.PAIR_ACTIONS and spec_same(m, s, 1) and SPEC["rank_agreement"].fn(m, t):
                return s, a, t
            if t not in seen:
                seen.add(t)
                todo.append(t)
    pytest.fail("no divergent step reached")


def test_lru_local_clock_divergence_is_a_behaviour_and_needs_the_per_rank_choice(monkeypatch):
    """The variant model's divergent evict (each rank's own clock picks the host victim)
    is a behaviour of the encoding, which notices the divergence; with the LRU choice
    shared (as it is without the variant) the same step is not admitted: sharing a
    choice the spec makes per rank would be noticed."""
    m = model("variants/lru-local-clock")
    s, a, t = _divergent_step(m)
    assert not same_value(m, t, 1) and not spec_same(m, t, 1)
    assert pair_admits(m, s, a, t, 1)
    monkeypatch.setattr(ra, "PER_RANK_UNDER", {})
    assert not pair_admits(m, s, a, t, 1)
    fixed = Model(dataclasses.replace(m.cfg, variants=frozenset()))
    t2 = fixed.next_state(s, a)
    assert spec_same(fixed, t2, 1) and pair_admits(fixed, s, a, t2, 1)


def test_the_obligations_are_proved():
    for action in ra.PAIR_ACTIONS:
        r = ra.prove(action)
        assert (r.status, r.pages) == ("proved", "any"), r


def test_every_shared_choice_is_one_the_encoding_makes():
    """``SHARED`` names choices by the encoding's names for them: a name no pair setup
    makes (an encoding renamed or computed it since) shares nothing, and the choice it
    meant falls to the taint pass (the drain round's collective outcomes did, merging
    proofs.epr_drain: each rank got its own "some rank holds a plan")."""
    made = set()
    for action, variants, fix in ([(a, frozenset(), {}) for a in ra.PAIR_ACTIONS]
                                  + [("insert", frozenset({"page-ceil-match"}), {"insert_evicts": False}),
                                     ("insert", frozenset(), {"insert_evicts": True}),
                                     ("load_back", frozenset(), {"cp": False, "load_back_evicts": True})]):
        ps = ra.setup(action, variants, fix)
        made |= {n.split("!")[0] for n in ra._decls(list(ps.su.solver.assertions()))}
    assert not [n for n in ra.SHARED if n not in made]


def test_without_the_digest_excuse_reclaim_divergence_fails(monkeypatch):
    """Duplicate reclaim reads each rank's own registry, so replicas may differ after
    evict: only the digest round's excuse makes the obligation hold."""
    monkeypatch.setattr(ra, "RECLAIM", ())  # the reclaim sets unread: no excuse
    r = ra.prove("evict")
    assert r.status == "failed" and r.cti["config"]["duplicate_reclaim"], r


@pytest.mark.parametrize("variant,action", [("lru-local-clock", "evict"),
                                            pytest.param("partial-backup-leak", "insert", marks=pytest.mark.slow)])
def test_variant_fails_with_a_two_rank_cti(variant, action):
    r = ra.prove(action, frozenset({variant}))
    assert r.status == "failed" and len(r.cti["post"]["ranks"]) == 2, r
    pre, post = r.cti["pre"]["ranks"], r.cti["post"]["ranks"]
    assert pre[0]["nodes"] == pre[1]["nodes"] and post[0]["nodes"] != post[1]["nodes"]
