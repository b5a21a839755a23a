"""Proof obligations: initiation and consecution of every invariant, per action.

For an action A and a target P (a spec property, a strengthening invariant, or the
queue bound), the obligation is

    Inv(s) /\\ Guard_A(s) /\\ s' = Effect_A(s)  =>  P(s')        (invariants)
    Inv(s) /\\ Guard_A(s) /\\ s' = Effect_A(s)  =>  P(s, A, s')   (transition properties)

where Inv is the conjunction of every invariant property and every strengthening
invariant. The state, the configuration (feature flags, capacities, targets) and the
page universe are symbolic: a proof covers every model with at most K pages, any number
of ranks and every counter value. A satisfiable obligation yields a counterexample to
induction (proofs.cti).
"""

from __future__ import annotations

import time
from typing import Dict, List, NamedTuple, Optional

import z3

from . import host_slots
from .config import ProofConfig
from .encode.host_slots import empty_set, full_set, on
from .encode.actions import ENCODINGS, step
from .encode.ctx import Ctx
from .encode.scheduler_evict import EVICTING
from .formula import Every, Fact, assume, holds
from .properties import PROPERTIES
from .protocol import PROTOCOL
from .ranks import SymbolicRanks
from .state import LISTS, RV, SState, symbolic_state
from .strengthen import STRENGTHENING
from .sym import SymList, and_, const, not_, or_
from .universe import Universe

BOUND = "queues_bounded"  # the encoding's own obligation: no bounded list overflows


class Result(NamedTuple):
    target: str
    action: str  # an action name, or "init"
    status: str  # "proved" | "failed" | "inconclusive" (out of z3's resource limit) | "unknown"
    seconds: float
    cti: Optional[dict] = None
    pages: str = ""  # "any" (proved for forests of every size) or the bound, e.g. "<=2"


def invariant_names() -> List[str]:
    return [n for n, p in PROPERTIES.items() if p.kind == "invariant"] + list(STRENGTHENING)


def targets_for(action: str) -> List[str]:
    props = [n for n, p in PROPERTIES.items() if action != "init" or p.kind == "invariant"]
    if action == "init":
        return props + list(STRENGTHENING)
    return props + list(PROTOCOL) + list(STRENGTHENING) + [BOUND]


def target_parts(ctx, s, name: str, post, action: str):
    if name in PROPERTIES:
        enc = PROPERTIES[name]
        if enc.kind == "invariant":
            return enc.fn(ctx, post)
        return enc.fn(ctx, s, action, post)
    if name in PROTOCOL:
        return PROTOCOL[name].fn(ctx, s, action, post)
    if name in STRENGTHENING:
        return STRENGTHENING[name].fn(ctx, post)
    if name == BOUND:
        return [Every(lambda h: not_(_overflow(post.rank(h))))]
    if name == host_slots.NAME:
        return host_slots.slot_ownership_host(ctx, post)
    raise KeyError(name)


def _overflow(rv: RV):
    return or_(*(getattr(rv, f).overflow for f in LISTS))


def inv_parts(ctx, s) -> list:
    parts = []
    for name in invariant_names():
        if name in PROPERTIES:
            parts += PROPERTIES[name].fn(ctx, s)
        else:
            parts += STRENGTHENING[name].fn(ctx, s)
    return parts + host_slots.slot_ownership_host(ctx, s)  # nothing unless ctx.cfg.slots


class Setup(NamedTuple):
    ctx: Ctx
    pre: SState
    post: object  # SState of the successor (or the initial state for "init")
    step: object
    solver: z3.Solver


def initial_state(ctx, space) -> SState:
    """initial_state: empty trees, full pools, empty queues, on every rank."""
    k, cfg = ctx.k, ctx.cfg
    slots = on(ctx)

    def empty(n_arity):
        return SymList(k, 0, [tuple(0 for _ in range(n_arity))] * k, False)

    def rank_fn(h):
        vals = dict(
            own=(-1,) * k, start=tuple(range(k)), dev=(0,) * k, host=(0,) * k, lock=(0,) * k,
            href=(0,) * k, hits=(0,) * k, lbp=(False,) * k, rel=(False,) * k,
            dev_free=cfg.device_pages, host_free=cfg.host_pages,
            durable=(False,) * k, store=(False,) * k, run=(-1,) * k,
            wdone=0, ldone=0, relq_n=0, relq_sum=0, mismatch=0, closed=False,
        )
        for f, a in LISTS.items():
            vals[f] = empty(a + (k if slots and f == "pq" else 0))
        if slots:
            vals.update(hslot=(-1,) * k, hfree=full_set(cfg.host_pages), rset=empty_set(), hok=True)
        return RV(**vals)

    return SState(space, rank_fn, 0, 0)


