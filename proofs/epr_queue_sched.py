"""Queue entries under insert and load_back, with their own evictions, for any number of pages.

proofs.epr_queues follows the write, load and backup queues' entries through every step
that adds, finishes or drops them but these two; here (spec/write_path.py insert,
spec/load_path.py load_back, spec/eviction.py make_room):

- insert: write_backup appends one D->H copy per staged node, its chain (start .. end),
  unfinished, behind every entry of wq; with insert_evicts only where the request fit
  after the eviction (the tree step records its choices in the step's parameters:
  ``staged``, ``fits``);
- make_room (insert_evicts, load_back_evicts) under write_back with storage: each
  victim staged to the host (its host copy written, demoted) has its H->L3 backup
  appended to sq, its chain as the eviction found it (``room_written``, ``room_view``);
- load_back: one H->D copy over the chain the pre-state had (the first page of its
  top-most node .. e) joins lq at the back, unfinished, where the load ran (``loaded``,
  ``load_first``).

Which staged nodes get an entry is left free for wq and sq (one entry per node at most,
any of them): a superset of the spec's behaviours, and no invariant of a queue
(proofs.epr_queues.UQPROPS) asks every WRITING or backed-up node to be covered. The H->D
copy is one entry constant, as the spec appends exactly one; load_queue's coverage
clause (every LOADING page under an entry) needs it. No step here finishes, commits or
drops an entry, and no tree edit of these steps touches a queued node in the fixed
protocol (victims and pruned or LRU nodes are unlocked and unreferenced, WRITING and
LOADING nodes are locked, backed-up ones referenced: queue_refs); z3 proves that part
from the hypotheses, as for the other steps.
"""

from __future__ import annotations

import itertools
from typing import Callable

import z3

from .epr_properties import b_
from .epr_queues import SORTS, Queues, every, fresh
from .forest import PageSort

_ids = itertools.count()
ACTIONS = ("insert", "load_back")


def append(u, Q: Queues, order, q: str, nodes: Callable, start: Callable, facts: list, name: str) -> Queues:
    """Entries of queue ``q`` appended behind every queued one, unfinished: at most one
    per node with ``nodes(x)``, each over the chain start(x) .. x."""
    x, lt = Q[q], order.rel[q]
    uid = next(_ids)
    new = z3.Function(f"{name}.new!{uid}", SORTS[q], z3.BoolSort())
    of = z3.Function(f"{name}.of!{uid}", SORTS[q], PageSort)
    facts += [
        every(q, lambda e: z3.Implies(new(e), z3.And(nodes(of(e)), z3.Not(x["in"](e)),
                                                     every(q, lambda d: z3.Implies(x["in"](d), lt(d, e)))))),
        every(q, lambda a, b: z3.Implies(z3.And(new(a), new(b), of(a) == of(b)), a == b), 2),
    ]
    return Q.update(q, **{"in": lambda e: z3.Or(x["in"](e), new(e)),
                          "st": lambda e: z3.If(new(e), start(of(e)), x["st"](e)),
                          "end": lambda e: z3.If(new(e), of(e), x["end"](e))})


def _room_backups(u, Q, order, a, facts) -> Queues:
    """make_room's staged victims' backups (write_back with storage), where it ran."""
    written = a.get("room_written")
    if written is None:
        return Q
    view = a["room_view"]
    return append(u, Q, order, "sq", lambda x: z3.And(b_(u.cfg.storage), written(x)), view.start, facts,
                  "room_backup")


def step(u, name: str, pre, post, a, Q: Queues, order, facts: list) -> Queues:
    """The queues after insert or load_back (proofs.epr_queues.step's part for them)."""
    Q = _room_backups(u, Q, order, a, facts)
    fits = a.get("fits", z3.BoolVal(True))
    if name == "insert":
        staged = a["staged"]
        return append(u, Q, order, "wq", lambda x: z3.And(fits, staged(x)), a["staged_view"].start, facts,
                      "staged").named(name, facts)
    # load_back: the H->D copy (first .. e), where the load ran
    lq, lt = Q["lq"], order.rel["lq"]
    n = a["load_entry"] = fresh("lq", "load_entry")
    facts += [z3.Not(lq["in"](n)), every("lq", lambda d: z3.Implies(lq["in"](d), lt(d, n)))]
    at = lambda d: z3.And(fits, d == n)
    first, e = a["load_first"], a["node"]
    return Q.update("lq", **{"in": lambda d: z3.Or(lq["in"](d), at(d)),
                             "st": lambda d: z3.If(at(d), first, lq["st"](d)),
                             "end": lambda d: z3.If(at(d), e, lq["end"](d))}).named(name, facts)


