"""The page-sorted encoding of the evictions insert and load_back do by themselves
(proofs/epr_sched_evict.py: insert_evicts, load_back_evicts, the CP planner's victims).

On states of the models that exercise them, every explicit insert / load_back step is a
behaviour of the encoding with the spec's transition-property values, and the
hypothesis it adds holds; each option's safety variant fails an obligation for any
number of pages with a concrete CTI, and the correct protocol proves it; the audit
covers both actions for any number of pages."""

import pytest

from tiercheck.proofs.epr_agreement import admits, transition_values
from tiercheck.proofs.epr_obligations import BOUNDED_UNDER, COVERED_ACTIONS, covered, prove_action
from tiercheck.proofs.obligations import targets_for
from .proof_helpers import model, walk
from .test_proofs_unbounded import _agrees

EVICTING = ("insert", "load_back")
MODELS = ["wt-evicts-1r", "wb-evicts-2r", "request-locks-evicts-1r", "cp-planner-ancestors-1r", "cp-planner-2r"]


def _short(m, s, a) -> bool:
    """The step evicts by itself on some rank: no room for it (or, CP, a lane deficit)."""
    from tiercheck.proofs.epr_sched_evict import spec_short
    from tiercheck.spec.cp_planner import lane_deficits
    from tiercheck.spec.load_path import _chain_pages, nodes_to_load

    if m.cfg.cp_planner and a.name == "load_back":
        return any(any(lane_deficits(m, rs, _chain_pages(m, rs, nodes_to_load(m, rs, a["node"])))) for rs in s.ranks)
    return spec_short(m, s, a)


def _steps(m, n=6, seeds=10, steps=30):
    out, seen = [], set()
    for seed in range(seeds):
        for s in walk(m, seed, steps):
            for a in m.actions(s):
                if a.name in EVICTING and (s, a) not in seen and _short(m, s, a):
                    seen.add((s, a))
                    out.append((s, a, m.next_state(s, a)))
    return out[:: max(1, len(out) // n)][:n]


@pytest.mark.parametrize("n", [1, pytest.param(3, marks=pytest.mark.slow)])  # each step's check costs seconds
@pytest.mark.parametrize("name", [n if n != "wb-evicts-2r" else pytest.param(n, marks=pytest.mark.slow) for n in MODELS])
def test_evicting_steps_are_behaviours_with_the_spec_values(name, n):
    m = model(name)
    steps = _steps(m, n=n)  # spread over the walks' evicting steps
    assert steps, f"{name}: no step evicts by itself"
    for s, a, t in steps:
        for r in range(m.cfg.ranks):
            assert admits(m, s, a, t, r), (name, a, r)
            _agrees(m, s, a, t, r, transition_values(m, s, a, t, r))


def test_a_held_node_evicted_is_noticed():
    """Break a successor: a load_back that evicts by itself also demotes a resident
    ancestor of the node it loads (held: on its path). Not a behaviour of the encoding,
    though the explicit step is."""
    from tiercheck.spec.state import ABSENT, HOST_RESIDENT, RESIDENT, path_to_root

    for name in ("wt-evicts-1r", "wb-evicts-2r"):
        m = model(name)
        for s, a, t in _steps(m, n=40, seeds=20):
            if a.name != "load_back":
                continue
            rt = t.ranks[0]
            up = [x for x in path_to_root(m.pages, s.ranks[0], a["node"]) if x != a["node"] and rt.nodes[x] is not None
                  and rt.nodes[x].dev == RESIDENT and rt.nodes[x].host == HOST_RESIDENT]
            if not up:
                continue
            bad = rt._replace(nodes=tuple(n._replace(dev=ABSENT) if i == up[0] else n for i, n in enumerate(rt.nodes)))
            assert admits(m, s, a, t, 0)
            assert not admits(m, s, a, t._replace(ranks=(bad,) + t.ranks[1:]), 0)
            return
    pytest.fail("no evicting load_back below a backed resident ancestor")


def test_loading_nodes_are_locked_on_reachable_states():
    """epr_sched_evict.loading_locked (a hypothesis of load_back) holds where the
    bounded invariants do."""
    from tiercheck.spec.state import LOADING

    for name in ("cp-planner-ancestors-1r", "wb-evicts-2r"):
        m = model(name)
        seen = 0
        for seed in range(6):
            for s in walk(m, seed, 40):
                for rs in s.ranks:
                    for n in rs.nodes:
                        if n is not None and n.dev == LOADING:
                            seen += 1
                            assert n.lock >= 1
        assert seen, name


def test_both_actions_are_covered_for_any_number_of_pages():
    assert "load_back" in COVERED_ACTIONS and BOUNDED_UNDER == {"insert": "insert_evicts"}
    for action in EVICTING:
        assert covered("locked_never_evicted", action) and covered("no_use_after_free", action)
        assert covered("release_safety", action)
    assert covered("registry", "load_back")  # its evictions write the registry (proofs.epr_registry)
    assert set(targets_for("load_back")) > {"no_ghost", "planner_determinism"}


# -m slow: about 90 s each on a loaded CI machine; the default run keeps the bounded CTI of
# load-back-evicts-chain-unlocked and the concrete witness of lru-evicts-locked-parent
# (tests/proofs/test_proofs_scheduler_evicts.py).
@pytest.mark.slow
@pytest.mark.parametrize("action,target,variant", [
    ("insert", "locked_never_evicted", "lru-evicts-locked-parent"),
    ("load_back", "no_use_after_free", "load-back-evicts-chain-unlocked"),
])
def test_variant_fails_for_any_number_of_pages_with_a_cti_and_the_protocol_proves(action, target, variant):
    [bad] = prove_action(action, [target], variants=frozenset({variant}))
    assert bad.status == "failed" and bad.pages == "any" and bad.cti is not None, bad
    flag = "insert_evicts" if action == "insert" else "load_back_evicts"
    assert bad.cti["config"][flag] and bad.cti["forest"]["pages"] >= 1
    [good] = prove_action(action, [target])
    assert good.status == "proved" and good.pages == "any", good
