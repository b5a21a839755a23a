"""Invariants over the page sort (proofs.paged), for forests of any size.

Each one has the name of a spec property (spec/properties.py) or strengthening invariant
(proofs/strengthen.py) and states the same thing with page quantifiers where the
bounded encoding enumerates pages: ``fn(u, v)`` for an invariant of one rank's view v,
``fn(u, s, t, a)`` for a transition property. tests/proofs/test_proofs_unbounded.py
keeps them in agreement with the spec's predicates and the bounded encodings on
reachable states of shipped models.

``u`` is the unbounded context (proofs.epr_obligations.UCtx: forest, config, facts).
"""

from __future__ import annotations

import itertools
from typing import Callable, Dict, NamedTuple

import z3

from ..spec.state import ABSENT, HOST_RESIDENT, LOADING, RESIDENT, WRITING

from . import epr_counting as _counting
from . import epr_locks as _locks
from .forest import PageSort, SlotSort, exists, forall

_ids = itertools.count()


def if_(c, a, b):
    """z3.If for a condition that may be a Python bool (a concrete config)."""
    return (a if c else b) if isinstance(c, bool) else z3.If(c, a, b)


def b_(x):
    return z3.BoolVal(x) if isinstance(x, bool) else x


class UProp(NamedTuple):
    name: str
    kind: str  # "invariant" | "transition"
    fn: Callable


# --- tree queries over a view --------------------------------------------------------------


def node_has_page(u, v, e, p):
    return u.forest.in_chain(v.start(e), e, p)


def device_leaves(u, v, name: str = "leaf"):
    """spec/state.py is_device_leaf as a predicate over pages, defined by facts
    (hypotheses) in the shape z3 decides well: a leaf is resident and unlocked with no live node below it
    holding a device copy (on trees satisfying tree_owner/tree_closed/tree_paths/
    device_closed the same as the spec's check of the child pages); a resident unlocked
    non-leaf has such a node below it, named by a witness function."""
    f = u.forest
    leaf = z3.Function(f"{name}!{next(_ids)}", PageSort, z3.BoolSort())
    wit = z3.Function(f"{name}.witness!{next(_ids)}", PageSort, PageSort)
    ready = lambda x: z3.And(v.dev(x) == RESIDENT, z3.Not(v.lock(x) > 0))
    u.facts.append(forall(lambda x: z3.Implies(leaf(x), z3.And(ready(x), forall(
        lambda y: z3.Implies(z3.And(v.live(y), f.lt(x, y)), v.dev(y) == ABSENT))))))
    u.facts.append(forall(lambda x: z3.Implies(z3.And(ready(x), z3.Not(leaf(x))), z3.And(
        v.live(wit(x)), f.lt(x, wit(x)), v.dev(wit(x)) != ABSENT))))
    return leaf


def all_durable(u, v, e):
    return forall(lambda p: z3.Implies(node_has_page(u, v, e, p), v.durable(p)))


def is_duplicate(u, v, e):
    return z3.And(v.live(e), v.dev(e) != ABSENT, v.host(e) == HOST_RESIDENT)


def can_reclaim_duplicate(u, v, e):
    ok = z3.And(is_duplicate(u, v, e), z3.Not(v.href(e) > 0))
    if u.cfg.has("reclaim-during-loadback"):
        return ok
    return z3.And(ok, z3.Not(v.lbp(e)))


# --- spec properties ---------------------------------------------------------------------


def no_ghost(u, v):
    return forall(lambda e: z3.Implies(v.live(e), z3.Or(v.dev(e) == RESIDENT, v.host(e) == HOST_RESIDENT)))


def no_use_after_free(u, v):
    """Every page under a copy in flight is cached in a node that still holds what the
    copy needs (spec/properties.py _dma_targets_held): D->H: device resident, host
    WRITING; H->D: device LOADING, host resident; H->L3 (a rank that reads for storage):
    host resident; and no prefetch read in flight into freed host slots."""
    def held(p, dev, host):
        x = v.own(p)
        return z3.And(v.cached(p), v.host(x) == host, *([v.dev(x) == dev] if dev is not None else []))

    return z3.And(z3.Not(v.pfreed), forall(lambda p: z3.And(
        z3.Implies(v.wfly(p), held(p, RESIDENT, WRITING)),
        z3.Implies(v.lfly(p), held(p, LOADING, HOST_RESIDENT)),
        z3.Implies(z3.And(v.reads, v.sfly(p)), held(p, None, HOST_RESIDENT)))))


def counter_sanity(u, v):
    return forall(lambda e: z3.Implies(v.live(e), z3.And(v.lock(e) >= 0, v.href(e) >= 0)))


