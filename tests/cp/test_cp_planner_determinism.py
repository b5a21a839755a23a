"""Rank agreement: the same replicated state gives the same plan on every CP rank.

Two "ranks" build the same tree from one description but with different per-rank clocks
(``last_access_time``). The correct planner never reads them; the ``planner-local-tiebreak``
variant does, and Hypothesis finds (and shrinks) a case where the ranks then disagree.
"""

import random

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings, strategies as st

from tiercheck.errors import UserError
from tiercheck.impl.cp import KNOWN_VARIANTS, VARIANT_LOCAL_TIEBREAK, make_planner

from cp_treegen import NodeSpec, TreeSpec, build, tree_specs

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rank_clocks(spec, seed):
    """Each rank's own wall-clock access times (per-rank state, not replicated)."""
    rnd = random.Random(seed)
    return [[rnd.random() for _ in spec.nodes] for _rank in range(2)]


def plans_on_two_ranks(spec, clocks_per_rank, kind="fast", variants=()):
    plans = []
    for clocks in clocks_per_rank:
        root, _ = build(spec, clocks)
        planner = make_planner(kind, cp_size=spec.cp, page_size=spec.page_size, variants=variants)
        plans.append(planner.plan(root, list(spec.deficits)))
    return plans


@SETTINGS
@given(tree_specs(), st.integers(0, 2**32 - 1), st.sampled_from(["naive", "memo", "fast"]))
def test_replicated_tiebreak_agrees_across_ranks(spec, seed, kind):
    a, b = plans_on_two_ranks(spec, rank_clocks(spec, seed), kind)
    assert a == b and a.digest() == b.digest()


def check_variant_divergence_is_found(phases):
    def diverges(case):
        spec, clocks = case
        a, b = plans_on_two_ranks(spec, clocks, variants=[VARIANT_LOCAL_TIEBREAK])
        return a != b

    @st.composite
    def cases(draw):
        spec = draw(tree_specs(max_nodes=6, max_cp=4))
        clock = st.lists(st.integers(0, 9), min_size=len(spec.nodes), max_size=len(spec.nodes))
        return spec, (draw(clock), draw(clock))

    spec, clocks = find(cases(), diverges, settings=settings(
        max_examples=1000, deadline=None, database=None, phases=phases,
        suppress_health_check=list(HealthCheck)))
    print(f"counterexample (replay with plans_on_two_ranks): {spec!r}, clocks={clocks!r}")
    # the counterexample is plain data: replaying it diverges again, every time
    for _ in range(3):
        a, b = plans_on_two_ranks(spec, clocks, variants=[VARIANT_LOCAL_TIEBREAK])
        assert a.digest() != b.digest(), (spec, clocks)
    # ... and the correct tie-break agrees on that very case
    a, b = plans_on_two_ranks(spec, clocks)
    assert a == b


def test_local_clock_variant_diverges_on_a_generated_case():
    check_variant_divergence_is_found([Phase.generate])


@pytest.mark.slow
def test_local_clock_variant_counterexample_shrinks():
    check_variant_divergence_is_found([Phase.generate, Phase.shrink])


def test_local_clock_variant_on_a_fixed_tie():
    # Two leaves that free the same pages' worth on the same lanes: only the tie-break decides.
    leaf = dict(tail=1, evicted=False, locked=False, backuped=False, access_seq=0)
    spec = TreeSpec(cp=2, page_size=1, deficits=(1, 1), nodes=(
        NodeSpec(parent=0, pages=(1, 2), **leaf), NodeSpec(parent=0, pages=(3, 4), **leaf)))
    picks = {}
    for clocks in ((1.0, 2.0), (2.0, 1.0)):  # rank 0 and rank 1 saw the accesses differently
        root, _ = build(spec, clocks)
        local = make_planner(cp_size=2, variants=[VARIANT_LOCAL_TIEBREAK]).plan(root, [1, 1])
        correct = make_planner(cp_size=2).plan(root, [1, 1])
        picks[clocks] = (local.victims, correct.victims)
    assert picks[(1.0, 2.0)][0] == (1,) and picks[(2.0, 1.0)][0] == (2,)  # ranks diverge
    assert picks[(1.0, 2.0)][1] == picks[(2.0, 1.0)][1] == (1,)  # equal seq: the id decides


def test_variant_names_are_checked():
    assert VARIANT_LOCAL_TIEBREAK == "planner-local-tiebreak" in KNOWN_VARIANTS
    assert make_planner(cp_size=2).tiebreak.__name__ == "replicated_tiebreak"  # default off
    with pytest.raises(UserError, match="unknown planner variant"):
        make_planner(cp_size=2, variants=["planner-wall-clock"])
    with pytest.raises(UserError, match="unknown planner 'slow'"):
        make_planner("slow", cp_size=2)
