"""Queue entries as their own sorts: the write, load and backup queue invariants and the
storage acks for page forests of any size.

The page-sorted view (proofs.paged) keeps the queues only as page relations, which is
enough for no_use_after_free but not for the queue invariants of proofs/strengthen.py:
those speak of entries (each a chain of pages, pairwise disjoint, a finished prefix).
Here each queue (RankState.wq, lq, sq) has an uninterpreted sort of entries, and a
state of the queue is, per entry, whether it is in the queue (``in``), its chain
(``st`` .. ``end``, pages) and whether it is in the finished prefix (``dn``: wq[:wdone],
lq[:ldone], sq[:len(sdone)]), and for a backup its ack (``ACK_FIELDS``). The list
order (``Order``) is a position per entry, compared only, static (entries keep their
places: the spec appends at the back and drops a prefix from the front); "the
finished entries are a prefix" is ``dn`` closed downward under it among the entries
in the queue, which is what ``0 <= wdone <= len(wq)`` says of a list. No counting, no
capacity: every list of entries is a finite set of sort elements ordered by position,
so every fact here holds for every finite state, whatever its number of pages or
entries.

``UQPROPS``: the four invariants (the names of proofs/strengthen.py) over a tree view
and a queue state; ``UQHYPOTHESES``: consequences of the audit's Inv used as a
hypothesis (``queue_refs``); ``step``: each covered action's effect on the entries,
given the tree step (proofs.epr_actions) and the choices it made there (which nodes a
sync round committed, whether evict queued a backup). tests/proofs/test_proofs_queues.py
keeps them in agreement with the spec and the bounded encodings on reachable states.
"""

from __future__ import annotations

import itertools
from typing import Callable, Dict

import z3

from ..spec.state import HOST_RESIDENT, LOADING, WRITING
from .forest import PageSort, forall
from . import cores
from .fresh_solver import solver as fresh_solver

_ids = itertools.count()
B = z3.BoolSort()
QUEUES = ("wq", "lq", "sq")
SORTS = {"wq": z3.DeclareSort("WEntry"), "lq": z3.DeclareSort("LEntry"), "sq": z3.DeclareSort("SEntry")}
FIELDS = {"in": B, "st": PageSort, "end": PageSort, "dn": B}
# An H->L3 backup's ack (RankState.sdone[i], aligned with sq[i]; meaningful where the
# entry is acked): ``rskip``/``askip``, its reported / actual count is the SKIP
# sentinel; ``rgot(e, p)``/``got(e, p)``, page p is among the first ``reported`` /
# ``actual`` pages of the entry's chain. A count 0..len(chain) is exactly a prefix of
# the chain (the spec's counts are guarded to that range: storage_backup_done), so
# the sets stand for the counts without arithmetic.
PAGE_REL = "page relation"
ACK_FIELDS = {"rskip": B, "askip": B, "rgot": PAGE_REL, "got": PAGE_REL}
FIELDS_OF = {"wq": FIELDS, "lq": FIELDS, "sq": {**FIELDS, **ACK_FIELDS}}


def _function(name: str, q: str, sort):
    if isinstance(sort, str):  # PAGE_REL
        return z3.Function(name, SORTS[q], PageSort, B)
    return z3.Function(name, SORTS[q], sort)


def every(q: str, fn: Callable, n: int = 1):
    xs = [z3.Const(f"{q}{next(_ids)}", SORTS[q]) for _ in range(n)]
    return z3.ForAll(xs, fn(*xs))


def some(q: str, fn: Callable):
    e = z3.Const(f"{q}{next(_ids)}", SORTS[q])
    return z3.Exists([e], fn(e))


def fresh(q: str, name: str):
    return z3.Const(f"{name}!{next(_ids)}", SORTS[q])


