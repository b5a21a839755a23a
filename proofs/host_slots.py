"""slot_ownership's host half in the bounded encoding (spec/properties.py slot_ownership).

Per rank, over the host slot fields of proofs/encode/host_slots.py: the owners are the
pages of live nodes with a host copy (``hslot``), the reserved slots of every prefetch
entry that still holds them (its first ``n`` slot components, not FREED), and the release
queue's slots (``rset``). The obligation ``hok => ownership``:
  every owner's slot is a slot of the pool and not free; no two owners share a slot;
  every slot of the pool is free or owned (no leak).
The free counter's clause (free counter = number of distinct free slots) is
slot_conservation's: with distinct owners and no leak, the non-free slots are exactly
the owners' (docs/proofs.md).

The target is proved with ``slots`` fixed on (``FIX``), for the actions that may write
what it reads (``ACTIONS``); the others write none of it (``READS``, a frame
obligation as in proofs/epr_frame.py).
"""

from __future__ import annotations

from typing import List

import z3

from ..spec.prefetch_end import FREED
from ..spec.state import ABSENT
from .encode.host_slots import PSLOTS, on
from .encode.prefetch_end import FLAGS, has
from .encode.tree import live
from .formula import Every
from .sym import and_, const, implies, lt, ne, not_, or_, sel

NAME = "slot_ownership_host"
FIX = {"slots": True}
# spec fields the property reads (tree, pools, pq with its slots, the release queue)
READS = frozenset({"owner", "nodes", "hslot", "hfree", "pq", "pflags", "pslots", "rslots"})


def owners(ctx, rv) -> List:
    """(condition, slot term) for every finite owner: pages, then prefetch slots."""
    out = []
    for p in range(ctx.k):
        e = rv.own[p]
        held = and_(e >= 0, live(rv, e), ne(sel(rv.host, e), ABSENT))
        out.append((held, rv.hslot[p]))
    for i, it in enumerate(rv.pq.items):
        keeps = and_(rv.pq.valid(i), not_(has(it[FLAGS], FREED)))
        for j in range(ctx.k):
            out.append((and_(keeps, lt(j, it[3])), it[PSLOTS + j]))
    return out


def ownership(ctx, rv):
    cap = const(ctx.cfg.host_pages)
    free, rset = rv.hfree, rv.rset
    own = owners(ctx, rv)
    parts = []
    for i, (c, x) in enumerate(own):
        parts.append(implies(c, and_(x >= 0, x < cap, z3.Not(z3.Select(free, x)), z3.Not(z3.Select(rset, x)))))
        for d, y in own[:i]:
            parts.append(implies(and_(c, d), ne(x, y)))
    # (and, as rslots is aligned with relq: no queued slot while the queue is empty)
    queued = lambda s: z3.Implies(z3.Select(rset, s), z3.And(s >= 0, s < cap, z3.Not(z3.Select(free, s)),
                                                             const(rv.relq_n > 0)))
    leak = lambda s: z3.Implies(z3.And(s >= 0, s < cap, z3.Not(z3.Select(free, s)), z3.Not(z3.Select(rset, s))),
                                const(or_(*(and_(c, x == s) for c, x in own))))
    pool = ctx.cfg.host_pages
    if not isinstance(pool, int):  # every pool size: the clauses at the slot ``witness``
        w = witness(ctx)
        parts += [queued(w), leak(w)]
    else:  # a pool of ``pool`` slots (fixed: the counterexample search, concrete models): each slot
        parts += [f(z3.IntVal(x)) for x in range(pool) for f in (queued, leak)]
    return implies(rv.hok, and_(*parts))


def witness(ctx):
    r"""The slot the two per-slot clauses speak of, one constant per encoding. An
    obligation ``Inv(s) /\ step => P(s')`` whose P says "for every slot x" is refuted by
    one slot: its negation is ``not P(s')`` at a fresh constant w, and the hypothesis,
    "for every slot x" in Inv(s), is used at w only (a weaker hypothesis: a proof is
    sound; a counterexample may break Inv(s) at another slot, so ``prove`` looks for its
    counterexample on fixed pools, where every slot is checked). What the steps need at
    the slots they take (free, not queued) is part of ``hok``."""
    w = ctx.__dict__.get("_hslot_w")
    if w is None:
        w = ctx._hslot_w = z3.Int(f"hslot!w{ctx.tag}")
    return w


