"""planner_determinism for any number of pages: the CP planner over two ranks' views.

The property (spec/properties.py planner_determinism): a load_back from identical
replicas drops the same device copies on every rank. It is a statement about load_back
only (as reclaim_digest_checked is about the sync rounds): under the 19 other actions
its page-sorted form (``holds``) is the constant true, which z3 confirms with no step to
encode.

Under load_back the pre-state is the two views of proofs.epr_rank_agreement (one
function for both ranks per replicated field, two per per-rank field) and the step is
the page-sorted load_back on each. The planner's victims and whether it runs at all
(proofs.epr_sched_evict.planner_victims: a free set constrained by what every victim of
the spec satisfies) are chosen on each rank from its own view, one choice per rank
(epr_rank_agreement.OWN_VIEW), never one shared choice by fiat. What ties them is what
the spec's plan_victims guarantees: it is a function of what it reads (``congruence``),
so two ranks with equal planner inputs make equal plans. The inputs:

- the tree as the planner reads it, every page's owner and the node fields
  (``INPUT_FIELDS``: lane_free reads the nodes' device copies and pages, base the
  locks and host copies, the lanes are positions on the forest, which both views share);
- the device pool's free count (with one lane the deficit is the chain's pages minus it);
- the loaded node (its path is the protected set; the chain is the pre-state's);
- the order key of each node (``order_keys``): the replicated LRU position under
  victim_order = "lru", else none (ties by the end page, the page itself): one function
  for both ranks, as the replica holds it; under planner-local-tiebreak each rank's own
  access clock, which the replica does not hold: one function per rank.

The obligation then needs the inputs equal where each rank's planner runs, which z3
derives from the step (on the CP path nothing before the planner changes the view) and
the agree case's premise (identical replicas: the free counters are part of the spec's
replica, ``premise``). Under the variant nothing makes the two clocks equal, and the
obligation fails with two ranks whose plans differ. tests/proofs/test_proofs_planner_pair.py
checks on reachable states of the CP models that the spec's planner gives the same plan
when every rank field but these inputs comes from another state (the congruence holds of
the spec), that under the variant the clock alone changes it, that ``holds`` has the
spec's value, and that every explicit load_back from agreeing replicas is a behaviour of
the pair encoding with the congruence.

rank_agreement under load_back is decided on the same pair setup (``prove``) with the
planner on (its own eviction, load_back_evicts, does not apply then), and with it off
by epr_rank_agreement.prove (the option off and on: proofs.epr_room_pair).
"""

from __future__ import annotations

import time

import z3

from ..spec.state import ABSENT, RESIDENT
from .epr_properties import b_
from .forest import PageSort, forall
from .paged import NODE_FIELDS

TARGET = "planner_determinism"
ACTION = "load_back"
INPUT_FIELDS = ("cached", "own", *NODE_FIELDS)
INPUT_SCALARS = ("dev_free",)
TIEBREAK = "planner-local-tiebreak"
# the replica's counters: equal in the agree case (spec/properties.py replica)
PREMISE_SCALARS = ("dev_free", "host_free")


def covered(target: str, action: str) -> bool:
    """What this module proves for any number of pages: planner_determinism under every
    action, rank_agreement under load_back."""
    return (target == TARGET and action != "init") or (target == "rank_agreement" and action == ACTION)


def dropped(pre, post, x):
    """Node x held a device copy and lost it (spec: live, RESIDENT, then gone or ABSENT)."""
    return z3.And(pre.live(x), pre.dev(x) == RESIDENT, z3.Or(z3.Not(post.live(x)), post.dev(x) == ABSENT))


def holds(u, action: str, pre, post, pre2, post2):
    """planner_determinism on ranks r and r' whose replicas agree before the step (the
    agree case; on explicit states the caller says whether they do)."""
    if action != ACTION:
        return z3.BoolVal(True)  # a statement about load_back only
    return z3.Implies(b_(u.cfg.cp), forall(lambda x: dropped(pre, post, x) == dropped(pre2, post2, x)))


def order_keys(variants):
    """The planner's order key per rank (rank r's, rank r''s): one function under the
    fixed protocol (replicated), two under planner-local-tiebreak (each rank's clock)."""
    key = z3.Function("planner.key", PageSort, z3.IntSort())
    return key, (z3.Function("planner.key'", PageSort, z3.IntSort()) if TIEBREAK in variants else key)


