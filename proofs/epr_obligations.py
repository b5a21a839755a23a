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
from typing import Dict, List, NamedTuple

import z3

from .config import ProofConfig
from .epr_sched_evict import SPLIT, UNDECIDED_ON, excluded, parts
from .epr_actions import UACTIONS, effect
from .epr_counting import HYPOTHESES as COUNT_HYPOTHESES, TARGETS, counting_facts, exact
from .epr_frame import READS, frame
from .epr_properties import UHYPOTHESES, UINVARIANTS, UPROPS, device_leaves
from . import epr_drain, epr_href, epr_insert_room, epr_prefetch, epr_queues, limits
from . import cores
from .fresh_solver import solver as fresh_solver
from .epr_queues import covered as queues_covered
from .forest import Forest, PageSort, finite_model
from .paged import read_rank, symbolic, values_to_rank

# The config flag under which some of an action's obligations are proved here with it
# off only, and bounded with it on (proofs.audit): insert's UNDECIDED_ON targets
# (proofs.epr_sched_evict; every other obligation of insert and load_back is proved here
# for both values).
BOUNDED_UNDER: Dict[str, str] = {a: SPLIT[a] for a in UNDECIDED_ON}


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


# every action (load_back with the CP planner's victims and its own eviction, insert with
# its own eviction: proofs.epr_sched_evict)
COVERED_ACTIONS = tuple(UACTIONS)


# Obligations with no counterpart for any number of pages: with --unbounded they are
# still proved bounded (the bounded obligations rely on them) and the audit's summary
# line says they are not applicable for any pages, with this reason.
NOT_APPLICABLE = {
    "queues_bounded": "the bounded encoding's lists hold at most its page count of entries; the spec's queues "
                      "have no capacity, and that their entries are no more than the pages follows from the "
                      "queue invariants (disjoint entries, one prefetch per request), targets of their own"
}


def covered(target: str, action: str) -> bool:
    """Whether the obligation is proved for any number of pages: decided by the
    page-sorted encoding, a frame obligation (proofs.epr_frame), a queue-entry obligation
    (proofs.epr_queues), or rank_agreement over two ranks' views (proofs.epr_rank_agreement)."""
    from .epr_planner import covered as planner_covered
    from .epr_rank_agreement import covered as pair_covered

    return (action in COVERED_ACTIONS and target in UACTIONS[action].targets or frame(target, action)
            or queues_covered(target, action) or pair_covered(target, action) or epr_href.covered(target, action)
            or epr_prefetch.covered(target, action) or planner_covered(target, action))


class USetup(NamedTuple):
    u: UCtx
    pre: object
    post: object
    params: Dict
    solver: z3.Solver




def setup(action: str, variants=frozenset(), fix=None) -> USetup:
    cfg = ProofConfig.symbolic_config(variants, fix=fix or {})
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
    if target in epr_queues.UQPROPS:  # queue entries (proofs.epr_queues)
        return epr_queues.hypotheses(su)
    if target in epr_href.TARGETS or target in epr_prefetch.TARGETS:  # by page (proofs.epr_href, epr_prefetch)
        extra = [h(su.u, su.pre) for h in UHYPOTHESES.values()] if action in _QUEUE_ACTIONS else []
        mine = epr_href.hypotheses(su) if target in epr_href.TARGETS else epr_prefetch.hypotheses(su)
        return mine + extra
    out = [h(su.u, su.pre) for h in COUNT_HYPOTHESES.values()] if target in TARGETS else []
    out += epr_drain.hypotheses(su, target, action)  # the sync rounds' outcomes (proofs.epr_drain)
    if target in ("no_use_after_free", "counter_sanity") or action in _QUEUE_ACTIONS:
        return out + [h(su.u, su.pre) for h in UHYPOTHESES.values()]
    return out


