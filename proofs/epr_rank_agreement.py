"""rank_agreement for any number of pages: two ranks' views of one page forest.

The page-sorted obligations (proofs.epr_obligations) are about one rank with its peers'
influence free, which says nothing about whether two replicas stay identical. Here the
pre-state is two views of the same forest, ranks r and r' (any two ranks of any number:
rank_agreement compares every rank with the first, i.e. every pair), whose replicated
fields are the same functions (the replicas agree: spec/properties.py ``replica``) and
whose per-rank fields (durable marks, the store, device slot identities, how far each
rank's copies have finished, the registry, the plan) are separate. The step is the
page-sorted encoding (proofs.epr_actions) applied to each view. Its free choices are of
two kinds:

- made by the spec from replicated state or from a collective outcome (the evicted node,
  the request, the agreed allocation's outcome, whether evict_host ran, the LRU victims
  under the replicated order, the staged nodes, a split's backup count, lock counts):
  one choice, shared by both ranks and constrained by both views (the spec's choice
  satisfies both); ``SHARED`` lists them by name;
- made from per-rank data (duplicate reclaim reads the rank's own registry, and under
  the variants that break agreement the LRU clock or the per-rank allocation): one
  choice per rank. Every symbol the encoding creates that is not listed in ``SHARED``
  (its intermediate states, definitions, witnesses, slot steps, per-rank choices) gets
  a copy per rank, so a name missing from ``SHARED`` only makes the proof harder.

The obligation (the agree case): Inv(r) /\\ Inv(r') /\\ step(r) /\\ step(r') => the post
replicas agree or the difference is excused: the state halted or hung, or (write_back
with duplicate reclaim) the ranks reclaimed different duplicates in this step, so their
victim digests differ and the next ready-count round halts (the pre-state's digests are
empty: a replicated step waits for a due round). The diverged case (replicas differ
while a digest check is bound to fire) is empty for a replicated step whatever the
number of pages (proofs/case_vacuity.py: the round is due, so the step waits), a sync
round ends it excused (it halts on the digest comparison or leaves the digests alone:
case_vacuity.diverged_excused), and init has none.

What "agree" compares (``same``): every replicated page field (cached, owner, the node
fields by end page: start, tier states, lock, host_ref_counter, hits, load-back and
release marks), the pages under the replicated queues (a D->H copy finished or not:
wq; the same for H->D: lq; prefetch anchors: pq) and the replicated scalars (fail-closed
flag, the release queue's entries and pages). Not compared, as in the bounded replica:
the LRU order; and here also the free counters, which slot_conservation (an invariant
of the audit, proved bounded) equates with sums over the compared tree and queues, and
the order and count of queue entries, which the page relations do not hold.

tests/proofs/test_proofs_rank_agreement.py checks ``same`` has the spec's value on
reachable states of multi-rank models and that each rank-divergence variant fails.
"""

from __future__ import annotations

import time
from typing import Dict, List, NamedTuple

import z3

from .epr_properties import b_
from .epr_room_pair import PER_RANK_UNDER as ROOM_PER_RANK, SHARED as ROOM_SHARED
from .forest import PageSort, SlotSort, forall
from .paged import SLOT_FIELDS

# Actions whose rank_agreement is proved here: init, the replicated steps (their diverged
# case is empty) and the sync rounds whose diverged case ends excused; load_back's is
# proved with the planner's (proofs.epr_planner), on the pair setups made here.
PAIR_ACTIONS = ("init", "insert", "evict", "prefetch_from_storage", "prefetch_revoke", "lock_request",
                "unlock_request", "writing_check", "loading_check", "check_prefetch_progress",
                "drain_storage_control_queues")
TARGET = "rank_agreement"

REPLICATED_PAGE = ("cached", "own", "start", "dev", "host", "lock", "href", "hits", "lbp", "rel", "anchored")
NODE = ("start", "dev", "host", "lock", "href", "hits", "lbp", "rel")
REPLICATED_SCALARS = ("closed", "relq_n", "relq_sum", "hung", "halted", "r0_closed", "r0_mismatch", "r0_relq_n",
                      "r0_relq_sum")
# queue relations whose union is a replicated list (wq, lq; which part is done is per rank)
UNIONS = (("wfly", "wdn"), ("lfly", "ldn"))