class Queues:
    """One rank's three queues: ``self.f[q][field]`` a callable of an entry."""

    def __init__(self, f: Dict[str, Dict[str, Callable]]):
        self.f = {q: dict(x) for q, x in f.items()}

    def __getitem__(self, q):
        return self.f[q]

    def update(self, q: str, **new: Callable) -> "Queues":
        out = Queues(self.f)
        out.f[q].update(new)
        return out

    def named(self, tag: str, facts: list) -> "Queues":
        """Every changed field as a fresh function defined by one universal equation."""
        out = {}
        for q in QUEUES:
            out[q] = {}
            for name, sort in FIELDS_OF[q].items():
                old = self.f[q][name]
                if isinstance(old, z3.FuncDeclRef):
                    out[q][name] = old
                    continue
                fn = _function(f"{tag}.{q}.{name}!{next(_ids)}", q, sort)
                if isinstance(sort, str):  # PAGE_REL
                    facts.append(every(q, lambda e, fn=fn, old=old: forall(lambda p: fn(e, p) == old(e, p))))
                else:
                    facts.append(every(q, lambda e, fn=fn, old=old: fn(e) == old(e)))
                out[q][name] = fn
        return Queues(out)


def symbolic(name: str) -> Queues:
    return Queues({q: {n: _function(f"{name}.{q}.{n}", q, s) for n, s in FIELDS_OF[q].items()} for q in QUEUES})


class Order:
    """The list order of each queue: ``rel[q](a, b)``, entry a is ahead of entry b, read
    off an integer position per entry (static: the list index an entry had when it was
    appended, counted from the first entry ever). Only the comparison is used, so the
    order is a strict total order on the entries, decided by arithmetic instead of
    three quantified axioms per queue (with them, z3's instantiation did not decide
    the prefix clause in time)."""

    def __init__(self, name: str = "before"):
        self.pos = {q: z3.Function(f"{name}.{q}", SORTS[q], z3.IntSort()) for q in QUEUES}
        self.rel = {q: (lambda pos: lambda a, b: pos(a) < pos(b))(self.pos[q]) for q in QUEUES}

    def axioms(self) -> list:
        return []


# --- the invariants ------------------------------------------------------------------------


def on_chain(u, Q: Queues, q: str, e, p):
    return u.forest.in_chain(Q[q]["st"](e), Q[q]["end"](e), p)


def _entries(u, v, Q: Queues, order: Order, q: str, node_ok: Callable):
    """proofs/strengthen.py's common part: every entry is a chain whose pages are cached
    in nodes lying inside it (entries cover whole nodes) that satisfy ``node_ok``;
    distinct entries share no page; the finished entries are a prefix of the queue."""
    x = Q[q]
    inside = lambda e, p: on_chain(u, Q, q, e, p)
    f = u.forest
    # one clause per fact about an entry's pages (z3 decides them apart: proofs.epr_queues.decide)
    per_page = [lambda e, p: v.cached(p), lambda e, p: inside(e, v.start(v.own(p))),
                lambda e, p: inside(e, v.own(p)), lambda e, p: node_ok(v.own(p))]
    return z3.And(
        every(q, lambda e: z3.Implies(x["in"](e), f.le(x["st"](e), x["end"](e)))),
        *[every(q, lambda e, fact=fact: forall(lambda p: z3.Implies(z3.And(x["in"](e), inside(e, p)), fact(e, p))))
          for fact in per_page],
        every(q, lambda a, b: z3.Implies(z3.And(x["in"](a), x["in"](b), a != b), forall(
            lambda p: z3.Not(z3.And(inside(a, p), inside(b, p))))), 2),
        every(q, lambda e: z3.Implies(x["dn"](e), x["in"](e))),
        every(q, lambda a, b: z3.Implies(z3.And(x["dn"](b), x["in"](a), order.rel[q](a, b)), x["dn"](a)), 2),
    )


def write_queue(u, v, Q, order):
    """D->H copies cover whole nodes whose host copy is WRITING, pairwise disjoint; the
    finished ones (wq[:wdone]) a prefix."""
    return _entries(u, v, Q, order, "wq", lambda n: v.host(n) == WRITING)