# --- lemmas ----------------------------------------------------------------------------------
#
# z3's instantiation does not decide these steps' queue conjuncts under the hypotheses of
# proofs.epr_queues.TIERS (the steps' own facts hold many quantifiers: the walk, the split,
# the eviction's victim sets). So the facts about the step that the conjuncts need are
# stated as lemmas, each proved first from the hypotheses (the forest, the config, the
# step's facts, the tree invariants of the pre-state and the queue hypotheses); the
# conjuncts are then tried under the lemmas proved and the queue hypotheses alone (fewer
# hypotheses, a stronger claim: a proof there is a proof), before the tiers of
# proofs.epr_queues. A lemma not proved is not used.

TREE = ("tree_owner", "tree_chain", "tree_closed", "tree_paths", "device_closed", "counter_sanity")
# z3 resource limits per try (deterministic, retried with other seeds:
# proofs.epr_queues.refutes): the costliest lemma takes about 2.8 million (insert with
# insert_evicts), most 0.1-0.4 million, one from the lemmas alone 20 thousand.
LEMMA_RLIMIT = 8_000_000
LEAN_RLIMIT = 2_000_000


def _appended(su):
    """(queue, nodes appended to it, the start function of their chains) of the step."""
    a, cfg = su.params, su.u.cfg
    out = []
    if a.get("room_written") is not None:
        written = a["room_written"]
        out.append(("sq", lambda x: z3.And(b_(cfg.storage), written(x)), a["room_view"].start))
    if su.params["action"] == "insert":
        fits, staged = a.get("fits", z3.BoolVal(True)), a["staged"]
        out.append(("wq", lambda x: z3.And(fits, staged(x)), a["staged_view"].start))
    return out


def claims(su) -> list:
    """The lemmas of the step (module comment above)."""
    from ..spec.state import ABSENT, HOST_RESIDENT, LOADING, WRITING
    from .epr_queues import on_chain, qsetup
    from .forest import forall

    u, a, pre, post = su.u, su.params, su.pre, su.post
    f = u.forest
    qs = qsetup(su)
    ok = {"wq": lambda v, x: v.host(x) == WRITING, "sq": lambda v, x: v.host(x) == HOST_RESIDENT,
          "lq": lambda v, x: v.dev(x) == LOADING}
    out = []  # (queue, claim)
    for q, nodes, start in _appended(su):
        if q == "sq":  # a staged victim stays in the tree (referenced by its backup)
            out.append((q, forall(lambda x: z3.Implies(nodes(x), z3.Not(a["room_gone"](x))))))
        if q == "sq" and a["action"] == "insert":
            # ... and is not the node the insert then splits: the walk after the
            # eviction ends where it did before it, in a node the eviction held
            (c0, has0), (c1, has1), mid = a["room_walk"], a["walked_to"], a["room_mid"]
            out += [(q, forall(lambda x, p: z3.Implies(z3.And(nodes(x), f.in_chain(start(x), x, p)),
                                                       z3.Not(f.le(p, a["req"]))), 2)),  # off the request's path
                    (q, z3.Implies(has0, z3.And(mid.cached(c0), mid.own(c0) == pre.own(c0)))),
                    (q, z3.And(has1 == has0, z3.Implies(has0, c1 == c0))),
                    (q, forall(lambda x: z3.Implies(z3.And(nodes(x), has1), x != mid.own(c1)))),
                    (q, forall(lambda x, p: z3.Implies(z3.And(nodes(x), f.in_chain(start(x), x, p)), z3.And(
                        mid.cached(p), mid.own(p) == x, mid.start(x) == start(x))), 2)),
                    (q, forall(lambda x, p: z3.Implies(z3.And(nodes(x), has1, f.in_chain(start(x), x, p)),
                                                       z3.Not(f.in_chain(mid.start(mid.own(c1)), c1, p))), 2))]
        # an appended node's chain is its pages at the post-state, in a node of the queue's tier state
        # (one claim per fact: z3 decides them far faster apart)
        # (the owner and start of a staged victim after insert's walk and split: not proved
        # in time, left to the conjuncts, which the lemmas below let z3 decide)
        split = q == "sq" and a["action"] == "insert"
        facts = [lambda x, p: post.cached(p), lambda x, p: ok[q](post, x)] + ([] if split else [
            lambda x, p: post.own(p) == x, lambda x, p: post.start(x) == start(x)])
        out += [(q, forall(lambda x, p, fact=fact: z3.Implies(z3.And(nodes(x), f.in_chain(start(x), x, p)), fact(x, p)), 2))
                for fact in facts]
        # ... and on no entry queued before
        out.append((q, every(q, lambda w: forall(lambda x, p: z3.Implies(
            z3.And(qs.pre[q]["in"](w), nodes(x), f.in_chain(start(x), x, p)), z3.Not(on_chain(u, qs.pre, q, w, p))), 2))))
    loading = lambda v, p: z3.And(v.cached(p), v.dev(v.own(p)) == LOADING)
    loaded = lambda p: z3.BoolVal(False)  # the pages the step's own H->D copy covers
    if a["action"] == "load_back":
        e, first, fits = a["node"], a["load_first"], a.get("fits", z3.BoolVal(True))
        chain = lambda x: z3.And(pre.live(x), f.le(x, e), pre.dev(x) == ABSENT)
        loaded = lambda p: z3.And(fits, f.in_chain(first, e, p))
        out += [("lq", c) for c in (
            # the H->D copy's pages are the chain's, as the pre-state had them
            forall(lambda p: z3.Implies(f.in_chain(first, e, p), z3.And(pre.cached(p), chain(pre.own(p))))),
            forall(lambda p: z3.Implies(z3.And(pre.cached(p), chain(pre.own(p))), f.in_chain(first, e, p))),
            # ... in a LOADING node lying inside the copy after the step, where the load ran
            forall(lambda p: z3.Implies(loaded(p), z3.And(
                loading(post, p), f.in_chain(first, e, post.own(p)), f.in_chain(first, e, post.start(post.own(p)))))),
        )]
    # a LOADING page after the step was one before, or the step's load made it one
    out.append(("lq", forall(lambda p: z3.Implies(loading(post, p), z3.Or(loading(pre, p), loaded(p))))))
    # load_queue's coverage clause with its witness named: the new copy, or the copy
    # that covered the page before (``cover``, the Skolem function of the clause at the
    # pre-state); from the lemmas above and the queue hypotheses alone
    lq0, lq1 = qs.pre["lq"], qs.post["lq"]
    cover = z3.Function(f"cover!{next(_ids)}", PageSort, SORTS["lq"])
    u.__dict__.setdefault("queue_skolems", []).append(forall(lambda p: z3.Implies(
        loading(pre, p), z3.And(lq0["in"](cover(p)), on_chain(u, qs.pre, "lq", cover(p), p)))))
    wit = (lambda p: z3.If(loaded(p), a["load_entry"], cover(p))) if "load_entry" in a else cover
    out.append(("lq", forall(lambda p: z3.Implies(loading(post, p), z3.And(
        lq1["in"](wit(p)), on_chain(u, qs.post, "lq", wit(p), p)))), LEAN))
    return out