# Choices the spec makes from replicated state or a collective outcome (by the name the
# encoding gives them, before the "!"): shared by the two ranks. ``PER_RANK_UNDER``: the
# variants under which one of them is made from per-rank data instead.
SHARED = ("node", "req", "anchor", "has_anchor", "write_path", "alloc_ok", "host_evict", "lru", "staged",
          "split_href", "ceil_sibling", "last", "locked.lock", "unlocked.lock",
          # the sync rounds: the entries committed (the first MIN-over-ranks ones), the
          # prefetch checked and its fetched pages (the vote's MIN), what the round
          # writes to the state (hung, halted) and to the replicated release queue
          "committed", "loaded", "first", "has_fetch", "anchor_shared",
          "commit.hung", "commit.halted", "loaded.halted", "check.hung", "check.relq_n", "check.relq_sum",
          "check.r0_relq_n", "check.r0_relq_sum",
          # the drain round: the references after the first MIN-over-ranks acks of the
          # replicated sq and the retired prefetches of the replicated pq; the released
          # mirrors (each rank's committable entries, released only when every rank's
          # (count, tokens, digest) agree, which means the same entries under
          # proofs.epr_drain's assumption: the plan digest an ideal hash,
          # consensus.plan_digest_injective; and kept by the live re-check, acks only
          # dropping references); the round's collective outcomes (proofs.epr_drain
          # drain_params: the digest comparison's halt, any rank closed, any rank holding
          # a plan, the triples agreeing, the all-reduce passing), which the replicated
          # scalars it writes (fail-close, mismatch count, release queue) are computed from
          "drain.href", "released", "still_anchored", "drain_halt", "drain_any_closed", "drain_any_plan",
          "drain_agree", "drain_passes") + ROOM_SHARED  # make_room's outcome (proofs.epr_room_pair)
# release-no-consensus releases each rank's own plan at once; durable-evicted-while-planned
# marks first, so the live re-check reads each rank's marks
PER_RANK_UNDER = {"lru": ("lru-local-clock",), "staged": ("partial-backup-leak",),
                  "host_evict": ("partial-backup-leak",),
                  "released": ("release-no-consensus", "durable-evicted-while-planned"), **ROOM_PER_RANK}
RECLAIM = ("reclaim1", "reclaim2")  # evict_host's duplicate reclaim (per rank)
# Choices each rank makes on its own view whose agreement is derived, never assumed: the
# CP planner's victims and whether it runs (proofs/epr_planner.py: the plan is a
# function of its inputs, and the inputs are shown equal)
OWN_VIEW = ("planned", "lane_short")


def covered(target: str, action: str) -> bool:
    return target == TARGET and action in PAIR_ACTIONS


def _decls(exprs) -> Dict[str, z3.FuncDeclRef]:
    """The uninterpreted symbols (functions and constants) of the formulas, by name."""
    seen, out, stack = set(), {}, list(exprs)
    while stack:
        x = stack.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        if z3.is_quantifier(x):
            stack.append(x.body())
        elif z3.is_app(x):
            d = x.decl()
            if d.kind() == z3.Z3_OP_UNINTERPRETED:
                out[d.name()] = d
            stack.extend(x.children())
    return out


def _per_rank_source(name: str, variants) -> bool:
    """A symbol that holds or chooses per-rank data: a per-rank field of the pre-state or
    of a step's free update (``<step>.<field>!n``), the registry membership, duplicate
    reclaim, and the choices a variant makes per rank."""
    from .paged import PAGE_FIELDS, SCALAR_FIELDS

    field = name[2:] if name.startswith("s.") else name.split("!")[0].rsplit(".", 1)[-1]
    if (name.startswith("s.") or "." in name.split("!")[0]) and field in (*PAGE_FIELDS, *SCALAR_FIELDS, *SLOT_FIELDS):
        return field not in REPLICATED_PAGE and field not in REPLICATED_SCALARS
    stem = name.split("!")[0]
    return name == "s.dups" or stem in RECLAIM or stem in OWN_VIEW or any(v in variants for v in PER_RANK_UNDER.get(stem, ()))


def per_rank_symbols(facts, uses, variants) -> set:
    """The symbols rank r' needs its own copy of: the per-rank sources, and every symbol
    the encoding introduces (first mentions, in the order the facts were made) in a fact
    that mentions a per-rank symbol, except the choices in ``SHARED``. The rest (what the
    step defines, chooses or witnesses from replicated data alone) is one symbol for both
    ranks: its facts are the same on both. ``uses``: terms that constrain nothing (the
    post-state's fields), searched for sources only."""
    per_fact = [set(_decls([f])) for f in facts]
    names = set(_decls(uses)).union(*per_fact)
    tainted = {n for n in names if _per_rank_source(n, variants)}
    # a choice no fact constrains (a field the step changes in ways the view does not
    # follow): nothing says it comes from replicated data, so per rank unless SHARED
    constrained = set().union(*per_fact)
    tainted |= {n for n in names - constrained if "!" in n and n.split("!")[0] not in SHARED}
    seen = set()
    for syms in per_fact:
        new = syms - seen
        seen |= syms
        if syms & tainted:
            tainted |= {n for n in new if "!" in n and n.split("!")[0] not in SHARED}
    return tainted