def goal(su: USetup, target: str):
    if target in epr_queues.UQPROPS:
        return epr_queues.goal(su, target)
    if target in epr_href.TARGETS:
        return epr_href.goal(su, target)
    if target in epr_prefetch.TARGETS:
        return epr_prefetch.goal(su, target)
    p = UPROPS[target]
    if p.kind == "invariant":
        return p.fn(su.u, su.post)
    return p.fn(su.u, su.pre, su.post, su.params)


def check(su: USetup, target: str, action: str, rlimit: int = 0):
    """One obligation: (status, seconds, cti or None). Where model-based instantiation
    gives up, a finite counterexample is searched for directly (forest.finite_model).
    ``rlimit``: z3's resource limit of the direct check (0: limits.EPR_CHECK_RLIMIT);
    out of it with no counterexample found, the status is "inconclusive"."""
    t0 = time.perf_counter()
    sol = None  # the direct check's solver, where it runs
    su.solver.push()
    counted = target in TARGETS
    sized = counted or target in epr_href.TARGETS or target in epr_prefetch.TARGETS  # names set sizes
    if counted:
        su.solver.add(*counting_facts(su.u), *[UPROPS[n].fn(su.u, su.pre) for n in TARGETS])
    known = len(su.u.facts)
    su.solver.add(*hypotheses(su, target, action), *excluded(su.u, target, action))
    if target in epr_queues.UQPROPS:  # conjunct by conjunct (epr_queues.decide)
        res, model = epr_queues.decide(su, target)
    elif epr_insert_room.decides(su, target):  # insert's eviction, then the insert (proofs.epr_insert_room)
        res, model = epr_insert_room.decide(su, target)
    elif epr_insert_room.shortcut(su, target):  # a counting target, in two parts
        res, model = z3.unsat, None
    else:
        negated = z3.Not(goal(su, target))
        su.solver.add(*su.u.facts[known:], negated)  # facts the goal named (set sizes)
        asserted = list(su.solver.assertions())
        if cores.refuted(asserted, rlimit or limits.EPR_CHECK_RLIMIT):  # a stored core of this very query (proofs.cores)
            res, model = z3.unsat, None
        else:
            sol = fresh_solver(asserted, rlimit=rlimit or limits.EPR_CHECK_RLIMIT)  # not incremental
            res = sol.check()
            model = sol.model() if res == z3.sat else None
            if res == z3.unsat:
                cores.learn(asserted)
        if res == z3.unknown or (res == z3.sat and sized):
            # with set sizes, a model of the abstraction may give a size no finite set has:
            # the counterexample is searched for with every size exact (epr_counting.exact)
            # (from the formulas asserted, not the list z3 keeps after its preprocessing)
            model = finite_model(asserted, extra=exact(su.u) if sized else None)
            res = z3.sat if model is not None else z3.unknown
    cti = extract(su, model, target, action) if model is not None else None
    su.solver.pop()
    status = "proved" if res == z3.unsat else ("failed" if res == z3.sat else _undecided(sol))
    return status, time.perf_counter() - t0, cti


def _undecided(sol) -> str:
    """"inconclusive" where the direct check ran out of its resource limit, else "unknown"."""
    from .obligations import OUT_OF_LIMIT

    return "inconclusive" if sol is not None and sol.reason_unknown() in OUT_OF_LIMIT else "unknown"


