"""All planners return the identical plan, and that plan is the spec's plan.

``test_every_planner_returns_the_spec_plan`` compares with the spec itself
(tiercheck.spec.cp_planner.plan_victims) on random trees stated in both (tests/cp/spec_trees.py:
lanes, locks, host copies, write policy, per-lane deficits). The reference below is an
independent, torch-free restatement of the seed's rules on trees the spec cannot state
(arbitrary logical pages, the reserved page 0, partial pages); the planners must match both.
"""

import pytest
from hypothesis import HealthCheck, event, example, given, settings, strategies as st

from tiercheck.impl.cp import PLANNERS, SyncCounter

from cp_treegen import NodeSpec, TreeSpec, build, tree_specs
from spec_trees import Shape, impl_tree, shapes, spec_state

from tiercheck.spec.cp_planner import plan_victims

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
QUICK = settings(SETTINGS, max_examples=50)
MANY = settings(SETTINGS, max_examples=3000)


def reference_plan(spec: TreeSpec):
    cp, ps = spec.cp, spec.page_size
    n = len(spec.nodes)
    parent = {i + 1: ns.parent for i, ns in enumerate(spec.nodes)}
    children = {i: [] for i in range(n + 1)}
    for i in range(1, n + 1):
        children[parent[i]].append(i)
    resident = {0: True, **{i + 1: not ns.evicted for i, ns in enumerate(spec.nodes)}}
    locked = {i + 1: ns.locked for i, ns in enumerate(spec.nodes)}
    counts = {}
    for i, ns in enumerate(spec.nodes):
        c = [0] * cp
        for page in ns.pages:  # one entry per page, partial tail included
            c[(page - 1) % cp] += 1
        counts[i + 1] = c
    seq = {i + 1: ns.access_seq for i, ns in enumerate(spec.nodes)}

    def base(x):
        return x != 0 and resident[x] and not locked[x]

    def leaf_after(x, planned):
        return base(x) and all(c in planned or not resident[c] for c in children[x])

    def gain(x, d):
        return sum(min(a, b) for a, b in zip(counts[x], d))

    d = [max(0, v) for v in spec.deficits]
    pool = {x for x in range(1, n + 1) if leaf_after(x, set())}
    planned, order, freed, unlocked = set(), [], [0] * cp, False
    while any(d):
        best = None
        for x in pool:
            if not leaf_after(x, planned):
                continue
            g, u = gain(x, d), 0
            if g == 0:
                a = parent[x]
                while a != 0:
                    if a in planned:
                        break
                    if not resident[a]:
                        a = parent[a]
                        continue
                    if not base(a):
                        break
                    if gain(a, d) > 0:
                        u = gain(a, d)
                        break
                    a = parent[a]
                if u == 0:
                    continue
            key = (-g, -u, seq[x], x)  # u > 0 only when g == 0
            best = key if best is None or key < best else best
        if best is None:
            break
        x = best[-1]
        unlocked = unlocked or best[0] == 0
        order.append(x)
        planned.add(x)
        pool.discard(x)
        for o in range(cp):
            freed[o] += counts[x][o]
            d[o] = max(0, d[o] - counts[x][o])
        a = parent[x]
        while a != 0 and a not in planned:
            if leaf_after(a, planned):
                pool.add(a)
                break
            if resident[a]:
                break
            a = parent[a]
    return tuple(order), tuple(freed), tuple(d), unlocked




def check_against_reference(spec):
    root, nodes = build(spec)
    *expected, unlocked = reference_plan(spec)
    expected = tuple(expected)
    event(f"victims: {min(len(expected[0]), 3)}{'+' if len(expected[0]) >= 3 else ''}")
    event(f"ancestor-unlock victim: {unlocked}")
    event(f"deficit covered: {not any(expected[2])}")
    event(f"page 0 present: {any(0 in ns.pages for ns in spec.nodes)}")
    plans = {}
    for name, cls in PLANNERS.items():
        plan = cls(spec.cp, spec.page_size).plan(root, list(spec.deficits), syncs=SyncCounter())
        plans[name] = plan
        got = (plan.victims, plan.planned_freed_by_owner, plan.remaining_deficit_by_owner)
        assert got == expected, f"{name}: {got} != reference {expected}"
        assert plan.demote == tuple(nodes[v].backuped for v in plan.victims)
    assert plans["naive"] == plans["memo"] == plans["fast"]
    assert len({p.digest() for p in plans.values()}) == 1


def check_against_spec(shape):
    m, rs, ends = spec_state(shape)
    want = plan_victims(m, rs, shape.deficits, frozenset())
    root = impl_tree(shape, m, rs, ends)
    for name, cls in PLANNERS.items():
        plan = cls(shape.cp, 1).plan(root, list(shape.deficits))
        got = plan.victims if plan.satisfied else ()
        assert got == want, f"{name}: {got} != spec {want}"
    return want


def _backed(cp, parents, lengths, deficits):
    n = len(parents)
    return Shape(cp=cp, write_back=False, parents=parents, lengths=lengths, evicted=(False,) * n,
                 locked=(False,) * n, backed=(True,) * n, deficits=deficits)


# Ancestor-unlock credit, which random shapes reach in about one run of three: a leaf that
# gains nothing is planned for its ancestor's gain (dropping the credit leaves it unplanned),
# and of two such leaves the one whose ancestor gains more goes first (a credit of 1 for any
# gain picks the leaf on the lower end page instead).
CREDIT = _backed(2, (0, 1), (1, 1), (1, 0))
CREDIT_SIZE = _backed(2, (0, 1, 0, 3), (1, 1, 3, 1), (2, 0))


