"""The unbounded encoding on concrete states: invariant values and admitted steps.

A spec state's rank is lifted onto a closed interpretation of the page sort (the
model's own forest, proofs.forest.Forest.closed), so every page quantifier ranges over
exactly the model's pages and z3 evaluates the quantified formulas. Used by
tests/proofs/test_proofs_unbounded.py to keep proofs.epr_properties in agreement with
spec/properties.py and the bounded encodings, and to check that each unbounded action
admits every explicit step (the over-approximation never loses a behaviour).
"""

from __future__ import annotations

from typing import Dict

import z3

from .config import ProofConfig
from .epr_actions import UACTIONS, effect
from .epr_obligations import UCtx, covered
from .epr_sched_evict import bind_short
from .epr_properties import UHYPOTHESES, UPROPS, device_leaves, holds_device_slot
from .forest import Forest, PageSort, SlotSort, forall, ground
from .epr_drain import bind as bind_round, drain_pages
from .paged import DRAIN_PAGES, NODE_FIELDS, QUEUE_PAGES, SCALAR_FIELDS, from_rank, queue_pages


def _lift(m, s, r, u, pages):
    return from_rank(s.ranks[r], s.store[r], pages, u.slot_consts, s.hung, s.halted, s.ranks[0],
                     {**queue_pages(m, s.ranks[r], r), **drain_pages(m, s, r)})


def _base(m):
    u = UCtx(ProofConfig.from_spec(m.cfg), Forest())
    pages, facts = u.forest.closed(m.pages.parent)
    u.pages = pages
    u.multi = z3.BoolVal(m.cfg.ranks > 1)
    # the device pool's slots as a closed sort (one constant if slots are not modelled)
    u.slots = m.cfg.slots
    u.slot_consts = [z3.Const(f"slot{i}!{id(u)}", SlotSort) for i in range(m.cfg.device_pages if m.cfg.slots else 1)]
    if len(u.slot_consts) > 1:
        facts.append(z3.Distinct(*u.slot_consts))
    first = [m.pages.tokens(p)[0] for p in range(len(pages))]
    lead = [u.lead(a, b) == (first[i] == first[j]) for i, a in enumerate(pages) for j, b in enumerate(pages)]
    return u, pages, facts[:1] + facts[2:] + u.forest.axioms() + lead  # facts[1]: the sort closed (ground does it)


def _registry(pages, dups):
    d = z3.Function(f"dups!{id(pages)}", PageSort, z3.BoolSort())
    return d, [d(c) == (i in dups) for i, c in enumerate(pages)]


def _all_hold(pages, facts, formulas: Dict, slots=(), extra=None) -> Dict[str, bool]:
    """Whether each formula follows from the facts over the closed sorts (``extra``: more
    closed sorts, as forest.ground takes them); the facts are grounded once for all."""
    sol = z3.Solver()
    sol.add(*ground(list(facts), pages, slots, extra))
    out = {}
    for n, f in formulas.items():
        sol.push()
        sol.add(*ground([z3.Not(f)], pages, slots, extra))
        res = sol.check()
        if res == z3.unknown:
            raise RuntimeError(f"z3 could not evaluate {n}: {sol.reason_unknown()}")
        out[n] = res == z3.unsat
        sol.pop()
    return out


def invariant_values(m, s, r: int, names=None) -> Dict[str, bool]:
    """Every unbounded invariant (or those named) on rank r of explicit state s."""
    u, pages, facts = _base(m)
    v, vf = _lift(m, s, r, u, pages)
    formulas = {n: p.fn(u, v) for n, p in UPROPS.items() if p.kind == "invariant"
                and (names is None or n in names) and (u.slots or n != "slot_ownership")}
    return _all_hold(pages, facts + vf + u.facts, formulas, u.slot_consts)  # u.facts: set sizes


