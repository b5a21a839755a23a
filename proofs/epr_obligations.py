"""Unbounded-page obligations: Inv(s) /\\ step(s, s') => P(s') over the page sort.

The pre-state is one rank's view over an arbitrary forest (proofs.forest axioms, no
size bound); Inv is every invariant of proofs.epr_properties (a subset of the audit's
invariants, so a weaker hypothesis: a proof here is sound); the step is an
over-approximation of the spec's (proofs.epr_actions). The rank is arbitrary: every
property here is a statement about each rank alone, and what couples ranks is a free
choice of the step. z3 decides these formulas with model-based quantifier
instantiation; a satisfiable obligation has a finite model (the sort is uninterpreted),
printed as a counterexample to induction over a concrete forest.

``COVERED`` says which (target, action) obligations the unbounded encoding decides; the
audit (proofs.audit) proves those for forests of any size and the rest bounded.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Dict, List, NamedTuple, Optional

import z3

from .config import ProofConfig
# The config flag under which an action's encoding here is no over-approximation of the
# spec's (the scheduler's own eviction): proved with it off, bounded with it on (proofs.audit).
from .encode.scheduler_evict import EVICTING as BOUNDED_UNDER
from .epr_actions import UACTIONS, effect
from .epr_counting import HYPOTHESES as COUNT_HYPOTHESES, TARGETS, counting_facts, exact
from .epr_frame import READS, frame
from .epr_properties import UHYPOTHESES, UINVARIANTS, UPROPS, device_leaves
from .forest import Forest, PageSort, finite_model
from .paged import read_rank, symbolic, values_to_rank


class UCtx:
    def __init__(self, cfg, forest: Forest):
        self.cfg = cfg
        self.forest = forest
        self.facts: List = []
        # page_size > 1: lead(a, b), pages a and b begin with the same token (only
        # siblings can be told apart by it; see epr_actions.insert, page-ceil-match)
        self.lead = z3.Function("lead", PageSort, PageSort, z3.BoolSort())
        self.slots = True  # device slot identities (epr_actions.slot_step)
        self.multi = z3.Bool("multi")  # more than one rank (any number of ranks: free)


# load_back stays bounded: under cp_planner it evicts the planner's device victims, which
# the page-sorted load_back does not model (proofs/encode/cp_planner.py is bounded).
COVERED_ACTIONS = tuple(a for a in UACTIONS if a != "load_back")


def covered(target: str, action: str) -> bool:
    """Whether the obligation is proved for any number of pages: decided by the
    page-sorted encoding, or a frame obligation (proofs.epr_frame)."""
    return action in COVERED_ACTIONS and target in UACTIONS[action].targets or frame(target, action)


class USetup(NamedTuple):
    u: UCtx
    pre: object
    post: object
    params: Dict
    solver: z3.Solver




def setup(action: str, variants=frozenset(), fix=None) -> USetup:
    cfg = ProofConfig.symbolic_config(variants, fix={
        **({BOUNDED_UNDER[action]: False} if action in BOUNDED_UNDER else {}), **(fix or {})})
    u = UCtx(cfg, Forest())
    pre = symbolic("s")
    params = UACTIONS[action].params(u)
    params["dups"] = z3.Function("s.dups", PageSort, z3.BoolSort())  # duplicate registry membership
    params["leaf"] = device_leaves(u, pre, "s.leaf")
    params["action"] = action
    post = effect(u, action, pre, params)
    sol = z3.Solver()
    sol.add(*u.forest.axioms(), *[z3.BoolVal(x) if isinstance(x, bool) else x for x in cfg.constraints()])
    # the counting facts and invariants only where a counting target needs them (check)
    sol.add(*[UPROPS[n].fn(u, pre) for n in UINVARIANTS if n not in TARGETS])
    apart = {f.get_id() for f in counting_facts(u)}
    sol.add(*[f for f in u.facts if f.get_id() not in apart])
    return USetup(u, pre, post, params, sol)


# Where the queue_pages hypothesis is used (elsewhere it only costs instantiations; a
# hypothesis left out makes the obligation stronger, so this is sound either way).
_QUEUE_ACTIONS = ("writing_check", "loading_check", "check_prefetch_progress")


def hypotheses(su: USetup, target: str, action: str) -> list:
    out = [h(su.u, su.pre) for h in COUNT_HYPOTHESES.values()] if target in TARGETS else []
    if target in ("no_use_after_free", "counter_sanity") or action in _QUEUE_ACTIONS:
        return out + [h(su.u, su.pre) for h in UHYPOTHESES.values()]
    return out


def goal(su: USetup, target: str):
    p = UPROPS[target]
    if p.kind == "invariant":
        return p.fn(su.u, su.post)
    return p.fn(su.u, su.pre, su.post, su.params)


def check(su: USetup, target: str, action: str, timeout_ms: int = 30000):
    """One obligation: (status, seconds, cti or None). Where model-based instantiation
    gives up, a finite counterexample is searched for directly (forest.finite_model)."""
    t0 = time.perf_counter()
    su.solver.set("timeout", timeout_ms)
    su.solver.push()
    if target in TARGETS:
        su.solver.add(*counting_facts(su.u), *[UPROPS[n].fn(su.u, su.pre) for n in TARGETS])
    known = len(su.u.facts)
    su.solver.add(*hypotheses(su, target, action))
    negated = z3.Not(goal(su, target))
    su.solver.add(*su.u.facts[known:], negated)  # facts the goal named (set sizes)
    res = su.solver.check()
    model = su.solver.model() if res == z3.sat else None
    counted = target in TARGETS
    if res == z3.unknown or (res == z3.sat and counted):
        # with set sizes, a model of the abstraction may give a size no finite set has:
        # the counterexample is searched for with every size exact (epr_counting.exact)
        model = finite_model(list(su.solver.assertions()), extra=exact(su.u) if counted else None)
        res = z3.sat if model is not None else z3.unknown
    cti = extract(su, model, target, action) if model is not None else None
    su.solver.pop()
    status = "proved" if res == z3.unsat else ("failed" if res == z3.sat else "unknown")
    return status, time.perf_counter() - t0, cti


def prove_action(action: str, targets=None, variants=frozenset(), fix=None):
    from .obligations import Result

    targets = [t for t in dict.fromkeys(targets or (*UPROPS, *READS)) if covered(t, action)]
    # frame obligations: the step writes nothing the target reads (epr_frame)
    decided = UACTIONS[action].targets
    out = [Result(t, action, "proved", 0.0, None, "any") for t in targets if t not in decided]
    targets = [t for t in targets if t in decided]
    if not targets:
        return out
    t0 = time.perf_counter()
    su = setup(action, variants, fix)
    build = (time.perf_counter() - t0) / max(1, len(targets))
    for t in targets:
        status, secs, cti = check(su, t, action)
        out.append(Result(t, action, status, secs + build, cti, "any"))
    return out


# --- counterexamples ----------------------------------------------------------------------


def extract(su: USetup, model, target: str, action: str) -> Dict:
    """The finite model as spec values: the forest (pages numbered as build_pages does,
    page p carrying token p + 1), one rank's pre- and post-state, the step's node."""
    from ..spec.action import act
    from ..spec.model import Model
    from ..spec.state import State
    from .cti import _config, _config_dict, render_state
    from .universe import token_paths

    order, parents = su.u.forest.parent_array(model)
    is_true = lambda t: z3.is_true(model.eval(t, model_completion=True))
    lead = [next(j for j in range(len(order)) if j == i or (parents[j] == parents[i] and is_true(su.u.lead(order[j], x))))
            for i, x in enumerate(order)]
    paths = token_paths(list(parents), 2 if is_true(su.u.cfg.paged) else 1, lead)
    cfg = _config(SimpleNamespace(ctx=SimpleNamespace(cfg=su.u.cfg)), model, 1, paths)
    m = Model(cfg)
    idx = {str(x): i for i, x in enumerate(order)}
    dups = tuple(i for i, x in enumerate(order)
                 if z3.is_true(model.eval(su.params["dups"](x), model_completion=True)))

    def state(view, with_dups):
        rs = values_to_rank(read_rank(model, view, order))
        return State(ranks=(rs._replace(dups=dups if with_dups else ()),), store=(0,))

    params, choices = {}, {}
    for k, v in su.params.items():
        if isinstance(v, z3.ExprRef) and v.sort() == PageSort:  # a page: the spec's node/req, else named
            i = idx.get(str(model.eval(v, model_completion=True)), -1)
            if k in ("node", "req"):
                params[k] = i  # requests are the pages' paths in page order: req = its last page
            else:
                choices[k] = m.page_name(i) if i >= 0 else "?"
        elif isinstance(v, z3.BoolRef):
            choices[k] = z3.is_true(model.eval(v, model_completion=True))
    a = act(action, **params)
    return {
        "target": target, "action": action, "pages": "any", "config": _config_dict(cfg), "ranks": 1,
        "forest": {"pages": len(order), "parent": list(parents)},
        "step": f"{a}" + (f" with {', '.join(f'{k}={v}' for k, v in choices.items())}" if choices else ""),
        "pre": render_state(m, state(su.pre, True)), "post": render_state(m, state(su.post, True)),
        "explicit": {},
        **({"slots": {w: _slots(model, v, order, m) for w, v in (("pre", su.pre), ("post", su.post))}}
           if target == "slot_ownership" else {}),
        **({"queues": {w: _queues(model, v, order, m) for w, v in (("pre", su.pre), ("post", su.post))}}
           if target == "no_use_after_free" else {}),
    }


def _queues(model, view, order, m) -> Dict:
    """A finite model's copies in flight: the pages under each queue relation
    (paged.QUEUE_PAGES), whether the rank reads for storage, a read into freed slots."""
    from .paged import QUEUE_PAGES

    vals = read_rank(model, view, order)
    is_true = lambda t: z3.is_true(model.eval(t, model_completion=True))
    out = {n: [m.page_name(p) for p, x in enumerate(vals[n]) if x] for n in QUEUE_PAGES}
    return {**out, "reads": is_true(view.reads), "pfreed": is_true(view.pfreed)}


def _slots(model, view, order, m) -> Dict:
    """A finite model's device pool: each page holding a device copy and its slot, the
    free slots."""
    vals = read_rank(model, view, order)
    rs = values_to_rank(vals)
    return {"owner": {m.page_name(p): x for p, x in enumerate(rs.dslot) if x >= 0},
            "free": [i for i, f in enumerate(vals["dfree"]) if f]}


def _prove_job(args):
    action, variants = args
    return [r._replace(cti={k: v for k, v in r.cti.items() if not k.startswith("_")} if r.cti else None)
            for r in prove_action(action, variants=frozenset(variants))]


def prove_all(variants=(), workers: int = 2, actions=None) -> list:
    """Every covered obligation, over a process pool (one job per action)."""
    jobs = [(a, tuple(sorted(variants))) for a in (actions or COVERED_ACTIONS) if a in UACTIONS]
    if workers > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_prove_job, jobs, chunksize=1)
    else:
        parts = [_prove_job(j) for j in jobs]
    return [r for part in parts for r in part]