def load_queue(u, v, Q, order, covered: bool = True):
    """H->D copies cover whole LOADING nodes, pairwise disjoint, each ending at a live
    node; every page of a LOADING node is under one (left out with ``covered`` off: a
    weaker hypothesis, epr_queues.decide); the finished ones a prefix."""
    x = Q["lq"]
    return z3.And(
        _entries(u, v, Q, order, "lq", lambda n: v.dev(n) == LOADING),
        every("lq", lambda e: z3.Implies(x["in"](e), v.live(x["end"](e)))),
        *[] if not covered else [forall(lambda p: z3.Implies(z3.And(v.cached(p), v.dev(v.own(p)) == LOADING), some(
            "lq", lambda e: z3.And(x["in"](e), on_chain(u, Q, "lq", e, p)))))])


def backup_queue(u, v, Q, order):
    """H->L3 backups (until drained) cover whole host-resident nodes, pairwise disjoint;
    the acked ones (sq[:len(sdone)]) a prefix; none without storage."""
    x = Q["sq"]
    return z3.And(_entries(u, v, Q, order, "sq", lambda n: v.host(n) == HOST_RESIDENT),
                  every("sq", lambda e: z3.Implies(x["in"](e), _b(u.cfg.storage))))


def _b(x):
    return z3.BoolVal(x) if isinstance(x, bool) else x


def storage_acks(u, v, Q, order):
    """A writer's ack reports exactly what it stored, a prefix of the entry's chain (0 <=
    actual <= len(chain), reported == actual); a single-writer follower's ack is the
    SKIP sentinel (``v.reads``: this rank writes, spec storage_path._writes)."""
    x = Q["sq"]
    acked = lambda e: x["dn"](e)
    chain = lambda e, p: on_chain(u, Q, "sq", e, p)
    w = v.reads
    return z3.And(
        every("sq", lambda e: z3.Implies(acked(e), z3.If(
            w, z3.And(z3.Not(x["rskip"](e)), z3.Not(x["askip"](e))), z3.And(x["rskip"](e), x["askip"](e))))),
        every("sq", lambda e: forall(lambda p: z3.Implies(z3.And(w, acked(e), x["got"](e, p)), chain(e, p)))),
        every("sq", lambda e: forall(lambda p: z3.Implies(z3.And(w, acked(e)), x["rgot"](e, p) == x["got"](e, p)))),
        every("sq", lambda e: forall(lambda p, a: z3.Implies(
            z3.And(w, acked(e), x["got"](e, p), u.forest.in_chain(x["st"](e), p, a)), x["got"](e, a)), 2)))


UQPROPS: Dict[str, Callable] = {"write_queue": write_queue, "load_queue": load_queue, "backup_queue": backup_queue,
                                "storage_acks": storage_acks}


def queue_refs(u, v, Q, order):
    """What lock_accounting and href_accounting say about queued nodes, for every page
    count (a hypothesis, never a target; their own obligations are in the audit): a
    WRITING node holds its write lock (node_fields: write-through only, so lock_ref
    counts it); a LOADING node is under an H->D copy (load_queue) whose end is at or
    below it, so lock_ref >= 1; a node with a page under a backup in sq is covered by
    it (entries cover whole nodes), so host_ref_counter >= 1."""
    return z3.And(
        forall(lambda n: z3.Implies(z3.And(v.live(n), z3.Or(v.host(n) == WRITING, v.dev(n) == LOADING)),
                                    v.lock(n) >= 1)),
        every("sq", lambda e: forall(lambda p: z3.Implies(
            z3.And(Q["sq"]["in"](e), on_chain(u, Q, "sq", e, p), v.cached(p)), v.href(v.own(p)) >= 1))))


UQHYPOTHESES = {"queue_refs": queue_refs}


# --- the steps -----------------------------------------------------------------------------