# the queues each target reads
QUEUES_OF = {"write_queue": ("wq",), "load_queue": ("lq",), "backup_queue": ("sq",), "storage_acks": ("sq",)}


def lemmas(su, target: str) -> list:
    """The claims about the target's queues proved from the hypotheses (memoised on the
    setup)."""
    from .epr_properties import UPROPS
    from .epr_queues import refutes, hypotheses

    u = su.u
    if su.params["action"] not in ACTIONS:
        return []
    memo = u.__dict__.setdefault("queue_lemmas", {})
    everything = u.__dict__.setdefault("queue_claims", claims(su))
    full = lean = None
    for q in QUEUES_OF[target]:
        if q in memo:
            continue
        done = memo[q] = []
        for c, *how in [c[1:] for c in everything if c[0] == q]:
            if how:  # from the lemmas so far and the queue steps' definitions
                lean = lean or _lean(su)
                ok = refutes([*lean, *done], LEMMA_RLIMIT, c)
            else:
                full = full or [*_base(u), *_step_facts(u), *[UPROPS[n].fn(u, su.pre) for n in TREE], *hypotheses(su)]
                ok = refutes([*full, *done], LEMMA_RLIMIT, c)
            done += [c] if ok else []
    return [c for q in QUEUES_OF[target] for c in memo[q]]


def _step_facts(u) -> list:
    """The step's facts without the counting ones (proofs.epr_counting: set sizes, which
    the counting targets checked before add to ``u.facts``; the lemmas do not need them,
    and they slow z3's instantiation down)."""
    from .epr_counting import counting_facts

    apart = {f.get_id() for f in counting_facts(u)}
    return [f for f in u.facts if f.get_id() not in apart]


def tier_facts(su) -> list:
    """The step's facts the tiers of proofs.epr_queues.decide assume: for insert and
    load_back without the counting facts (``_step_facts``; the audit checks the counting
    targets of a step first, in the same setup), elsewhere all of them."""
    return _step_facts(su.u) if su.params["action"] in ACTIONS else su.u.facts


def _base(u) -> list:
    return [*u.forest.axioms(), *[z3.BoolVal(x) if isinstance(x, bool) else x for x in u.cfg.constraints()]]


def lemma_tiers(su, got) -> list:
    """(hypotheses, rlimit) tried on a conjunct (proofs.epr_queues.decide: first where the
    conjunct has an existential, load_queue's coverage clause, else after its tiers):
    the lemmas proved and the queue steps' definitions alone."""
    return [([*_lean(su), *got], LEAN_RLIMIT)] if got else []


def _lean(su) -> list:
    from .epr_queues import qsetup

    return [*_base(su.u), *qsetup(su).facts, *skolems(su.u)]


def skolems(u) -> list:
    """Skolem forms of hypotheses the lemmas name (sound: a model of a hypothesis
    extends to one of its Skolem form)."""
    return getattr(u, "queue_skolems", [])


LEAN = "lean"  # a lemma proved from the lemmas before it and the queue steps' definitions alone