def locked_never_evicted(u, s, t, a):
    return forall(lambda e: z3.Implies(
        z3.And(s.live(e), s.lock(e) > 0, s.dev(e) == RESIDENT),
        z3.And(t.live(e), t.dev(e) != ABSENT)))


def release_safety(u, s, t, a):
    """A host copy dropped from a node that keeps a device copy: unreferenced, not
    pending a load-back, and (write_back) not a device leaf while a non-leaf duplicate
    was left reclaimable; (write-through) unlocked, resident and fully durable. The
    registry is the pre-state's (``a["dups"]``: registry membership per page), device
    leaves are the pre-state's (``a["leaf"]``, device_leaves)."""
    cfg = u.cfg
    dups, leaf = a["dups"], a["leaf"]
    held = a.get("held", lambda d: z3.BoolVal(False))  # prefetch.held_during_step
    # spec/properties._held_while_evicting: held locked by the step's own eviction
    evicting = a.get("evict_held", lambda d: z3.BoolVal(False))

    def per_node(e):
        dropped = z3.And(s.live(e), t.live(e), s.host(e) == HOST_RESIDENT, t.host(e) == ABSENT,
                         t.dev(e) != ABSENT)
        spared = exists(lambda d: z3.And(
            dups(d), d != e, t.live(d), can_reclaim_duplicate(u, s, d), can_reclaim_duplicate(u, t, d),
            z3.Not(leaf(d)), z3.Not(held(d))))
        wb_ok = z3.Not(z3.And(leaf(e), z3.Not(evicting(e)), spared))
        marked = t.update(durable=lambda p: z3.Or(s.durable(p), t.durable(p)))  # before the step or after
        wt_ok = z3.And(z3.Not(t.lock(e) > 0), t.dev(e) == RESIDENT, all_durable(u, marked, e))
        ok = z3.And(z3.Not(t.href(e) > 0), z3.Not(t.lbp(e)), if_(cfg.wb, wb_ok, wt_ok))
        return z3.Implies(dropped, ok)

    return forall(per_node)


def prefix_closed(u, v):
    """Every page above a live node's start is cached (the spec says the page right
    above it; on trees satisfying tree_closed the two are the same)."""
    return forall(lambda e, a: z3.Implies(z3.And(v.live(e), u.forest.lt(a, v.start(e))), v.cached(a)), 2)


def holds_device_slot(v, p):
    """Page p's device copy occupies a slot: it is cached and its node's device copy is
    not absent (resident or loading)."""
    return z3.And(v.cached(p), v.dev(v.own(p)) != ABSENT)


def slot_ownership(u, v):
    """The device pool's half of spec slot_ownership (its host half and the free counter
    stay with the bounded encoding's slot_conservation): no two pages own one slot, no
    owned slot is free, and every slot is owned or free (no leak)."""
    held = lambda p: holds_device_slot(v, p)
    x = z3.Const(f"slot!{next(_ids)}", SlotSort)
    return z3.And(
        forall(lambda p: z3.Implies(held(p), z3.Not(v.dfree(v.dslot(p))))),
        forall(lambda p, q: z3.Implies(z3.And(held(p), held(q), p != q), v.dslot(p) != v.dslot(q)), 2),
        z3.ForAll([x], z3.Or(v.dfree(x), exists(lambda p: z3.And(held(p), v.dslot(p) == x)))),
    )


# --- strengthening invariants ------------------------------------------------------------


def tree_owner(u, v):
    return forall(lambda p: z3.Implies(v.cached(p), z3.And(v.live(v.own(p)), node_has_page(u, v, v.own(p), p))))


def tree_chain(u, v):
    f = u.forest
    return forall(lambda e: z3.Implies(v.live(e), z3.And(
        f.le(v.start(e), e),
        forall(lambda p: z3.Implies(f.in_chain(v.start(e), e, p), z3.And(v.cached(p), v.own(p) == e))))))


def tree_closed(u, v):
    """Cached pages are closed under ancestors (the bounded form says parents; on a
    finite forest the two are the same)."""
    return forall(lambda a, p: z3.Implies(z3.And(v.cached(p), u.forest.le(a, p)), v.cached(a)), 2)


def tree_paths(u, v):
    """Nodes are unbranched runs: a cached page below an inner page p of a node is on
    that node's chain or below its end (with tree_chain, the same as the bounded form:
    a child of an inner page belongs to the same node)."""
    f = u.forest
    return forall(lambda p, c: z3.Implies(
        z3.And(v.cached(p), v.cached(c), f.lt(p, c), v.own(p) != p), f.comparable(v.own(p), c)), 2)