class PairSetup(NamedTuple):
    su: object  # epr_obligations.USetup of rank r
    pre2: object
    post2: object
    rename: callable  # a formula over rank r's symbols -> the same over rank r''s
    subs: list  # (rank r's symbol, rank r''s as a term over de Bruijn variables)
    reclaim: List  # (rank r's reclaim choice, rank r''s)


def _copy_view(v, rename):
    from .paged import Paged

    fields = {}
    for n, f in v.f.items():
        if isinstance(f, z3.ExprRef):
            fields[n] = rename(f)
        else:
            fields[n] = (lambda f: lambda *xs: rename(f(*xs)))(f)
    return Paged(fields)


def setup(action: str, variants=frozenset(), fix=None) -> PairSetup:
    from .epr_obligations import _QUEUE_ACTIONS as QUEUE_ACTIONS, setup as usetup
    from .epr_properties import UHYPOTHESES

    su = usetup(action, variants, fix)
    pre, post = su.pre, su.post
    if action in QUEUE_ACTIONS:  # queue_pages (epr_obligations.hypotheses), on both ranks
        su.solver.add(*[h(su.u, pre) for h in UHYPOTHESES.values()])
    probe = {s: z3.Const(f"probe!{s}", s) for s in (PageSort, SlotSort)}
    at = lambda n, f: f if isinstance(f, z3.ExprRef) else f(probe[SlotSort if n in SLOT_FIELDS else PageSort])
    facts = list(su.solver.assertions())
    uses = [at(n, f) for v in (pre, post) for n, f in v.f.items()]
    decls = _decls(facts + uses)
    mine = per_rank_symbols(facts, uses, variants)
    subs = []
    for name, d in decls.items():
        if name in mine:
            twin = z3.Function(name + "'", *[d.domain(i) for i in range(d.arity())], d.range())
            subs.append((d, twin(*[z3.Var(i, d.domain(i)) for i in range(d.arity())])))
    rename = (lambda e: z3.substitute_funs(e, *subs)) if subs else (lambda e: e)
    # rank r's facts (its step, its invariants) as rank r''s: the forest axioms and the
    # configuration's constraints come out unchanged
    copies = [(a, rename(a)) for a in su.solver.assertions()]
    su.solver.add(*[b for a, b in copies if not a.eq(b)])
    pre2, post2 = _copy_view(pre, rename), _copy_view(post, rename)
    # the replicated queues: which pages are under wq / lq is the same on both ranks
    su.solver.add(*[forall(lambda p, a=a, b=b: z3.Or(pre.f[a](p), pre.f[b](p)) == z3.Or(pre2.f[a](p), pre2.f[b](p)))
                    for a, b in UNIONS])
    reclaim = [(d, _renamed(d, subs)) for name, d in decls.items() if name.split("!")[0] in RECLAIM]
    ps = PairSetup(su, pre2, post2, rename, subs, reclaim)
    from .epr_planner import pair_facts

    su.solver.add(*pair_facts(ps, variants))  # the CP planner's plans (load_back)
    return ps


def rename_decl(ps_or_subs, d):
    """Rank r''s copy of rank r's symbol ``d`` (itself when it is shared)."""
    subs = ps_or_subs.subs if isinstance(ps_or_subs, PairSetup) else ps_or_subs
    return _renamed(d, subs)


def _renamed(d, subs):
    for old, new in subs:
        if old.eq(d):
            return new.decl()
    return d


def same(a, b):
    """The two views' replicas agree (what this encoding holds of spec ``replica``)."""
    def page(p):
        live = z3.And(a.cached(p), a.own(p) == p)
        return z3.And(a.cached(p) == b.cached(p), z3.Implies(a.cached(p), a.own(p) == b.own(p)),
                      z3.Implies(live, z3.And(*[a.f[n](p) == b.f[n](p) for n in NODE])),
                      a.anchored(p) == b.anchored(p),
                      *[z3.Or(a.f[x](p), a.f[y](p)) == z3.Or(b.f[x](p), b.f[y](p)) for x, y in UNIONS])

    scalars = [a.f[n] == b.f[n] for n in ("closed", "relq_n", "relq_sum")]
    return z3.And(forall(page), *scalars)