@SETTINGS
@example(CREDIT)
@example(CREDIT_SIZE)
@given(shapes())
def test_every_planner_returns_the_spec_plan(shape):
    want = check_against_spec(shape)
    event(f"spec victims: {min(len(want), 3)}")
    event(f"lanes: {shape.cp}")


def test_the_issue_example_tree_plans_the_ancestor():
    """Issue 15's example at the load-back: (1), (1)/(1,2), (3) resident and backed, 2 pages
    short on one lane: (1,2) first (tie by end page), then its ancestor (1) admitted, which
    beats (3) on the order; the old one-lane spec took (1,2) and (3)."""
    shape = Shape(cp=1, write_back=False, parents=(0, 1, 0), lengths=(1, 1, 1),
                  evicted=(False,) * 3, locked=(False,) * 3, backed=(True,) * 3, deficits=(2,))
    _, _, ends = spec_state(shape)
    assert check_against_spec(shape) == (ends[1], ends[0])


def test_the_credit_examples_plan_by_credit():
    """The explicit examples above reach the credit rule: the spec plans the zero-gain leaf
    first, then its admitted ancestor (by the larger credit in CREDIT_SIZE)."""
    for shape, (leaf, ancestor) in ((CREDIT, (1, 0)), (CREDIT_SIZE, (3, 2))):
        _, _, ends = spec_state(shape)
        assert check_against_spec(shape) == (ends[leaf], ends[ancestor])


@SETTINGS
@given(tree_specs())
def test_every_planner_returns_the_reference_plan(spec):
    check_against_reference(spec)


@pytest.mark.slow
@MANY
@given(tree_specs(max_nodes=24))
def test_every_planner_returns_the_reference_plan_many(spec):
    check_against_reference(spec)


@QUICK
@given(tree_specs(), st.randoms(use_true_random=False))
def test_candidate_order_does_not_matter(spec, rnd):
    root, nodes = build(spec)
    shuffled = list(nodes[1:])
    rnd.shuffle(shuffled)  # every node offered: ineligible ones must wait, not be picked
    fast = PLANNERS["fast"](spec.cp, spec.page_size)
    memo = PLANNERS["memo"](spec.cp, spec.page_size)
    assert fast.plan(root, list(spec.deficits), candidates=shuffled) == \
        memo.plan(root, list(spec.deficits), candidates=list(reversed(shuffled)))


@QUICK
@given(tree_specs())
def test_plan_invariants(spec):
    root, nodes = build(spec)
    plan = PLANNERS["fast"](spec.cp, spec.page_size).plan(root, list(spec.deficits))
    planned = set()
    for v in plan.victims:
        node = nodes[v]
        assert node.lock_ref == 0 and node.value is not None and v not in planned
        # every victim is a leaf once the victims before it are gone
        assert all(c.value is None or c.id in planned for c in node.children.values())
        planned.add(v)
    for o in range(spec.cp):
        want = max(0, spec.deficits[o])
        assert plan.remaining_deficit_by_owner[o] == max(0, want - plan.planned_freed_by_owner[o])


def test_zero_location_and_partial_page_in_one_node():
    # page 0 belongs to owner cp-1; a partial last page still counts as one page.
    spec = TreeSpec(cp=3, page_size=4, deficits=(0, 0, 2), nodes=(
        NodeSpec(parent=0, pages=(0, 3, 1), tail=2, evicted=False, locked=False,
                 backuped=False, access_seq=0),
    ))
    root, _ = build(spec)
    for cls in PLANNERS.values():
        plan = cls(3, 4).plan(root, [0, 0, 2])
        assert plan.victims == (1,)
        assert plan.planned_freed_by_owner == (1, 0, 2)  # page 1 -> 0; pages 0 and 3 -> 2
        assert plan.remaining_deficit_by_owner == (0, 0, 0)


def test_ancestor_unlock_plans_the_subtree_then_the_ancestor():
    # cp=2: the prefix (node 1) holds owner-0 pages; its leaves hold only owner-1 pages, so
    # they gain nothing for an owner-0 deficit but must go first to reach the prefix.
    def ns(parent, pages, seq, locked=False):
        return NodeSpec(parent=parent, pages=pages, tail=1, evicted=False, locked=locked,
                        backuped=True, access_seq=seq)
    spec = TreeSpec(cp=2, page_size=1, deficits=(2, 0), nodes=(
        ns(0, (1, 3), seq=0),  # node 1: two owner-0 pages
        ns(1, (2,), seq=5),    # node 2: owner 1
        ns(1, (4,), seq=3),    # node 3: owner 1, older -> first
        ns(0, (6,), seq=9),    # node 4: owner 1, gains nothing, unlocks nothing
    ))
    root, _ = build(spec)
    for cls in PLANNERS.values():
        plan = cls(2, 1).plan(root, [2, 0])
        assert plan.victims == (3, 2, 1), cls.name
        assert plan.planned_freed_by_owner == (2, 2)
        assert plan.satisfied
    # the same tree with the prefix locked: nothing to gain, nothing planned
    locked = TreeSpec(cp=2, page_size=1, deficits=(2, 0),
                      nodes=(ns(0, (1, 3), seq=0, locked=True),) + spec.nodes[1:])
    root, _ = build(locked)
    for cls in PLANNERS.values():
        plan = cls(2, 1).plan(root, [2, 0])
        assert plan.victims == () and plan.remaining_deficit_by_owner == (2, 0)