def prove_action(action: str, targets=None, variants=frozenset(), fix=None):
    from .obligations import Result

    from .epr_planner import TARGET as PLANNER, covered as planner_covered, prove as prove_planner
    from .epr_rank_agreement import covered as pair_covered, prove as prove_pair

    targets = [t for t in dict.fromkeys(targets or (*UPROPS, *READS, PLANNER)) if covered(t, action)]
    planner = [t for t in targets if planner_covered(t, action)]  # the CP planner's (two views)
    pair = [t for t in targets if pair_covered(t, action) and t not in planner]  # two ranks' views
    targets = [t for t in targets if t not in pair and t not in planner]
    # frame obligations: the step writes nothing the target reads (epr_frame)
    # a target the action's encoding does not decide is covered as a frame obligation
    decided = UACTIONS[action].targets
    framed = [t for t in targets if t not in decided and frame(t, action)]
    out = [Result(t, action, "proved", 0.0, None, "any") for t in framed]
    out += [prove_pair(action, variants, fix) for _t in pair]
    targets = [t for t in targets if t not in framed]
    if not targets:
        return out + (prove_planner(action, planner, variants, fix) if planner else [])
    got: Dict[str, Result] = {}
    for part in parts(action, fix):  # its own eviction off, then on (epr_sched_evict.parts)
        t0 = time.perf_counter()
        su = setup(action, variants, {**(fix or {}), **part})
        build = (time.perf_counter() - t0) / max(1, len(targets))
        for t in targets:
            if t in got and (got[t].status != "proved" or t in UNDECIDED_ON.get(action, ())):
                continue  # failed already, or bounded with the option on (BOUNDED_UNDER)
            # the step's own eviction on: more quantifier rounds, a larger limit
            on = {**(fix or {}), **part}.get(SPLIT.get(action)) is True
            status, secs, cti = check(su, t, action, limits.EPR_EVICTS_RLIMIT if on else limits.EPR_CHECK_RLIMIT)
            secs += build + (got[t].seconds if t in got else 0.0)
            got[t] = Result(t, action, status, secs, cti, "any")
    # the planner's last: its symbols would rename the single-rank setups' (z3's effort
    # on some of them depends on the names)
    return out + list(got.values()) + (prove_planner(action, planner, variants, fix) if planner else [])


# --- counterexamples ----------------------------------------------------------------------


def extract(su: USetup, model, target: str, action: str, ranks=None) -> Dict:
    """The finite model as spec values: the forest (pages numbered as build_pages does,
    page p carrying token p + 1), one rank's pre- and post-state (``ranks``: several
    ranks' (pre view, post view, registry membership)), the step's node."""
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
    views = ranks or [(su.pre, su.post, su.params["dups"])]
    cfg = _config(SimpleNamespace(ctx=SimpleNamespace(cfg=su.u.cfg)), model, len(views), paths)
    m = Model(cfg)
    idx = {str(x): i for i, x in enumerate(order)}
    dups = [tuple(i for i, x in enumerate(order) if z3.is_true(model.eval(d(x), model_completion=True)))
            for _pre, _post, d in views]

    def state(when, with_dups):
        rs = [values_to_rank(read_rank(model, v[when], order)) for v in views]
        return State(ranks=tuple(r._replace(dups=d if with_dups else ()) for r, d in zip(rs, dups)),
                     store=(0,) * len(rs))

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
        "target": target, "action": action, "pages": "any", "config": _config_dict(cfg), "ranks": len(views),
        "forest": {"pages": len(order), "parent": list(parents)},
        "step": f"{a}" + (f" with {', '.join(f'{k}={v}' for k, v in choices.items())}" if choices else ""),
        "pre": render_state(m, state(0, True)), "post": render_state(m, state(1, True)),
        "explicit": {},
        **({"slots": {w: _slots(model, v, order, m) for w, v in (("pre", su.pre), ("post", su.post))}}
           if target == "slot_ownership" else {}),
        **({"queues": {w: _queues(model, v, order, m) for w, v in (("pre", su.pre), ("post", su.post))}}
           if target == "no_use_after_free" else {}),
        **({"entries": epr_queues.render(model, su, order, m)} if target in epr_queues.UQPROPS else {}),
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
        from .audit import forked_pool

        with forked_pool(workers) as pool:  # a fresh process per job (audit.forked_pool)
            parts = pool.map(_prove_job, jobs, chunksize=1)
    else:
        parts = [_prove_job(j) for j in jobs]
    return [r for part in parts for r in part]