def node_fields(u, v):
    wb = u.cfg.wb
    return forall(lambda e: z3.Implies(v.live(e), z3.And(
        v.dev(e) >= 0, v.dev(e) <= 2, v.host(e) >= 0, v.host(e) <= 2, v.hits(e) >= 0,
        (v.dev(e) == LOADING) == v.lbp(e),
        z3.Implies(v.dev(e) == LOADING, v.host(e) == HOST_RESIDENT),
        z3.Implies(v.host(e) == WRITING, z3.And(z3.Not(b_(wb)), v.dev(e) == RESIDENT)),
    )))


def device_closed(u, v):
    f = u.forest
    return forall(lambda x, e: z3.Implies(
        z3.And(v.live(x), v.live(e), f.lt(x, e), v.dev(e) != ABSENT), v.dev(x) != ABSENT), 2)


def durable_cached(u, v):
    return forall(lambda p: z3.Implies(v.durable(p), v.cached(p)))


def queue_pages(u, v):
    """What the bounded queue and reference-count invariants say about the pages under
    the queues, in page form (a hypothesis, not a target: each clause follows from
    invariants of the bounded audit, whose own obligations are theirs):
    write_queue + lock_accounting + node_fields: a D->H copy's page is cached in a
    WRITING node, which holds its write lock (lock >= 1); load_queue + lock_accounting:
    an H->D copy's page is in a LOADING node, locked by the load (its anchor is at or
    below); backup_queue + href_accounting: a backup's page is in a host-resident node
    holding a host reference; entries cover whole nodes and are pairwise disjoint, so a
    node's pages are all on one entry (finished or not) or on none; prefetch_queue +
    href_accounting: a prefetch's anchor is a live host-resident node it holds a host
    reference on."""
    def node_wide(rel):
        return forall(lambda p, q: z3.Implies(z3.And(rel(p), v.cached(q), v.own(q) == v.own(p)), rel(q)), 2)

    at = lambda p, f: f(v.own(p))
    return z3.And(
        forall(lambda p: z3.And(
            z3.Implies(z3.Or(v.wfly(p), v.wdn(p)), z3.And(v.cached(p), at(p, v.host) == WRITING, at(p, v.lock) >= 1)),
            z3.Implies(z3.Or(v.lfly(p), v.ldn(p)), z3.And(v.cached(p), at(p, v.dev) == LOADING, at(p, v.lock) >= 1)),
            z3.Implies(v.sfly(p), z3.And(v.cached(p), at(p, v.host) == HOST_RESIDENT, at(p, v.href) >= 1)),
            z3.Not(z3.And(v.wfly(p), v.wdn(p))), z3.Not(z3.And(v.lfly(p), v.ldn(p))),
            z3.Implies(v.anchored(p), z3.And(v.live(p), v.host(p) == HOST_RESIDENT, v.href(p) >= 1)))),
        *[node_wide(getattr(v, n)) for n in ("wfly", "wdn", "lfly", "ldn")])


# --- consensus and durability, at the steps that leave them to the drain round -------------
# Only the drain round releases mirrors, writes the plan and the fail-closed flag, and
# adds durable marks (from its acks); these obligations are decided here for every other
# step, and the drain round's and the sync rounds' digest check over the plan and ack
# relations and the round's collective choices of proofs.epr_drain. ``a["action"]``:
# the step's name.

DRAIN = "drain_storage_control_queues"
SYNC_ROUNDS = ("writing_check", "loading_check", DRAIN)  # proofs.protocol.SYNC_ROUNDS


def released(u, s, t, e):
    """A write-through mirror release (proofs.protocol._released): a host copy dropped
    from a node that keeps its device copy."""
    return z3.And(z3.Not(b_(u.cfg.wb)), s.live(e), t.live(e), s.host(e) == HOST_RESIDENT,
                  t.host(e) == ABSENT, t.dev(e) != ABSENT)


def release_after_consensus(u, s, t, a):
    """Off the drain round: no mirror is released at all (the drain: proofs.epr_drain)."""
    if a["action"] == DRAIN:
        from . import epr_drain

        return epr_drain.release_after_consensus(u, s, t, a)
    return forall(lambda e: z3.Not(released(u, s, t, e)))


def mismatch_fail_closes(u, s, t, a):
    """A statement about drain rounds only (proofs.protocol: no part elsewhere; the
    drain: proofs.epr_drain)."""
    if a["action"] == DRAIN:
        from . import epr_drain

        return epr_drain.mismatch_fail_closes(u, s, t, a)
    return z3.BoolVal(True)


