"""The device evictions insert and load_back do by themselves, over the page sort.

Three callers of spec/eviction.py and spec/cp_planner.py, for forests of any size:
insert with ``insert_evicts`` and load_back with ``load_back_evicts`` (make_room: the
scheduler's evict(num_tokens) while a node's path is held), and load_back under
``cp_planner`` (the owner-lane planner's victims). Counts (device room, lane deficits,
host room, how far each loop gets) are not in the page-sorted view, so each eviction is
a free set of victims constrained by what the spec guarantees about every victim it can
take; a proof over all such sets holds for the spec's (an over-approximation, each step
below says what it leaves free):

make_room (``make_room``), in an order the spec's rounds can be arranged into:
- duplicate reclaim (write_back + duplicate_reclaim, inside a victim's agreed host
  allocation): some reclaimable registered duplicates lose their host copy. Nothing in
  make_room gives a node a device copy, so what is reclaimable only shrinks and a
  reclaim at a later round could have been taken up front. The two passes' order is not
  kept (release_safety, which needs it, is left out there: ``excluded``);
- device victims: live resident nodes, unlocked and off the held path (each is an
  evictable leaf when taken: every live node below it holding a device copy is a
  victim too). Under lru-evicts-locked-parent a victim may be locked or held when it is
  above another victim (the seed's pushed parent, popped without the lock check; "above"
  over-approximates "the parent of"). A victim with a host copy is demoted; without one
  under write_back it is staged (host copy written, a storage backup started, demoted)
  where its allocation succeeds, else it frees nothing and is no victim; otherwise it is
  deleted;
- removal: the deleted victims with their host-only subtrees and the LRU host victims
  of the allocations, one set closed under descendants (``gone`` below).
The hold's lock is taken and dropped (locks of live nodes end where they began).

The CP planner (``planner_victims``): live device nodes, unlocked, off the loaded node's
path (``protected``), backed up or (write-through) without any node below, closed under
device descendants (a victim is a leaf after the plan); backed victims are demoted, the
others removed. Whether a plan exists (the guard) is free.
"""

from __future__ import annotations

import itertools

import z3

from ..spec.state import ABSENT, HOST_RESIDENT, LOADING, RESIDENT
from .encode.scheduler_evict import CHAIN_UNLOCKED, UNCHECKED
from . import epr_counting as count, epr_locks
from .epr_actions import choice, define, enqueue, insert as plain_insert, havoc_scalars, remove_nodes, slot_step, view_ite
from .epr_properties import b_, can_reclaim_duplicate, device_leaves
from .forest import PageSort, forall
from .paged import REGISTRY, Paged

_ids = itertools.count()


def _some_below(u, pred, name: str):
    """x has a strict descendant satisfying pred, named by a witness function."""
    f = u.forest
    sk = z3.Function(f"{name}!{next(_ids)}", PageSort, PageSort)
    u.facts.append(forall(lambda x, y: z3.Implies(z3.And(pred(y), f.lt(x, y)), z3.And(pred(sk(x)), f.lt(x, sk(x)))), 2))
    return lambda x: z3.And(pred(sk(x)), f.lt(x, sk(x)))


def _below(u, v, x, y):
    """y is a live node strictly below node x."""
    return z3.And(v.live(y), u.forest.lt(x, y))


def _some_above(u, pred, name: str):
    """x has a strict ancestor satisfying pred: a witness function names the top-most
    one (in a finite forest the ancestors of x form a chain, so one exists if any does)."""
    f = u.forest
    sk = z3.Function(f"{name}!{next(_ids)}", PageSort, PageSort)
    u.facts.append(forall(lambda x, y: z3.Implies(z3.And(pred(y), f.lt(y, x)), z3.And(pred(sk(x)), f.lt(sk(x), x))), 2))
    return lambda x: z3.And(pred(sk(x)), f.lt(sk(x), x))