CASES = ("agree", "diverged")


def setup(action: str, variants=frozenset(), k: int = 3, fix=None, case: str = "agree") -> Setup:
    """The encoding of one action's obligations, for one case of the pre-state:
    "agree": the replicas are identical (encoded by sharing rank 0's replicated fields);
    "diverged": they differ, which rank_agreement allows only in a multi-rank state that
    is neither halted nor hung and whose next digest check is bound to fire. Together
    the two cases cover every state that satisfies the invariants."""
    cfg = ProofConfig.symbolic_config(variants, fix=fix)
    uni = Universe.symbolic_universe(k)
    space = SymbolicRanks()
    ctx = Ctx(cfg, uni, space)
    ctx.lemmas = True  # proved consensus lemmas stand in for wire arithmetic (encode.storage_path)
    ctx.replicas_agree = case == "agree"
    pre = symbolic_state(space, k, "s", shared=(case == "agree"), slots=cfg.slots)
    sol = z3.Solver()
    base = list(uni.constraints()) + cfg.constraints()
    if action == "init":
        post = initial_state(ctx, space)
        st = None
    else:
        base += assume(space, inv_parts(ctx, pre), lazy=True)
        if case == "diverged":
            from .case_vacuity import diverged_premise

            base += diverged_premise(ctx, pre)
        st = step(ctx, pre, action)
        post = st.post
        base.append(st.guard)
    base += ctx.side
    sol.add(*[const(x) for x in base])
    return Setup(ctx, pre, post, st, sol)


# z3 resource limits (``rlimit``) of the bounded checks, per solver call: deterministic,
# so a verdict does not depend on the machine's load as the wall-clock timeouts that
# they replace (60 s a target, 120 s a batch) did. z3 spends about 1.5-2 million a
# CPU-second; the limits are those timeouts at 2 million a second. A call that runs out
# is tried again with the next seed of ``SEEDS`` (z3's instantiation depends on the
# term order and the seed); out of every seed, the result is "inconclusive".
TARGET_RLIMIT = 120_000_000
BATCH_RLIMIT = 240_000_000
SEEDS = (0, 1, 2)
NO_TIMEOUT = 4294967295  # z3's default: no wall-clock limit
OUT_OF_LIMIT = ("max. resource limit exceeded", "canceled")


def _check(sol: z3.Solver, lit, rlimit: int, seeds=SEEDS):
    """sol.check(lit) under ``rlimit`` per try, the next seed after a try ran out of it."""
    sol.set("timeout", NO_TIMEOUT)
    sol.set("rlimit", rlimit)
    try:
        for seed in seeds:
            sol.set("random_seed", seed)
            res = sol.check(lit)
            if res != z3.unknown or sol.reason_unknown() not in OUT_OF_LIMIT:
                return res
        return res
    finally:
        sol.set("rlimit", 0)  # 0: none
        sol.set("random_seed", 0)


def status_of(res, sol: z3.Solver) -> str:
    if res == z3.unsat:
        return "proved"
    if res == z3.sat:
        return "failed"
    return "inconclusive" if sol.reason_unknown() in OUT_OF_LIMIT else "unknown"


def solve(su: Setup, lit, principal, rlimit: int, complete: bool = True, seeds=SEEDS):
    """check(lit) with lazy instantiation: rank facts start out instantiated at the
    ``principal`` rank constants only; a model that violates an instance not yet
    asserted gets it added, until the solver says unsat (proved: instances are sound
    consequences) or finds a model of every instance (a real counterexample, by the
    Herbrand argument in proofs.ranks). Returns (result, model or None)."""
    space = su.ctx.space
    ids = {c.get_id() for c in principal}
    idx = {j for j, c in enumerate(space.consts) if c.get_id() in ids}
    su.solver.add(*[const(x) for x in space.instances(lambda i, j: (j in idx) if isinstance(j, int) else (j[0] in idx and j[1] in idx))])
    # Witnesses of "for all ranks" definitions carry no invariant instances in the first
    # phase (a rank that lacks host room needs no invariant to be one); the second phase
    # (complete) adds whatever a model still violates, so a final sat is a real CTI.
    skip_all = lambda j: str(space.consts[j]).startswith("wall!")
    phase_skip = skip_all
    while True:
        res = _check(su.solver, lit, rlimit, seeds)
        if res != z3.sat:
            return res, None
        model = su.solver.model()
        more = space.missing(model, skip=phase_skip)
        if not more and phase_skip is not None and complete:
            phase_skip = None
            more = space.missing(model)
        if not more:
            return res, model
        su.solver.add(*[const(x) for x in more])