def excused(ps: PairSetup):
    """The post-state's excuse: halted or hung, or the reclaim digests now differ and
    the next round checks them (spec/sync.py digest_check_will_fire; the overflowing
    wire comparison is not relied on)."""
    u, post = ps.su.u, ps.su.post
    out = [post.halted != 0, post.hung != 0]
    cfg = u.cfg
    if ps.reclaim and not cfg.has("digest-unchecked") and not cfg.has("negated-pair-overflow"):
        took = lambda i, x: z3.Or(*[pair[i](x) for pair in ps.reclaim])
        x = z3.Const("reclaim_differs!pair", PageSort)
        out.append(z3.And(b_(cfg.wb), b_(cfg.dupr), z3.Exists([x], took(0, x) != took(1, x))))
    return z3.Or(*out)


def goal(ps: PairSetup):
    return z3.Or(excused(ps), same(ps.su.post, ps.post2))


# z3's resource limit for the agree case (deterministic, unlike a wall-clock timeout):
# the costliest proof (insert) takes about 3.3 million; a failing obligation that
# model-based instantiation does not settle within it goes to the finite-model search.
RLIMIT = 10_000_000


def check(ps: PairSetup, action: str, rlimit: int = RLIMIT, target=goal):
    """(status, seconds, model or None) of the agree case (``target``: the goal, a
    function of the setup)."""
    from .forest import finite_model

    t0 = time.perf_counter()
    sol = ps.su.solver
    sol.set("rlimit", rlimit)
    sol.push()
    sol.add(z3.Not(target(ps)))
    res = sol.check()
    model = sol.model() if res == z3.sat else None
    if res == z3.unknown:
        model = finite_model(list(sol.assertions()))
        res = z3.sat if model is not None else res
    sol.pop()
    status = "proved" if res == z3.unsat else ("failed" if res == z3.sat else "unknown")
    return status, time.perf_counter() - t0, model


def prove(action: str, variants=frozenset(), fix=None, ps=None):
    """rank_agreement under ``action`` for any number of pages and ranks: the agree case
    here, the diverged case empty (case_vacuity; init has none). Insert and load_back
    in two parts, their own eviction off and on (proofs.epr_room_pair; insert's with it
    on through the view after the eviction, proofs.epr_insert_room); a part that fails
    ends it. ``ps``: a pair setup of ``action`` under ``fix`` already built
    (proofs.epr_planner)."""
    from .audit import _merge
    from .epr_sched_evict import SPLIT, UNDECIDED_ON, parts

    bounded = {SPLIT.get(action): True} if TARGET in UNDECIDED_ON.get(action, ()) else {}  # the audit's bounded part
    out = None
    for part in [{}] if ps is not None else [p for p in parts(action, fix) if not p.items() & bounded.items()]:
        r = _prove_part(action, variants, {**(fix or {}), **part}, ps)
        out = r if out is None else _merge(out, r)
        if out.status == "failed":
            break
    return out


def _prove_part(action: str, variants, fix, ps):
    from .case_vacuity import diverged_excused, vacuous

    t0 = time.perf_counter()
    if action != "init" and not (vacuous(action, "diverged", variants, fix=fix)
                                 or diverged_excused(action, variants, fix=fix)):
        from .obligations import Result

        return Result(TARGET, action, "unknown", time.perf_counter() - t0, None, "any")
    return decide(ps or setup(action, variants, fix), action, TARGET, goal, t0)


def decide(ps: PairSetup, action: str, target: str, goal_fn, t0: float):
    """One two-view obligation's Result: proved, or failed with a two-rank CTI."""
    from .epr_insert_room import pair_proved
    from .epr_obligations import extract
    from .obligations import Result

    if pair_proved(ps, goal_fn(ps)):  # insert's eviction, then the insert (proofs.epr_insert_room)
        return Result(target, action, "proved", time.perf_counter() - t0, None, "any")
    status, _secs, model = check(ps, action, target=goal_fn)
    cti = None
    if model is not None:
        dups = ps.su.params["dups"]
        views = [(ps.su.pre, ps.su.post, dups), (ps.pre2, ps.post2, rename_decl(ps, dups))]
        cti = extract(ps.su, model, target, action, ranks=views)
    return Result(target, action, status, time.perf_counter() - t0, cti, "any")