def make_room(u, v: Paged, active, mine, hold, dups, name: str, record=None, counted=None) -> Paged:
    """make_room on one rank: ``active`` (some rank lacked room: the agreed host
    allocations may run here), ``mine`` (this rank lacked room: it takes victims),
    ``hold(x)`` (x is on the held node's path, locked meanwhile). Reclaim, victims, LRU
    host eviction as the module says; returns the view after it. ``record``: a dict given
    the staged victims and the view they were staged on (proofs.epr_queue_sched).
    ``counted``: a dict given the sets its counters follow (proofs.epr_counting_evict)."""
    cfg = u.cfg
    wb = b_(cfg.wb)
    u.facts.append(z3.Implies(mine, active))
    # 1. duplicate reclaim (in a victim's host allocation: write_back)
    rec = choice(f"{name}.reclaim")
    u.facts.append(forall(lambda x: z3.Implies(rec(x), z3.And(
        active, wb, b_(cfg.dupr), dups(x), can_reclaim_duplicate(u, v, x)))))
    v1 = v.set_node(rec, host=lambda x: z3.IntVal(ABSENT)).named(f"{name}.reclaimed", u.facts)
    # 2. device victims
    vic = choice(f"{name}.victim")
    locked = lambda x: z3.Or(v1.lock(x) > 0, hold(x))
    if cfg.has(UNCHECKED):  # a pushed parent: above another victim, its lock not checked
        above = _some_below(u, vic, f"{name}.pushed")
        free = lambda x: z3.Or(z3.Not(locked(x)), above(x))
    else:
        free = lambda x: z3.Not(locked(x))
    u.facts.append(forall(lambda x: z3.Implies(vic(x), z3.And(mine, v1.live(x), v1.dev(x) == RESIDENT, free(x)))))
    u.facts.append(forall(lambda x, y: z3.Implies(z3.And(vic(x), _below(u, v1, x, y), v1.dev(y) != ABSENT), vic(y)), 2))
    backed = lambda x: v1.host(x) == HOST_RESIDENT
    needs_write = lambda x: z3.And(wb, v1.host(x) == ABSENT)
    writes = lambda x: z3.And(vic(x), needs_write(x))
    deleted = lambda x: z3.And(vic(x), z3.Not(backed(x)), z3.Not(needs_write(x)))
    storage = z3.If(b_(cfg.storage), 1, 0)
    v2 = v1.set_node(writes, host=lambda x: z3.IntVal(HOST_RESIDENT), href=lambda x: v1.href(x) + storage)
    v2 = enqueue(v2, "sfly", lambda p: z3.And(b_(cfg.storage), v1.cached(p), writes(v1.own(p))))
    v2 = v2.set_node(lambda x: z3.And(vic(x), z3.Not(deleted(x))), dev=lambda x: z3.IntVal(ABSENT))
    v2 = v2.named(f"{name}.evicted", u.facts)
    # 3. what leaves the tree: the deleted victims with their host-only subtrees, and the
    # LRU host victims of the host allocations. One set, closed under descendants, each
    # member a deleted victim or a host-only, unreferenced, unlocked, unheld node after
    # the victims (a pruned subtree has no references or locks, _prunable, as an LRU
    # victim has none; the spec checks the subtree as the victims leave it, and staging
    # only adds references). Removal is allowed under every policy (an over-approximation:
    # write-through runs no host allocation here).
    gone = choice(f"{name}.gone")
    idle = lambda x: z3.And(v2.dev(x) == ABSENT, v2.href(x) == 0, v2.lock(x) == 0, z3.Not(hold(x)))
    if cfg.has("orphan-host-subtree"):  # the subtree below a deleted victim goes unchecked
        under = _some_above(u, lambda y: z3.And(deleted(y), v1.live(y)), f"{name}.pruned_by")
        ok = lambda x: z3.Or(deleted(x), under(x), idle(x))
        kept = lambda x: z3.And(under(x), z3.Not(deleted(x)))  # detached, host slots kept (_delete)
    else:
        ok = lambda x: z3.Or(deleted(x), idle(x))
        kept = lambda x: z3.BoolVal(False)
    u.facts.append(forall(lambda x: z3.Implies(deleted(x), gone(x))))
    # (only where make_room runs: some rank is short)
    u.facts.append(forall(lambda x: z3.Implies(gone(x), z3.And(active, v2.live(x), ok(x)))))
    # closed under descendants, stated per page: a cached page below a node that goes is
    # owned by a node that goes (the spec removes whole subtrees: a node below x owns it)
    u.facts.append(forall(lambda a, p: z3.Implies(z3.And(v2.cached(a), gone(v2.own(a)), u.forest.le(a, p), v2.cached(p)),
                                                  gone(v2.own(p))), 2))
    if record is not None:
        record.update(room_written=writes, room_view=v1, room_gone=gone)
    if counted is not None:  # what make_room's counters follow (proofs.epr_counting_evict)
        counted.update(v1=v1, v2=v2, rec=rec, vic=vic, writes=writes, gone=gone, kept=kept)
    return remove_nodes(u, v2, gone).named(f"{name}.room", u.facts)