def congruence(ps, plan, keys):
    """The spec's plan is a function of its inputs: equal inputs on the two ranks give
    the same victims and the same decision to run."""
    from .epr_rank_agreement import _copy_view

    vic, on, view, e = plan
    view2 = _copy_view(view, ps.rename)
    vic2 = lambda x: ps.rename(vic(x))
    key, key2 = keys
    same_input = z3.And(
        forall(lambda p: z3.And(key(p) == key2(p), *[view.f[n](p) == view2.f[n](p) for n in INPUT_FIELDS])),
        *[view.f[n] == view2.f[n] for n in INPUT_SCALARS], e == ps.rename(e))
    return z3.Implies(same_input, z3.And(on == ps.rename(on), forall(lambda x: vic(x) == vic2(x))))


def premise(ps) -> list:
    """The agree case's identical replicas, the counters included."""
    return [ps.su.pre.f[n] == ps.pre2.f[n] for n in PREMISE_SCALARS]


def pair_facts(ps, variants) -> list:
    """What a pair setup adds where the planner runs (epr_rank_agreement.setup)."""
    plans = ps.su.u.__dict__.get("plans", [])
    if not plans:
        return []
    keys = order_keys(variants)
    return premise(ps) + [congruence(ps, p, keys) for p in plans]


def goal(ps):
    return holds(ps.su.u, ps.su.params["action"], ps.su.pre, ps.su.post, ps.pre2, ps.post2)


def vacuous(action: str, fix=None) -> bool:
    """z3 confirms the property is the constant true: off load_back, or with the
    planner fixed off."""
    from .config import ProofConfig
    from .epr_obligations import UCtx
    from .forest import Forest
    from .paged import symbolic

    u = UCtx(ProofConfig.symbolic_config(frozenset(), fix=fix or {}), Forest())
    views = [symbolic(f"planner_vacuous{i}") for i in range(4)]
    sol = z3.Solver()
    sol.add(*[z3.BoolVal(x) if isinstance(x, bool) else x for x in u.cfg.constraints()])
    sol.add(z3.Not(holds(u, action, *views)))
    return sol.check() == z3.unsat


# load_back's parts: the planner on (its own eviction, load_back_evicts, does not apply
# then: the step is the same for either value), and off, where planner_determinism says
# nothing (``vacuous``) and rank_agreement is proved for both values of the option.
PLANNER_ON = {"cp": True}
PLANNER_OFF = {"cp": False}


def _parts(fix, *parts) -> list:
    """The parts ``fix`` allows, each with ``fix`` added."""
    fix = fix or {}
    return [{**fix, **p} for p in parts if all(fix.get(k, v) == v for k, v in p.items())]


def prove(action: str, targets, variants=frozenset(), fix=None) -> list:
    """planner_determinism (and, under load_back, rank_agreement) for any number of
    pages and ranks; the planner-on part is one pair setup for both."""
    from . import epr_rank_agreement as ra
    from .audit import _merge
    from .obligations import Result

    t0 = time.perf_counter()
    if action != ACTION:
        if TARGET not in targets:
            return []
        status = "proved" if vacuous(action, fix) else "failed"
        return [Result(TARGET, action, status, time.perf_counter() - t0, None, "any")]
    got = {}

    def add(r):
        got[r.target] = _merge(got[r.target], r) if r.target in got else r

    for on in _parts(fix, PLANNER_ON):
        ps = ra.setup(action, variants, on)
        if TARGET in targets:  # no diverged case: the property speaks of identical replicas
            add(ra.decide(ps, action, TARGET, goal, t0))
        if ra.TARGET in targets:
            add(ra.prove(action, variants, on, ps=ps))
    for off in _parts(fix, PLANNER_OFF):
        t1 = time.perf_counter()
        if TARGET in targets:
            add(Result(TARGET, action, "proved" if vacuous(action, off) else "failed", time.perf_counter() - t1,
                       None, "any"))
        if ra.TARGET in targets:
            add(ra.prove(action, variants, off))
    for t in targets:  # a part ``fix`` leaves open that no part above covers
        if t not in got:
            got[t] = Result(t, action, "unknown", time.perf_counter() - t0, None, "any")
    return [got[t] for t in targets if t in got]