def _finish(Q, order, q, facts):
    """write_dma_done / load_dma_done / storage_backup_done: the first entry not yet
    finished (the guard: there is one) joins the finished prefix. Returns (queue
    state, that entry)."""
    x, lt = Q[q], order.rel[q]
    m = fresh(q, f"finished_{q}")
    facts += [x["in"](m), z3.Not(x["dn"](m)),
              every(q, lambda e: z3.Implies(z3.And(x["in"](e), z3.Not(x["dn"](e))), z3.Or(e == m, lt(m, e))))]
    return Q.update(q, dn=lambda e: z3.Or(x["dn"](e), e == m)), m


def _ack(u, pre, Q, m, facts):
    """storage_backup_done's ack on the entry m it finishes: a writer
    stores some prefix of the chain (all of it unless partial_storage) and reports it
    (failed-batch-acked: reports the whole chain); a follower acks SKIP."""
    x = Q["sq"]
    chain = lambda p: on_chain(u, Q, "sq", m, p)
    k = z3.Function(f"stored!{next(_ids)}", PageSort, B)  # the stored prefix
    cfg, w = u.cfg, pre.reads
    facts += [forall(lambda p: z3.Implies(k(p), chain(p))),
              forall(lambda p, a: z3.Implies(z3.And(k(p), u.forest.in_chain(x["st"](m), p, a)), k(a)), 2),
              z3.Implies(z3.Not(_b(cfg.partial_storage)), forall(lambda p: z3.Implies(chain(p), k(p))))]
    reported = (lambda p: chain(p)) if cfg.has("failed-batch-acked") else k
    at = lambda e: e == m
    return Q.update("sq", rskip=lambda e: z3.If(at(e), z3.Not(w), x["rskip"](e)),
                    askip=lambda e: z3.If(at(e), z3.Not(w), x["askip"](e)),
                    got=lambda e, p: z3.If(at(e), k(p), x["got"](e, p)),
                    rgot=lambda e, p: z3.If(at(e), reported(p), x["rgot"](e, p)))


def _commit(u, pre, Q, order, q, nodes, facts, name):
    """A sync round commits the first entries of the finished prefix (MIN over ranks:
    at most this rank's count): a set C closed downward; ``nodes`` (the tree step's
    choice, where it has one) are exactly the nodes those entries cover. Returns (queue
    state, C)."""
    x, lt = Q[q], order.rel[q]
    c = z3.Function(f"{name}!{next(_ids)}", SORTS[q], B)
    facts += [
        every(q, lambda e: z3.Implies(c(e), x["dn"](e))),
        every(q, lambda a, b: z3.Implies(z3.And(c(b), x["in"](a), lt(a, b)), c(a)), 2),
    ]
    if nodes is not None:
        wit = z3.Function(f"{name}.entry!{next(_ids)}", PageSort, SORTS[q])
        facts += [
            forall(lambda n: z3.Implies(nodes(n), z3.And(c(wit(n)), on_chain(u, Q, q, wit(n), n)))),
            every(q, lambda e: forall(lambda p: z3.Implies(
                z3.And(c(e), on_chain(u, Q, q, e, p), pre.cached(p)), nodes(pre.own(p))))),
            # hence (the entries are disjoint and cover whole nodes at the pre-state) no
            # entry left in the queue covers a committed node
            every(q, lambda e: forall(lambda p: z3.Implies(
                z3.And(x["in"](e), z3.Not(c(e)), on_chain(u, Q, q, e, p), pre.cached(p)), z3.Not(nodes(pre.own(p)))))),
        ]
    out = Q.update(q, **{"in": lambda e: z3.And(x["in"](e), z3.Not(c(e))), "dn": lambda e: z3.And(x["dn"](e), z3.Not(c(e)))})
    return out, c