def loading_locked(u, v: Paged):
    """A LOADING node is locked: every page of it is under an H->D copy (strengthening
    load_queue) whose load locks the node (lock_accounting), both invariants of the
    bounded audit; a hypothesis here, as epr_properties.queue_pages is (the agreement
    tests check it on reachable states). It keeps the planner off LOADING nodes."""
    return forall(lambda x: z3.Implies(z3.And(v.live(x), v.dev(x) == LOADING), v.lock(x) >= 1))


def planner_victims(u, v: Paged, on, e) -> Paged:
    """The CP planner's victims on one rank (``on``: cp_planner and the load lacks lane
    room): a free set as the module says, backed ones demoted, the others removed."""
    if z3.is_false(z3.simplify(on)):
        return v
    wb = b_(u.cfg.wb)
    vic = choice("planned")
    childless = lambda x: forall(lambda y: z3.Not(_below(u, v, x, y)))
    u.facts.append(forall(lambda x: z3.Implies(vic(x), z3.And(
        on, v.live(x), v.dev(x) != ABSENT, v.lock(x) == 0, z3.Not(u.forest.le(x, e)),
        z3.Or(v.host(x) == HOST_RESIDENT, z3.And(z3.Not(wb), childless(x)))))))
    u.facts.append(forall(lambda x, y: z3.Implies(z3.And(vic(x), _below(u, v, x, y), v.dev(y) != ABSENT), vic(y)), 2))
    # (victims, whether it runs, the view it read, the loaded node): proofs.epr_planner
    u.__dict__.setdefault("plans", []).append((vic, on, v, e))
    backed = lambda x: v.host(x) == HOST_RESIDENT
    # each victim's device pages go back (spec evict_victims); the removed ones hold no
    # host copy (unlocked, so not WRITING: epr_counting.writing_locked)
    v = count.moved(u, v, "dev_free", +1, count.node_pages(v, vic), name="planned")
    out = v.set_node(lambda x: z3.And(vic(x), backed(x)), dev=lambda x: z3.IntVal(ABSENT))
    return remove_nodes(u, out, lambda x: z3.And(vic(x), z3.Not(backed(x)))).named("planned", u.facts)


def _slotted(u, pre: Paged, mid: Paged, a) -> Paged:
    """The device pool after the eviction (slots given back), and the base the step's
    own slot step starts from (epr_actions.effect reads ``a["slot_base"]``)."""
    if not u.slots:
        return mid
    mid = slot_step(u, pre, mid)
    a["slot_base"] = mid
    return mid


def insert(u, v: Paged, a) -> Paged:
    """insert(req) with insert_evicts: where some rank lacks room, make_room holding
    the last node the request's walk reaches; then, where the request fits, the insert
    (epr_actions.insert) on the view after it, else the view after the eviction."""
    f = u.forest
    q = a["req"]
    c, fact = f.greatest_on_path(q, lambda p: v.cached(p), "room_walk")
    u.facts.append(fact)
    has = define(u, "room_walk", z3.And(f.le(c, q), v.cached(c)))
    a["room_walk"] = (c, has)  # (proofs.epr_queue_sched)
    hold = lambda x: z3.And(has, v.live(x), f.le(x, v.own(c)))
    return _evicting(u, v, a, b_(u.cfg.insert_evicts), hold, lambda mid, b: plain_insert(u, mid, b), "insert_room")