def fail_closed_is_final(u, s, t, a):
    return z3.Implies(s.closed, z3.And(t.closed, z3.Not(t.planned), forall(lambda e: z3.Not(released(u, s, t, e)))))


def reclaim_digest_checked(u, s, t, a):
    """A statement about sync rounds only (proofs.protocol: no part elsewhere; the
    rounds: proofs.epr_drain)."""
    if a["action"] in SYNC_ROUNDS:
        from . import epr_drain

        return epr_drain.reclaim_digest_checked(u, s, t, a)
    return z3.BoolVal(True)


def durable_only_when_acked(u, s, t, a):
    """Off the drain round (the only step that reads acks): no page becomes durable (the
    drain: proofs.epr_drain)."""
    if a["action"] == DRAIN:
        from . import epr_drain

        return epr_drain.durable_only_when_acked(u, s, t, a)
    return forall(lambda p: z3.Implies(t.durable(p), s.durable(p)))


def no_collective_hang(u, v):
    return v.hung == 0


def flags(u, v):
    """hung and halted are one of their codes (proofs/strengthen.py flags)."""
    from .state import HALT_WHERE, HUNG

    return z3.And(v.hung >= 0, v.hung <= max(HUNG.values()), v.halted >= 0, v.halted <= max(HALT_WHERE.values()))


def release_plan(u, v):
    """proofs/strengthen.py release_plan, the plan's list shape read as ``plan_wf``."""
    on = u.cfg.mirror_release_on()
    return z3.And(v.plan_wf, v.mismatch >= 0, z3.Implies(v.closed, z3.Not(v.planned)),
                  z3.Implies(z3.Not(b_(on)), z3.And(z3.Not(v.planned), z3.Not(v.closed), v.mismatch == 0)))


def release_queue(u, v):
    return z3.And(v.relq_n >= 0, v.relq_sum >= v.relq_n)


def registry(u, v):
    """proofs/strengthen.py registry, the lists' shape read as ``dups_wf``/``digest_wf``."""
    on = z3.And(b_(u.cfg.wb), b_(u.cfg.dupr))
    return z3.And(v.dups_wf, v.digest_wf, z3.Implies(z3.Not(on), v.dups_empty),
                  z3.Implies(z3.Not(z3.And(on, u.multi)), v.digest_empty))


def shared_queues(u, v):
    """proofs/strengthen.py shared_queues for this rank against the state's first."""
    from .paged import SHARED

    return z3.And(*[v.f[n] == v.f[f"r0_{n}"] for n in SHARED])


UPROPS: Dict[str, UProp] = {
    p.name: p
    for p in [
        UProp("no_ghost", "invariant", no_ghost),
        UProp("no_use_after_free", "invariant", no_use_after_free),
        UProp("counter_sanity", "invariant", counter_sanity),
        UProp("prefix_closed", "invariant", prefix_closed),
        UProp("slot_ownership", "invariant", slot_ownership),
        UProp("slot_conservation", "invariant", _counting.slot_conservation),
        UProp("lock_accounting", "invariant", _locks.lock_accounting),
        UProp("locked_never_evicted", "transition", locked_never_evicted),
        UProp("release_safety", "transition", release_safety),
        UProp("tree_owner", "invariant", tree_owner),
        UProp("tree_chain", "invariant", tree_chain),
        UProp("tree_closed", "invariant", tree_closed),
        UProp("tree_paths", "invariant", tree_paths),
        UProp("node_fields", "invariant", node_fields),
        UProp("device_closed", "invariant", device_closed),
        UProp("durable_cached", "invariant", durable_cached),
        UProp("release_after_consensus", "transition", release_after_consensus),
        UProp("mismatch_fail_closes", "transition", mismatch_fail_closes),
        UProp("fail_closed_is_final", "transition", fail_closed_is_final),
        UProp("reclaim_digest_checked", "transition", reclaim_digest_checked),
        UProp("durable_only_when_acked", "transition", durable_only_when_acked),
        UProp("no_collective_hang", "invariant", no_collective_hang),
        UProp("flags", "invariant", flags),
        UProp("release_plan", "invariant", release_plan),
        UProp("release_queue", "invariant", release_queue),
        UProp("shared_queues", "invariant", shared_queues),
        UProp("registry", "invariant", registry),
    ]
}
UINVARIANTS = [n for n, p in UPROPS.items() if p.kind == "invariant"]
# Hypotheses that are consequences of bounded invariants (see each), never targets.
UHYPOTHESES = {"queue_pages": queue_pages}