def hypothesis_values(m, s, r: int) -> Dict[str, bool]:
    """The unbounded hypotheses that are consequences of bounded invariants
    (epr_properties.UHYPOTHESES) on rank r of explicit state s."""
    u, pages, facts = _base(m)
    v, vf = _lift(m, s, r, u, pages)
    return _all_hold(pages, facts + vf, {n: h(u, v) for n, h in UHYPOTHESES.items()}, u.slot_consts)


def same_view(u, a, b):
    """Equal as spec rank trees: cached pages and owners, live nodes' fields, marks, the
    pages under each queue."""
    def at(p):
        live = a.live(p)
        return z3.And(
            a.cached(p) == b.cached(p), z3.Implies(a.cached(p), a.own(p) == b.own(p)),
            z3.Implies(live, z3.And(*[getattr(a, f)(p) == getattr(b, f)(p) for f in NODE_FIELDS])),
            a.durable(p) == b.durable(p), a.store(p) == b.store(p),
            z3.Implies(z3.And(u.slots, holds_device_slot(a, p)), a.dslot(p) == b.dslot(p)),
            *[a.f[n](p) == b.f[n](p) for n in (*QUEUE_PAGES, "lanch", "runs", *DRAIN_PAGES)],
            z3.Implies(a.runs(p), a.rlock(p) == b.rlock(p)),
        )

    x = z3.Const(f"x!{id(a)}", SlotSort)
    return z3.And(forall(at), z3.ForAll([x], z3.Implies(u.slots, a.dfree(x) == b.dfree(x))),
                  *[a.f[n] == b.f[n] for n in SCALAR_FIELDS])


def step_setup(m, s, r, name: str):
    """(u, facts, pre view, params, post view) of action ``name`` on rank r of s."""
    u, pages, facts = _base(m)
    pre, pf = _lift(m, s, r, u, pages)
    params = UACTIONS[name].params(u)
    params["dups"], df = _registry(pages, set(s.ranks[r].dups))
    params["leaf"] = device_leaves(u, pre, "leaf")
    params["action"] = name
    post = effect(u, name, pre, params)
    return u, pages, facts + pf + df, pre, params, post


def admits(m, s, a, t, r: int) -> bool:
    """The unbounded encoding of a.name admits rank r's part of the explicit step s -a-> t."""
    u, pages, facts, pre, params, post = step_setup(m, s, r, a.name)
    target, tf = _lift(m, t, r, u, pages)
    bind = [params["node"] == pages[a["node"]]] if "node" in params else []
    if "req" in params and "req" in dict(a.params):  # (check_prefetch_progress names its op, not the request)
        bind.append(params["req"] == pages[m.pages.request_pages[a["req"]][-1]])
    sol = z3.Solver()
    sol.add(*ground([*facts, *u.facts, *tf, *bind, same_view(u, post, target)], pages, u.slot_consts))
    res = sol.check()
    if res == z3.unknown:
        raise RuntimeError(f"z3 could not decide: {sol.reason_unknown()}")
    return res == z3.sat


def _bind_held(m, s, a, params, pages) -> list:
    """The step's protected node (spec prefetch.held_during_step) as the explicit step has it."""
    if "held" not in params:
        return []
    from ..spec.prefetch import held_during_step

    held = held_during_step(m, s, a)
    return [params["has_anchor"] == (held >= 0)] + ([params["anchor"] == pages[held]] if held >= 0 else [])


def transition_values(m, s, a, t, r: int) -> Dict[str, bool]:
    """Every unbounded transition property on rank r of the explicit step s -a-> t."""
    u, pages, facts, pre, params, _post = step_setup(m, s, r, a.name)
    target, tf = _lift(m, t, r, u, pages)
    base = facts + u.facts + tf + _bind_held(m, s, a, params, pages) + bind_short(m, s, a, params) + bind_round(
        m, s, a, r, params, pages)
    return _all_hold(pages, base, {n: p.fn(u, pre, target, params) for n, p in UPROPS.items()
                                   if p.kind == "transition" and covered(n, a.name)}, u.slot_consts)