def _append_backups(u, Q, order, committed, facts):
    """writing_check with storage: one H->L3 backup per committed D->H copy, the same
    chain, appended behind every entry of sq (option storage_per_node is out of scope)."""
    s, w, lt = Q["sq"], Q["wq"], order.rel["sq"]
    new = z3.Function(f"new_backup!{next(_ids)}", SORTS["sq"], B)
    of = z3.Function(f"backup_of!{next(_ids)}", SORTS["sq"], SORTS["wq"])
    facts += [
        every("sq", lambda e: z3.Implies(new(e), z3.And(
            _b(u.cfg.storage), committed(of(e)), z3.Not(s["in"](e)),
            every("sq", lambda d: z3.Implies(s["in"](d), lt(d, e)))))),
        every("sq", lambda a, b: z3.Implies(z3.And(new(a), new(b), of(a) == of(b)), a == b), 2),
    ]
    return Q.update("sq", **{"in": lambda e: z3.Or(s["in"](e), new(e)),
                             "st": lambda e: z3.If(new(e), w["st"](of(e)), s["st"](e)),
                             "end": lambda e: z3.If(new(e), w["end"](of(e)), s["end"](e))})


def step(u, name: str, pre, post, a, Q: Queues, order: Order, facts: list) -> Queues:
    """The queues after action ``name`` (covered: ``ACTIONS``), given the tree step
    pre -> post of proofs.epr_actions and its choices in ``a``."""
    if name == "init":
        return Queues({q: {**Q[q], "in": lambda e: z3.BoolVal(False), "dn": lambda e: z3.BoolVal(False)}
                       for q in QUEUES}).named("init", facts)
    if name in FINISH:
        out, m = _finish(Q, order, FINISH[name], facts)
        if name == "storage_backup_done":
            out = _ack(u, pre, out, m, facts)
        return out.named(name, facts)
    if name == "writing_check":
        out, c = _commit(u, pre, Q, order, "wq", a["committed"], facts, "committed_w")
        return _append_backups(u, out, order, c, facts).named(name, facts)
    if name == "loading_check":
        return _commit(u, pre, Q, order, "lq", a["loaded"], facts, "committed_l")[0].named(name, facts)
    if name == "drain_storage_control_queues":
        out, c = _commit(u, pre, Q, order, "sq", None, facts, "drained")
        # the backups left in sq keep their host references through the round (the acks
        # drop only the drained ones': href_accounting at the pre-state)
        facts.append(every("sq", lambda e: forall(lambda p: z3.Implies(
            z3.And(out["sq"]["in"](e), on_chain(u, Q, "sq", e, p), pre.cached(p)), post.href(pre.own(p)) >= 1))))
        return out.named(name, facts)
    if name == "evict":
        # write-back path with storage: the evicted node's backup joins sq at the back
        s, lt, e0 = Q["sq"], order.rel["sq"], a["node"]
        n = fresh("sq", "evict_backup")
        facts += [z3.Not(s["in"](n)), every("sq", lambda d: z3.Implies(s["in"](d), lt(d, n)))]
        at = lambda d: z3.And(a["backup_queued"], d == n)
        return Q.update("sq", **{"in": lambda d: z3.Or(s["in"](d), at(d)),
                                 "st": lambda d: z3.If(at(d), pre.start(e0), s["st"](d)),
                                 "end": lambda d: z3.If(at(d), e0, s["end"](d))}).named(name, facts)
    if name in ("insert", "load_back"):  # with their own evictions: proofs.epr_queue_sched
        from . import epr_queue_sched

        return epr_queue_sched.step(u, name, pre, post, a, Q, order, facts)
    return Q  # the step leaves wq, lq and sq alone


FINISH = {"write_dma_done": "wq", "load_dma_done": "lq", "storage_backup_done": "sq"}
# The steps encoded here (insert and load_back: proofs.epr_queue_sched).
ACTIONS = ("init", "write_dma_done", "load_dma_done", "storage_backup_done", "writing_check", "loading_check",
           "drain_storage_control_queues", "evict", "prefetch_from_storage", "check_prefetch_progress",
           "lock_request", "unlock_request", "insert", "load_back")