def slot_ownership_host(ctx, s):
    if not on(ctx):
        return []
    return [Every(lambda h: ownership(ctx, s.rank(h)))]


# pool sizes the counterexample search tries
SEARCH_POOLS = (1, 2, 3)
# The search first fixes the features that only add steps to every action they touch
# (a counterexample under a fixed configuration is one of the symbolic obligation's):
# z3 finds models of the smaller formula far sooner; then it searches every configuration.
NARROW = {"wb": False, "dupr": False, "alloc_asymmetry": False, "registry_skew": False, "lru": False, "cp": False,
          "insert_evicts": False, "load_back_evicts": False, "request_locks": False, "paged": False}


def prove(action: str, variants=frozenset(), k: int = 2, fix=None, cases=None, want_cti=True):
    """The obligation for one action, with ``slots`` on: a Result (proofs.obligations).

    Proved over every pool size (the per-slot clauses at one slot, ``witness``); a
    counterexample is searched with the host pool fixed to each of ``SEARCH_POOLS``
    slots (every slot checked, the spec's own picks), first under ``NARROW``: a bug
    variant there first, the correct protocol where the proof did not go through.
    Neither proved nor a counterexample found: unknown."""
    from .obligations import CASES, prove_action

    fix = {**(fix or {}), **FIX}
    cases = cases or CASES
    spent = 0.0
    if variants:  # a bug variant: look for its counterexample on small pools first
        got = _search_pools(action, variants, k, fix, cases, want_cti)
        if got.status == "failed":
            return got
        spent = got.seconds
    r = prove_action(action, [NAME], variants, k, fix, want_cti, cases=cases)[0]
    r = r._replace(seconds=r.seconds + spent)
    if r.status == "proved" or variants:
        return r._replace(status="unknown", cti=None) if r.status == "failed" else r
    # a model of the weaker hypothesis (see witness): a counterexample on a fixed pool
    got = _search_pools(action, variants, k, fix, cases, want_cti)
    return got._replace(seconds=got.seconds + r.seconds) if got.status == "failed" else r._replace(
        status="unknown", cti=None, seconds=r.seconds + got.seconds)


def _search_pools(action, variants, k, fix, cases, want_cti):
    spent, last = 0.0, None
    narrow = {**NARROW, **fix}
    for f in ([narrow] if narrow != fix else []) + [fix]:
        for pool in SEARCH_POOLS:
            if "host_pages" in fix and fix["host_pages"] != pool:
                continue
            last = _search(action, variants, k, {**f, "host_pages": pool}, cases, want_cti)
            spent += last.seconds
            if last.status == "failed":
                return last._replace(seconds=spent)
    return last._replace(seconds=spent)


def _search(action, variants, k, fix, cases, want_cti):
    from . import obligations

    out, spent = None, 0.0
    for case in cases if action != "init" else cases[:1]:
        su = obligations.setup(action, variants, k, fix, case)
        r = obligations.check_target(su, NAME, action, want_cti)
        spent += r.seconds
        if r.status == "failed":
            return r._replace(seconds=spent)
        out = r if out is None or r.status != "proved" else out
    return out._replace(seconds=spent)


def frame(action: str) -> bool:
    from .epr_frame import WRITES

    return action in WRITES and not READS & WRITES[action]


def actions(names) -> List[str]:
    """The actions whose obligation is solved (the rest are frame obligations)."""
    return [a for a in names if not frame(a)]


def value(m, s) -> bool:
    """The encoding's value on an explicit state of a model with ``slots`` (every rank)."""
    from .agreement import concrete_ctx
    from .formula import value as holds_on
    from .translate import to_terms

    ctx = concrete_ctx(m)
    return holds_on(ctx.space, slot_ownership_host(ctx, to_terms(m, s, ctx.space)))


def frame_result(action: str):
    """The obligation of an action that writes nothing it reads (``frame``)."""
    from .obligations import Result

    return Result(NAME, action, "proved", 0.0, pages="any")
