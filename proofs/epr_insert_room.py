"""insert with its own eviction (``insert_evicts``) proved in two parts, for any number
of pages: the eviction, then the plain insert on the view the eviction leaves.

proofs.epr_sched_evict builds the step from the pre-state s as make_room and its slot
step, ending in a view m (``room_mid``), then epr_actions.insert on m where the request
fits, the post-state t being m where it does not. Its facts split at m: F_room, those
made up to m (``room_facts`` counts them), and F_ins, those made after (the plain insert
on m, the branch on the fit, what epr_actions.effect adds to every step). Decided at
once, H => P(t) (H: the forest axioms, the config, Inv(s), F_room, F_ins) was beyond
z3's model-based instantiation for prefix_closed and tree_closed (unknown after 30 s;
the finite-model search found no counterexample), and its effort on rank_agreement over
two views swung from 1.5 to 42 s with the names the symbols got: Inv(s) and make_room's
quantified facts feed the instantiation of the insert's. Here each target is proved as
two implications, each from a subset of H:

1. the eviction: H => K(m), for each K in ``KEPT`` (tree_owner, tree_chain, tree_closed,
   tree_paths, prefix_closed), one check each;
2. the insert: the axioms, the config, F_ins and K(m) for every K in KEPT => P(t) (t is
   m where the request does not fit, the plain insert's post-state where it does).

(2) assumes of m only what (1) proves, so H => P(t) follows by modus ponens: the
proof is of the audit's obligation itself, not of a model of it. rank_agreement
(proofs.epr_rank_agreement): (1) the pair's hypotheses => ``same(m, m')`` (make_room's
outcome is one choice for both ranks, proofs.epr_room_pair, so the replicated fields
of m are the same functions on both); (2) the axioms, the config, F_ins on both ranks
and same(m, m') => the agree case's goal.

Every check runs in a fresh solver under a z3 resource limit with seed retries
(proofs.epr_queues.refutes: deterministic, so the verdict does not depend on the
machine's load). A part not proved proves nothing: a counterexample to the obligation
itself (H and not P(t)) is then searched for over finite forests (forest.finite_model,
as the direct check does once model-based instantiation gives up, which it did here in
the correct protocol), and the obligation is unknown where none is found. For
rank_agreement the pair's own direct check follows (epr_rank_agreement.check).
"""

from __future__ import annotations

import z3

ACTION = "insert"
TARGETS = ("prefix_closed", "tree_closed")  # single-rank targets proved this way
# the counting targets (proofs.epr_counting): proved in two parts where both go through,
# (2) with the target at m as well (make_room's counters are balanced from s to m, the
# insert's from m to t: proofs.epr_counting_evict); else the direct check decides them
# and searches their counterexample with exact set sizes. insert's page-sorted job with
# insert_evicts on: 27.3 million resource units with them decided at once, 17.6 million
# in two parts (benchmarks/prove_profile.py; docs/proofs.md, session 16)
COUNTED = ("slot_conservation", "lock_accounting")
KEPT = ("tree_owner", "tree_chain", "tree_closed", "tree_paths", "prefix_closed")  # what (2) assumes of m
# z3 resource limit per try (seeds as epr_queues.SEEDS): the costliest part takes about
# 0.7 million (tree_closed's insert part), the pair's insert part about 0.15 million
PART_RLIMIT = 4_000_000


def applies(params) -> bool:
    """The step is insert with its own eviction built (the option on or free)."""
    return params.get("action") == ACTION and "room_facts" in params


def _base(u) -> list:
    return [*u.forest.axioms(), *[z3.BoolVal(x) if isinstance(x, bool) else x for x in u.cfg.constraints()]]


def insert_facts(su, held) -> list:
    """F_ins: the step's facts made after the eviction's view, those among ``held`` (the
    solver's assertions: a fact a target added and took back is not one)."""
    ids = {h.get_id() for h in held}
    return [f for f in su.u.facts[su.params["room_facts"]:] if f.get_id() in ids]


def kept(su, held, k: str) -> bool:
    """Part (1) for K = ``k``: held => K(m) (memoised on the setup: the audit asks for
    several targets on one)."""
    from .epr_queues import refutes

    memo = su.u.__dict__.setdefault("room_kept", {})
    key = (k, frozenset(h.get_id() for h in held))  # a proof from other hypotheses is not one from these
    if key not in memo:
        memo[key] = refutes(held, PART_RLIMIT, at_mid(su, k))
    return memo[key]


def at_mid(su, k: str):
    """K(m), one formula per setup: (2) assumes the very formula (1) proves (a counting
    target names the sizes and counts of m, fresh symbols were it built twice)."""
    from .epr_properties import UPROPS

    memo = su.u.__dict__.setdefault("room_at_mid", {})
    if k not in memo:
        memo[k] = UPROPS[k].fn(su.u, su.params["room_mid"])
    return memo[k]


def decides(su, target: str) -> bool:
    return target in TARGETS and applies(su.params)


def shortcut(su, target: str) -> bool:
    """A counting target proved in two parts (``COUNTED``); False leaves it to the direct check."""
    return target in COUNTED and applies(su.params) and proved(su, target)


def proved(su, target: str) -> bool:
    """H => target(t) in two parts (module comment), H the solver's assertions now; a
    counting target is also assumed at m in (2), after (1) proves it there."""
    from .epr_properties import UPROPS
    from .epr_queues import refutes

    held = list(su.solver.assertions())
    at_m = KEPT + ((target,) if target in COUNTED else ())
    if not all(kept(su, held, k) for k in at_m):
        return False
    insert_part = [*_base(su.u), *insert_facts(su, held), *[at_mid(su, k) for k in at_m]]
    return refutes(insert_part, PART_RLIMIT, UPROPS[target].fn(su.u, su.post))


def decide(su, target: str):
    """(z3 result, model or None) of the obligation on ``su.solver`` (its hypotheses
    added): unsat where both parts are proved, else sat with a finite counterexample,
    else unknown."""
    from .epr_properties import UPROPS
    from .forest import finite_model

    if proved(su, target):
        return z3.unsat, None
    model = finite_model([*su.solver.assertions(), z3.Not(UPROPS[target].fn(su.u, su.post))])
    return (z3.sat, model) if model is not None else (z3.unknown, None)


def pair_proved(ps, goal) -> bool:
    """rank_agreement's agree case (``goal``, a formula over the pair setup ``ps``) in two
    parts: (1) the pair's hypotheses => same(m, m'); (2) the axioms, the config, F_ins on
    both ranks and same(m, m') => goal."""
    from .epr_queues import refutes
    from .epr_rank_agreement import _copy_view, same

    su = ps.su
    if not applies(su.params):
        return False
    held = list(su.solver.assertions())
    m = su.params["room_mid"]
    kept = same(m, _copy_view(m, ps.rename))
    if not refutes(held, PART_RLIMIT, kept):
        return False
    mine = insert_facts(su, held)
    ids = {h.get_id() for h in held}
    theirs = [g for g in (ps.rename(f) for f in mine) if g.get_id() in ids]
    return refutes([*_base(su.u), *mine, *theirs, kept], PART_RLIMIT, goal)