def covered(target: str, action: str) -> bool:
    return target in UQPROPS and action in ACTIONS


# --- obligations ---------------------------------------------------------------------------


class QSetup:
    """The queue part of an obligation's setup (proofs.epr_obligations.USetup): the
    order, the queues before and after, and the facts defining them."""

    def __init__(self, su):
        self.order = Order()
        self.pre = symbolic("s")
        self.facts = list(self.order.axioms())
        self.post = step(su.u, su.params["action"], su.pre, su.post, su.params, self.pre, self.order, self.facts)


def qsetup(su) -> QSetup:
    qs = getattr(su.u, "queues", None)
    if qs is None:
        qs = su.u.queues = QSetup(su)
    return qs


def hypotheses(su, covered: bool = True) -> list:
    """The pre-state's queue invariants (``covered``: load_queue's last clause too) and
    queue_refs, and the step's queue facts."""
    qs = qsetup(su)
    kw = lambda fn: {"covered": covered} if fn is load_queue else {}
    inv = ([fn(su.u, su.pre, qs.pre, qs.order, **kw(fn)) for fn in UQPROPS.values()]
           if su.params["action"] != "init" else [])
    hyp = [h(su.u, su.pre, qs.pre, qs.order) for h in UQHYPOTHESES.values()] if su.params["action"] != "init" else []
    return inv + hyp + qs.facts


LEAN_TREE = ("tree_owner", "tree_chain", "tree_closed", "tree_paths")  # what a split needs


def conjuncts(f) -> list:
    return [y for c in f.children() for y in conjuncts(c)] if z3.is_and(f) else [f]


# z3 resource limits (``rlimit``: deterministic, so a verdict does not depend on the
# machine's load, as a wall-clock timeout's did: a lean tier cut off at load 10 sent a
# conjunct to the full hypothesis, which came back unknown). z3 spends about 1.5-2
# million a CPU-second here; the costliest tier proof in the audit takes about 0.8
# million (insert with insert_evicts, backup_queue), every other under 0.3 million.
TIER_RLIMIT = 4_000_000
FULL_RLIMIT = 60_000_000  # the full hypothesis, where every lean tier failed
NO_TIMEOUT = 4294967295  # z3's default: no wall-clock limit
# z3's quantifier instantiation depends on the order its terms were made in (which
# jobs ran before in the process, even the import order): a check that usually takes
# 0.1-0.4 million once ran past 15 million. A check that runs out of its limit is tried
# again with other random seeds (each a fresh solver, the same limit).
SEEDS = (0, 1, 2)

# The lean tiers, tried in order: (tree invariants, load_queue's coverage clause, rlimit).
TIERS = ((LEAN_TREE, False, TIER_RLIMIT), (LEAN_TREE, True, TIER_RLIMIT), ((), False, TIER_RLIMIT))