def _principal(su: Setup, goal_ranks):
    space = su.ctx.space
    out = [space.r0] + list(goal_ranks)
    if su.step is not None:
        out += [v for k, v in su.step.params.items() if k == "rank" and not callable(v)]
    return out


def check_target(su: Setup, target: str, action: str, want_cti=True, rlimit=None) -> Result:
    """One obligation. Everything the goal adds (its skolem ranks and the instances at
    them) is a conservative extension, so it stays; only the negated goal is guarded by
    a fresh literal passed as an assumption."""
    t0 = time.perf_counter()
    ctx, space = su.ctx, su.ctx.space
    n_side = len(ctx.side)
    n_consts = len(space.consts)
    goal = holds(space, target_parts(ctx, su.pre, target, su.post, action))
    lit = z3.Bool(f"goal!{target}!{action}!{n_consts}")
    su.solver.add(*[const(x) for x in ctx.side[n_side:]])
    su.solver.add(z3.Implies(lit, const(not_(goal))))
    res, model = solve(su, lit, _principal(su, space.consts[n_consts:]), rlimit or TARGET_RLIMIT)
    cti = None
    if res == z3.sat and want_cti:
        from .cti import extract

        cti = extract(su, model, target, action)
    status = status_of(res, su.solver)
    return Result(target, action, status, time.perf_counter() - t0, cti)


def _has_pairs(su, target, action) -> bool:
    from .formula import Pairs

    cp = su.ctx.space.checkpoint()
    n_side = len(su.ctx.side)
    try:
        return any(isinstance(p, Pairs) for p in target_parts(su.ctx, su.pre, target, su.post, action))
    finally:
        su.ctx.space.restore(cp)
        del su.ctx.side[n_side:]


def _combined(ctx, s, post, targets, action):
    """All targets as one formula: the per-rank parts of every target under a single
    rank quantifier (one skolem rank for the whole batch), closed parts alongside."""
    every, closed = {}, {}
    for t in targets:
        parts = target_parts(ctx, s, t, post, action)
        every[t] = [p.fn for p in parts if isinstance(p, Every)]
        closed[t] = [p.b for p in parts if not isinstance(p, Every)]
        if any(not isinstance(p, (Every, Fact)) for p in parts):
            raise TypeError(f"{t}: only rank-wise and closed parts can be batched")
    return every, closed


def check_batch(su: Setup, targets, action: str, rlimit=None):
    """Try to discharge several targets with one solver call. Returns (proved targets,
    failed results with CTIs, unknown targets, seconds)."""
    t0 = time.perf_counter()
    ctx, space = su.ctx, su.ctx.space
    every, closed = _combined(ctx, su.pre, su.post, targets, action)
    n_side = len(ctx.side)
    g = space.fresh("goal")
    per = {t: and_(*(fn(g) for fn in every[t]), *closed[t]) for t in targets}
    lit = z3.Bool(f"batch!{action}!{len(targets)}!{len(space.consts)}")
    su.solver.add(*[const(x) for x in ctx.side[n_side:]])
    su.solver.add(z3.Implies(lit, const(not_(and_(*per.values())))))
    res, model = solve(su, lit, _principal(su, [g]), rlimit or BATCH_RLIMIT, seeds=SEEDS[:1])  # unknown: split
    secs = time.perf_counter() - t0
    if res == z3.unsat:
        return list(targets), [], [], secs
    if res != z3.sat:
        return [], [], list(targets), secs
    failed = [t for t in targets if z3.is_false(model.eval(const(per[t]), model_completion=True))]
    return [], failed, [t for t in targets if t not in failed], secs


def prove_action(action: str, targets=None, variants=frozenset(), k: int = 3, fix=None, want_cti=True,
                 separate=False, cases=CASES) -> List[Result]:
    """Every obligation of one action, in both cases of the pre-state (see ``setup``):
    a target is proved when it is proved in each case. Batched (default): the targets
    are checked together and only a failing batch is split; each result's seconds are
    its share of the solver calls that decided it (the encoding's build included)."""
    targets = list(targets or targets_for(action))
    merged: Dict[str, Result] = {}
    for case, fixed in _split(action, cases if action != "init" else ("agree",), fix):
        for r in _prove_case(action, targets, variants, k, fixed, want_cti, separate, case):
            old = merged.get(r.target)
            if old is None:
                merged[r.target] = r
            else:
                worse = old if old.status != "proved" else r
                merged[r.target] = worse._replace(seconds=old.seconds + r.seconds)
    return [merged[t] for t in targets]