def _evicting(u, v: Paged, a, flag, hold, step, name: str) -> Paged:
    if z3.is_false(z3.simplify(b_(flag))):  # the option fixed off: the step alone
        return step(v, a)
    a["evict_short"] = z3.Bool(f"{name}.short!{next(_ids)}")  # some rank lacks room (bind_short)
    active = define(u, f"{name}.active", z3.And(flag, a["evict_short"]))
    # this rank lacks room: with identical replicas (the fixed protocol: rank_agreement,
    # and round_due holds replicated steps back while digests differ) exactly when some
    # rank does, as the bounded encoding assumes (encode/eviction.evict); free under variants
    mine = active if not u.cfg.variants else z3.And(active, z3.Bool(f"{name}.mine!{next(_ids)}"))
    a["evict_held"] = lambda x: z3.And(mine, hold(x))  # spec/properties._held_while_evicting
    # the counters are followed through make_room (proofs.epr_counting_evict) and the
    # step counted from the view it leaves (``count_base``), its ledger and guard where
    # it runs (insert since session 11, load_back since session 14)
    sets = {}
    mid = make_room(u, v, active, mine, hold, a["dups"], name, a, sets)
    mid = _slotted(u, v, mid, a)
    from .epr_counting_evict import room

    mid = room(u, v, mid, **sets)
    a["room_facts"] = len(u.facts)  # the facts made up to the view after the eviction (proofs.epr_insert_room)
    fits = z3.Bool(f"{name}.fits!{next(_ids)}")
    u.facts.append(z3.Implies(z3.Not(active), fits))
    b = {**a, "leaf": device_leaves(u, mid, f"{name}.leaf")}
    a["count_base"] = mid
    mark, u.fit_cond = count.mark(u), fits  # the step's ledger and guard where it runs
    after = step(mid, b)
    count.branch(u, mark, fits)
    del u.fit_cond
    # the step's choices (proofs.epr_queue_sched), made where the step ran
    a.update(fits=fits, room_mid=mid, room_after=after, **{k: b[k] for k in ("staged", "staged_view", "load_first", "walked_to") if k in b})
    return view_ite(fits, after, mid).named(name, u.facts)


def load_back(u, v: Paged, a) -> Paged:
    """load_back(e): under cp_planner the planner's victims, with load_back_evicts (and
    no planner) make_room holding e's path (load-back-evicts-chain-unlocked: only its
    resident part, the first resident ancestor's path); then, where the chain fits, the
    load of the chain the pre-state had (epr_actions.load_back's effect on what is left
    of it), else the view after the eviction."""
    f, cfg = u.forest, u.cfg
    e = a["node"]
    u.facts.append(loading_locked(u, v))
    path = lambda x: z3.And(v.live(x), f.le(x, e))
    hold = (lambda x: z3.And(path(x), v.dev(x) != ABSENT)) if cfg.has(CHAIN_UNLOCKED) else path
    cp = b_(cfg.cp)
    flag = z3.And(b_(cfg.load_back_evicts), z3.Not(cp))

    def step(mid, b):
        planned = planner_victims(u, mid, z3.And(cp, z3.Bool(f"lane_short!{next(_ids)}")), e)
        return load(u, v, planned, e, b)

    out = _evicting(u, v, a, flag, hold, step, "load_room")
    if "room_after" in a:  # its anchors: the load's where the chain fits, else the eviction's
        for branch_view in (a["room_after"], a["room_mid"]):
            epr_locks.same_sets(u, out, branch_view)
    if z3.is_false(z3.simplify(z3.Or(flag, cp))):
        return out
    # its evictions and removals write the registry (epr_actions.REGISTRY_WRITERS)
    return view_ite(z3.Or(flag, cp), havoc_scalars(out, "load_room.registry", *REGISTRY), out)