def decide(su, target: str, tiers=TIERS):
    """(z3 result, model or None) of the obligation on ``su.solver`` (the hypotheses
    already added), one conjunct of the goal at a time: each first under lean subsets
    of the hypotheses (``TIERS``: the forest, the config, the step's facts, the queue
    invariants and queue_refs of the pre-state, and per tier some tree invariants; fewer
    hypotheses make a stronger claim, so unsat there is a proof), else under all of
    them, where sat is a counterexample and unknown falls back to the finite search
    (forest.finite_model). z3's instantiation decides the conjuncts far faster apart,
    and without the hypotheses they do not need."""
    from .epr_properties import UPROPS
    from .forest import finite_model

    from .epr_queue_sched import lemma_tiers, lemmas, tier_facts

    u = su.u
    base = [*u.forest.axioms(), *[z3.BoolVal(x) if isinstance(x, bool) else x for x in u.cfg.constraints()],
            *tier_facts(su)]
    # load_queue's coverage clause only where needed (its witnesses, entries of pages
    # of entries, send instantiation round in circles elsewhere)

    got = lemmas(su, target)  # insert and load_back: lemmas about their steps (proofs.epr_queue_sched)
    leans = [([*base, *got, *hypotheses(su, covered=covered), *[UPROPS[n].fn(u, su.pre) for n in tier]], ms)
             for tier, covered, ms in tiers]
    last = lemma_tiers(su, got)
    for c in conjuncts(goal(su, target)):
        # load_queue's coverage clause (the one with an existential) needs its own
        # clause at the pre-state: that tier first
        order = ((last if _exists(c) else []) + [leans[i] for i in (
            sorted(range(len(tiers)), key=lambda i: not tiers[i][1]) if _exists(c) else range(len(tiers)))]
            + ([] if _exists(c) else last))
        if any(refutes(hyps, limit, c) for hyps, limit in order):
            continue
        query = [*su.solver.assertions(), z3.Not(c)]
        if cores.refuted(query, FULL_RLIMIT):
            continue
        sol = fresh_solver(query)  # not incremental (proofs.fresh_solver)
        res = _limited(sol, FULL_RLIMIT)
        if res == z3.unsat:
            cores.learn(query)
        model = sol.model() if res == z3.sat else None
        if res == z3.unknown:
            model = finite_model(list(sol.assertions()), extra_sorts=tuple(SORTS.values()))
            res = z3.sat if model is not None else res
        if res != z3.unsat:
            return res, model
    return z3.unsat, None


def _exists(f) -> bool:
    if z3.is_quantifier(f):
        return f.is_exists() or _exists(f.body())
    return any(_exists(c) for c in f.children())


def refutes(hyps, rlimit, c) -> bool:
    """hyps => c, within z3's resource limit ``rlimit`` per try (``SEEDS``; an unknown
    is no proof). A fresh solver each time: z3's incremental mode (push/pop)
    instantiates quantifiers far worse."""
    query = [*hyps, z3.Not(c)]
    if cores.refuted(query, rlimit):  # a stored core of this very query (proofs.cores)
        return True
    for seed in SEEDS:
        sol = z3.Solver()
        sol.set("random_seed", seed)
        sol.add(*query)
        res = _limited(sol, rlimit)
        if res != z3.unknown or not _out_of_resources(sol):
            if res == z3.unsat:
                cores.learn(query)
            return res == z3.unsat
    return False


def _out_of_resources(sol) -> bool:
    return sol.reason_unknown() in ("max. resource limit exceeded", "canceled")


def _limited(sol, rlimit):
    """sol.check() under z3's resource limit only (no wall-clock limit); the limit is
    cleared afterwards (epr_obligations.check sets its own before each target)."""
    sol.set("rlimit", rlimit)
    sol.set("timeout", NO_TIMEOUT)
    try:
        return sol.check()
    finally:
        sol.set("rlimit", 0)  # 0: none


def goal(su, target: str):
    qs = qsetup(su)
    return UQPROPS[target](su.u, su.post, qs.post, qs.order)


def render(model, su, order_pages, m) -> Dict:
    """A finite model's queues before and after the step: per queue, its entries in list
    order as [start page, end page, finished]."""
    qs = qsetup(su)
    idx = {str(x): i for i, x in enumerate(order_pages)}
    val = lambda t: model.eval(t, model_completion=True)
    out = {}
    for when, Q in (("pre", qs.pre), ("post", qs.post)):
        out[when] = {}
        for q in QUEUES:
            elems = [e for e in (model.get_universe(SORTS[q]) or []) if z3.is_true(val(Q[q]["in"](e)))]
            lt = qs.order.rel[q]
            elems.sort(key=lambda e: sum(z3.is_true(val(lt(d, e))) for d in elems))
            out[when][q] = [[m.page_name(idx.get(str(val(Q[q][k](e))), -1)) for k in ("st", "end")]
                            + [z3.is_true(val(Q[q]["dn"](e)))] for e in elems]
    return out