# An action whose own eviction a flag switches on (encode/scheduler_evict.py): its
# obligations are proved for each value of the flag apart, so that with the flag off
# they cost what they did before it (the eviction's terms are not built at all); with
# it on, for write_back and the other policies apart (only write_back stages a victim,
# through an agreed host allocation per round of the eviction), and under write_back
# with and without duplicate reclaim (the allocation's two reclaim passes per round).
SPLIT_FLAGS = EVICTING


def _split(action, cases, fix):
    """(case, fix) pairs that together cover every configuration ``fix`` allows."""
    flag = SPLIT_FLAGS.get(action)
    if flag is None:
        return [(c, fix) for c in cases]
    fixes = [{**(fix or {}), flag: v} for v in ([fix[flag]] if flag in (fix or {}) else [False, True])]
    fixes = [g for f in fixes for g in _refine(f, "wb", f[flag])]
    fixes = [g for f in fixes for g in _refine(f, "dupr", f[flag] and f.get("wb") is True)]
    asked = set(fix or {})
    fixes = [f for f in fixes if not (f[flag] and undecided(f) and not asked >= set(UNDECIDED_PART))]
    return [(c, f) for f in fixes for c in cases]


# The part of an evicting action's configurations that z3 does not decide within the
# audit's time limits: the eviction under write_back with duplicate reclaim (the agreed
# host allocation's two reclaim passes in every round). Proved only when a caller names
# it in ``fix`` (tests/proofs/test_proofs_scheduler_evicts.py, -m slow); the audit leaves
# it out and says so (UNDECIDED_NOTE, docs/proofs.md).
UNDECIDED_PART = {"wb": True, "dupr": True}
UNDECIDED_NOTE = ("not in the audit: the bounded obligations of insert_evicts / load_back_evicts under write_back "
                  "with duplicate reclaim (z3 does not decide them in time; those proved for any pages cover it), and "
                  "release_safety there (page-sorted CTIs judged on the step's first leaves, not replayed; docs/proofs.md)")


def undecided(fix) -> bool:
    return all(fix.get(k) == v for k, v in UNDECIDED_PART.items())


def _refine(fix, name, when):
    """``fix`` once per value of flag ``name`` where ``when`` and it is not fixed yet."""
    return [{**fix, name: v} for v in (False, True)] if when and name not in fix else [fix]


def _prove_case(action, targets, variants, k, fix, want_cti, separate, case) -> List[Result]:
    t0 = time.perf_counter()
    from .case_vacuity import vacuous

    if vacuous(action, case, variants, k, fix):  # the step never runs in this case
        secs = (time.perf_counter() - t0) / max(1, len(targets))
        return [Result(t, action, "proved", secs) for t in targets]
    su = setup(action, variants, k, fix, case)
    build = time.perf_counter() - t0
    if separate:
        out = [check_target(su, t, action, want_cti) for t in targets]
        return [r._replace(seconds=r.seconds + build / len(out)) for r in out]
    results: Dict[str, Result] = {}
    solo = [t for t in targets if _has_pairs(su, t, action)]
    for t in solo:  # pairwise targets have no batched form
        r = check_target(su, t, action, want_cti)
        results[t] = r._replace(seconds=r.seconds + build / len(targets))
    targets_b = [t for t in targets if t not in solo]
    pending = [targets_b] if targets_b else []
    spent = {t: build / len(targets) for t in targets_b}
    while pending:
        batch = pending.pop()
        proved, failed, unknown, secs = check_batch(su, batch, action)
        for t in batch:
            spent[t] += secs / len(batch)
        for t in proved:
            results[t] = Result(t, action, "proved", spent[t])
        for t in failed:  # a real failure: get its own counterexample
            r = check_target(su, t, action, want_cti)
            results[t] = r._replace(seconds=spent[t] + r.seconds)
        if unknown and failed:
            pending.append(unknown)  # decided nothing about these yet: try again
        elif unknown:
            for t in unknown:
                # a fresh encoding each: the batch's solver, after running out, stays
                # stuck (revoke-frees-in-flight's no_use_after_free under prefetch_revoke:
                # inconclusive there, a CTI in 4 s alone)
                r = check_target(setup(action, variants, k, fix, case), t, action, want_cti)
                results[t] = r._replace(seconds=spent[t] + r.seconds)
    return [results[t] for t in targets]


ACTION_NAMES = ["init"] + [a.name for a in ENCODINGS]