def load(u, was: Paged, v: Paged, e, a=None) -> Paged:
    """spec/load_path.load_back's load after its eviction: the chain and its pages are
    the pre-state's (``was``); what is left of the chain becomes LOADING with the
    load-back mark, what is left of e's path is locked once more, one H->D copy over the
    chain's pages is in flight."""
    f = u.forest
    chain = lambda x: z3.And(was.live(x), f.le(x, e), was.dev(x) == ABSENT)
    u.facts.append(z3.And(was.live(e), was.dev(e) == ABSENT))
    u.facts.append(forall(lambda x: z3.Implies(chain(x), was.host(x) == HOST_RESIDENT)))
    kept = lambda x: z3.And(chain(x), v.live(x))
    if a is not None:  # the H->D copy's first page (proofs.epr_queue_sched): the top chain node's start
        top, fact = f.least_on_path(e, chain, "load_top")
        u.facts.append(fact)
        a["load_first"] = was.start(top)
    on_path = lambda x: z3.And(was.live(x), f.le(x, e), v.live(x))
    # the chain's device pages, the pre-state's (spec: dev_free - len(pages)), taken
    # where they fit (the guard; after an eviction, ``fits``: count.fits)
    v = count.moved(u, v, "dev_free", -1, count.node_pages(was, chain), name="loaded")
    count.fits(u, v, "dev_free")
    out = v.update(
        lfly=lambda p: z3.Or(v.lfly(p), z3.And(was.cached(p), chain(was.own(p)))),
        dev=lambda x: z3.If(kept(x), z3.IntVal(LOADING), v.dev(x)),
        lbp=lambda x: z3.Or(kept(x), v.lbp(x)),
        lock=lambda x: z3.If(on_path(x), v.lock(x) + 1, v.lock(x)),
        lanch=lambda p: z3.Or(v.lanch(p), p == e),  # the copy's anchor (proofs.epr_locks)
    ).named("loading", u.facts)
    epr_locks.loads_added(u, v, out, e)
    return out


def spec_short(m, s, a) -> bool:
    """Whether some rank lacks device room for the explicit step (its make_room runs)."""
    from ..spec.load_path import nodes_to_load
    from ..spec.state import node_len
    from ..spec.write_path import insert_device_need

    if a.name == "insert":
        need = lambda rs: insert_device_need(m, rs, a["req"])
    else:
        need = lambda rs: (sum(node_len(m.pages, rs, x) for x in nodes_to_load(m, rs, a["node"]))
                           if rs.nodes[a["node"]] is not None else 0)
    return any(need(rs) > rs.dev_free for rs in s.ranks)


def bind_short(m, s, a, params) -> list:
    """On a concrete step (proofs.epr_agreement): ``evict_short`` as the spec decides it."""
    return [params["evict_short"] == spec_short(m, s, a)] if "evict_short" in params else []


# The part of an obligation left out of the proof: release_safety under a step that
# evicts by itself under write_back with duplicate reclaim is violated in the spec as
# its property is worded (docs/proofs.md, "The scheduler's own eviction"): the property
# judges "a non-leaf duplicate was left reclaimable" on the pre-state's leaves and the
# post-state's duplicates, and the step changes both between its reclaim and its end
# (the held node an insert un-evicts afterwards; a parent whose device child a victim
# took). The explicit checker reaches it in 6 steps on a one-rank, 4-page model.
EXCLUDED_TARGET = "release_safety"


def excluded(u, target: str, action: str) -> list:
    """Config constraints that leave that part out of an obligation (none elsewhere)."""
    if target != EXCLUDED_TARGET or action not in ("insert", "load_back"):
        return []
    cfg = u.cfg
    flag = cfg.insert_evicts if action == "insert" else z3.And(b_(cfg.load_back_evicts), z3.Not(b_(cfg.cp)))
    return [z3.Not(z3.And(b_(flag), b_(cfg.wb), b_(cfg.dupr)))]


# The option under which each action evicts by itself: proved in two parts, with it off
# (the step alone, the encoding epr_actions had before) and on.
SPLIT = {"insert": "insert_evicts", "load_back": "load_back_evicts"}
# Obligations proved page-sorted with the option off only, and bounded with it on
# (proofs.audit, epr_obligations.BOUNDED_UNDER): none now. The counting targets
# (proofs.epr_counting, epr_locks) follow insert through make_room since session 11
# (proofs.epr_counting_evict), load_back through it and the CP planner's victims since
# session 14 (``load``, ``planner_victims``). (prefix_closed, tree_closed and rank_agreement with it
# on are proved in two parts, the eviction and then the plain insert: proofs.epr_insert_room.)
UNDECIDED_ON = {"insert": ()}


def parts(action: str, fix=None) -> list:
    """The ``fix`` additions proving ``action`` in parts (one empty part elsewhere)."""
    flag = SPLIT.get(action)
    if flag is None or flag in (fix or {}):
        return [{}]
    return [{flag: False}, {flag: True}]
