"""One rank's tree state over the page sort (proofs.forest): what the unbounded proofs see.

``PAGE_FIELDS`` lists the per-page state, one z3 function of a page each, by the names
of proofs/state.py ``RV`` (``own`` split into ``cached`` and the owning page): a new
per-page field of the spec is one more entry here plus its reading in ``from_rank``.
A ``Paged`` view holds one Python callable per field (page term -> value term), so an
action's effect is an EPR update: the new field is a lambda over the old ones, and
``named`` turns it into a fresh function defined by one universal equation (solvers
reason far better about a chain of named states than about one nested term).

Node fields are indexed by the node's end page, as RankState.nodes[end]; a page e is a
live node when it is cached and owns itself.
"""

from __future__ import annotations

import itertools
from typing import Callable, Dict, List

import z3

from .forest import PageSort, SlotSort, forall

I, B = z3.IntSort(), z3.BoolSort()
QUEUE_PAGES = ("wfly", "wdn", "lfly", "ldn", "sfly", "anchored")
PAGE_FIELDS: Dict[str, object] = {
    "cached": B,  # owner[p] >= 0
    "own": PageSort,  # owner[p] (meaningful where cached)
    "start": PageSort,  # nodes[e].start
    "dev": I, "host": I, "lock": I, "href": I, "hits": I,
    "lbp": B, "rel": B,
    "durable": B,  # bit p of RankState.durable
    "store": B,  # bit p of State.store[r]
    "dslot": SlotSort,  # RankState.dslot[p] (meaningful where the page holds a device copy)
    # the copies in flight over page p (spec no_use_after_free): on a D->H copy still
    # running (wq[wdone:]) or finished but not committed (wq[:wdone]); the same for H->D
    # (lq, ldone); on an H->L3 backup whose ack has not come (sq[len(sdone):]);
    # ``anchored``: the page ends the anchor node of some prefetch in pq
    **{q: B for q in QUEUE_PAGES},
    # entries named by pages, for counting (proofs.epr_locks): ``lanch``, the page ends the
    # anchor of an H->D copy in lq; ``runs``, the request ending at the page is running,
    # ``rlock`` the node end its lock names (RankState.running)
    "lanch": B, "runs": B, "rlock": PageSort,
    # backups and prefetches named by pages, for href_accounting (proofs.epr_href): the
    # page is on an sq entry's chain; a prefetch of the request ending at the page is in
    # pq, whether it has an anchor, the anchor's end page
    "scov": B, "pfq": B, "phas": B, "panc": PageSort,
    # and that prefetch's done count and flags (proofs.epr_prefetch): done != NOT_DONE,
    # done = 0, else its last done page; TIMED_OUT, REVOKED, TERMINATED, FREED
    "pdn": B, "pzero": B, "pdl": PageSort, "pto": B, "prev": B, "pterm": B, "pfre": B,
    # the drain round (proofs.epr_drain, ``DRAIN_PAGES``): the page is in this rank's plan
    # (an entry's end page); on an acked backup's chain (sq[:len(sdone)]); inside the prefix
    # this rank takes as completed (its reported count, a single writer's under MLA);
    # inside the prefix the writer stored (its actual count)
    "inplan": B, "sacked": B, "srep": B, "sstored": B,
}
DRAIN_PAGES = ("inplan", "sacked", "srep", "sstored")
# Per-slot state of the device pool (Config ``slots``): the free set, RankState.dfree.
SLOT_FIELDS: Dict[str, object] = {"dfree": B}
# Scalars: the rank's release plan (RankState.plan: nonempty, and well formed: strictly
# ascending page ids), mismatch count and fail-closed flag, written by the drain round
# only (spec/storage_path.py); its host_mem_release_queue as the bounded encoding holds
# it (entries, total pages), written by check_prefetch_progress and the drain round; the
# state's hung/halted codes (proofs/state.py HUNG, HALT_WHERE), written by the sync
# rounds only. Every other step carries them. ``r0_*``: the same per-rank scalars of the
# state's first rank (proofs/state.py REPLICA_SCALARS; shared_queues compares them).
SHARED = {"closed": B, "mismatch": I, "relq_n": I, "relq_sum": I}
# The duplicate registry and the reclaimed-victim list (RankState.dups, digest): empty,
# and well formed (distinct page ids); written by the steps in epr_actions.REGISTRY_WRITERS.
REGISTRY = {"dups_wf": B, "dups_empty": B, "digest_wf": B, "digest_empty": B,
            "digest_r0": B}  # this rank's victim list is the first rank's (reclaim_digest_checked)
# ``reads``: this rank's backups read host pages (not a single-writer follower: static);
# ``pfreed``: some prefetch read is in flight into host slots already freed
# (spec/prefetch_end.py read_into_freed).
# The pools' free counters (RankState.dev_free, host_free) and the host pages the
# prefetches in flight hold (spec/prefetch_end.py held_by_prefetches): proofs.epr_counting.
COUNTERS = {"dev_free": I, "host_free": I, "pq_held": I}
SCALAR_FIELDS: Dict[str, object] = {**SHARED, **COUNTERS, "planned": B, "plan_wf": B, "hung": I, "halted": I,
                                    **{f"r0_{n}": x for n, x in SHARED.items()}, **REGISTRY,
                                    "reads": B, "pfreed": B}
NODE_FIELDS = ("start", "dev", "host", "lock", "href", "hits", "lbp", "rel")
_ids = itertools.count()


class Paged:
    def __init__(self, fields: Dict[str, Callable]):
        self.f = dict(fields)

    def __getattr__(self, name):
        try:
            return self.__dict__["f"][name]
        except KeyError:
            raise AttributeError(name) from None

    def live(self, e):
        return z3.And(self.f["cached"](e), self.f["own"](e) == e)

    def update(self, **new: Callable) -> "Paged":
        f = dict(self.f)
        f.update(new)
        return Paged(f)

    def set_node(self, where: Callable, **values: Callable) -> "Paged":
        """Node fields: ``values[name](e)`` at every node e with ``where(e)``."""
        new = {}
        for name, val in values.items():
            old = self.f[name]
            new[name] = (lambda old, val: lambda e: z3.If(where(e), val(e), old(e)))(old, val)
        return self.update(**new)

    def named(self, tag: str, facts: List) -> "Paged":
        """Every field as a fresh function, defined equal to its term (facts). A field
        that already is a named function (or constant), i.e. unchanged since the last
        naming, is kept as it is: a copy would only add an equation to instantiate."""
        out = {}
        uid = next(_ids)
        for name, sort in PAGE_FIELDS.items():
            if _is_name(self.f[name]):
                out[name] = self.f[name]
                continue
            fn = z3.Function(f"{tag}.{name}!{uid}", PageSort, sort)
            facts.append(forall(lambda p, fn=fn, old=self.f[name]: fn(p) == old(p)))
            out[name] = fn
        for name, sort in SLOT_FIELDS.items():
            if _is_name(self.f[name]):
                out[name] = self.f[name]
                continue
            fn = z3.Function(f"{tag}.{name}!{uid}", SlotSort, sort)
            x = z3.Const(f"x!{uid}", SlotSort)
            facts.append(z3.ForAll([x], fn(x) == self.f[name](x)))
            out[name] = fn
        for name, sort in SCALAR_FIELDS.items():
            if _is_name(self.f[name]):
                out[name] = self.f[name]
                continue
            c = z3.Const(f"{tag}.{name}!{uid}", sort)
            facts.append(c == self.f[name])
            out[name] = c
        return Paged(out)


def _is_name(x) -> bool:
    """An uninterpreted function, or an uninterpreted constant."""
    if isinstance(x, z3.FuncDeclRef):
        return x.kind() == z3.Z3_OP_UNINTERPRETED
    return z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED


def symbolic(name: str) -> Paged:
    fields = {n: z3.Function(f"{name}.{n}", PageSort, s) for n, s in PAGE_FIELDS.items()}
    fields.update({n: z3.Function(f"{name}.{n}", SlotSort, s) for n, s in SLOT_FIELDS.items()})
    fields.update({n: z3.Const(f"{name}.{n}", s) for n, s in SCALAR_FIELDS.items()})
    return Paged(fields)


# --- concrete states (agreement tests, counterexamples) -------------------------------


def from_rank(rs, store_mask: int, pages: List, slots: List = (), hung: str = "", halted: str = "",
              r0=None, queues=None) -> List:
    """Facts fixing a symbolic view to a spec RankState (and its State's hung/halted, its
    first rank ``r0``, by default rs itself) over closed page constants (proofs.forest.Forest.closed) and, with slot identities,
    closed slot constants (one per device slot); returns (view, facts). ``queues``: the
    pages of each ``QUEUE_PAGES`` relation, ``reads`` and ``pfreed`` (queue_pages);
    without it the queues are empty."""
    from .state import HALT_WHERE, HUNG

    v = symbolic(f"conc{next(_ids)}")
    plan = list(rs.plan)
    facts = [v.planned == bool(plan),
             v.plan_wf == (plan == sorted(set(plan)) and all(0 <= e < len(pages) for e in plan)),
             v.hung == HUNG[hung], v.halted == HALT_WHERE[halted]]
    wf = lambda xs: len(set(xs)) == len(xs) and all(0 <= e < len(pages) for e in xs)
    facts += [v.dups_wf == wf(rs.dups), v.dups_empty == (not rs.dups),
              v.digest_wf == wf(rs.digest), v.digest_empty == (not rs.digest),
              v.digest_r0 == (rs.digest == (r0 or rs).digest)]
    for pre, x in (("", rs), ("r0_", r0 or rs)):
        facts += [v.f[pre + "closed"] == x.closed, v.f[pre + "mismatch"] == x.mismatch,
                  v.f[pre + "relq_n"] == len(x.relq), v.f[pre + "relq_sum"] == sum(x.relq)]
    from ..spec.prefetch_end import held_by_prefetches

    facts += [v.dev_free == rs.dev_free, v.host_free == rs.host_free, v.pq_held == held_by_prefetches(rs)]
    q = queues or {}
    facts += [v.reads == bool(q.get("reads", True)), v.pfreed == bool(q.get("pfreed", False))]
    facts += [v.f[n](c) == (p in q.get(n, ())) for n in (*QUEUE_PAGES, "lanch", "runs", *DRAIN_PAGES)
              for p, c in enumerate(pages)]
    facts += [v.rlock(pages[p]) == pages[e] for p, e in q.get("rlock", {}).items()]
    if rs.dslot:
        facts += [v.dfree(x) == bool(rs.dfree >> i & 1) for i, x in enumerate(slots)]
    for p, c in enumerate(pages):
        o = rs.owner[p]
        facts.append(v.cached(c) == (o >= 0))
        if rs.dslot and rs.dslot[p] >= 0:
            facts.append(v.dslot(c) == slots[rs.dslot[p]])
        if o >= 0:
            facts.append(v.own(c) == pages[o])
        facts.append(v.durable(c) == bool(rs.durable >> p & 1))
        facts.append(v.store(c) == bool(store_mask >> p & 1))
        n = rs.nodes[p]
        if n is not None:
            facts.append(v.start(c) == pages[n.start])
            for fld in NODE_FIELDS[1:]:
                facts.append(getattr(v, fld)(c) == getattr(n, fld))
    return v, facts


def queue_pages(m, rs, r: int) -> dict:
    """The ``QUEUE_PAGES`` relations of rank r's RankState, as page index sets, with
    ``reads`` and ``pfreed`` (for from_rank)."""
    from ..spec.prefetch_end import read_into_freed

    chain = lambda ops: {p for start, end in ops for p in m.pages.chain(start, end)}
    return {"wfly": chain(rs.wq[rs.wdone:]), "wdn": chain(rs.wq[:rs.wdone]),
            "lfly": chain(rs.lq[rs.ldone:]), "ldn": chain(rs.lq[:rs.ldone]),
            "sfly": chain(rs.sq[len(rs.sdone):]), "anchored": {op[1] for op in rs.pq if op[1] >= 0},
            "lanch": {end for _start, end in rs.lq},
            "runs": {m.pages.request_pages[q][-1] for q, _e in rs.running},
            "rlock": {m.pages.request_pages[q][-1]: e for q, e in rs.running},
            "reads": not (m.cfg.single_writer and r > 0), "pfreed": read_into_freed(m, rs) is not None}


def read_rank(model, v: Paged, order) -> dict:
    """A finite model's view as plain values per page index (``order``: the page
    elements in preorder, proofs.forest.Forest.parent_array)."""
    idx = {str(x): i for i, x in enumerate(order)}
    val = lambda t: model.eval(t, model_completion=True)

    slot_idx = {str(x): i for i, x in enumerate(model.get_universe(SlotSort) or [])}

    def pv(t):
        x = val(t)
        if z3.is_true(x):
            return True
        if z3.is_false(x):
            return False
        if x.sort() == PageSort:
            return idx.get(str(x), -1)
        if x.sort() == SlotSort:
            return slot_idx.get(str(x), -1)
        return x.as_long()

    out = {}
    for name in PAGE_FIELDS:
        out[name] = [pv(getattr(v, name)(x)) for x in order]
    out["dfree"] = [pv(v.dfree(x)) for x in model.get_universe(SlotSort) or []]
    out["closed"] = pv(v.closed)
    out.update({c: pv(v.f[c]) for c in COUNTERS})
    return out


def values_to_rank(vals: dict):
    """Per-page values (read_rank) as a spec RankState tree (queues and pools empty:
    the unbounded encoding does not hold them)."""
    from ..spec.state import Node, RankState

    k = len(vals["cached"])
    owner = tuple(vals["own"][p] if vals["cached"][p] else -1 for p in range(k))
    nodes = tuple(
        Node(vals["start"][e], *(vals[f][e] for f in NODE_FIELDS[1:])) if owner[e] == e else None
        for e in range(k)
    )
    from ..spec.state import ABSENT

    held = [owner[p] >= 0 and nodes[owner[p]].dev != ABSENT for p in range(k)]
    return RankState(owner=owner, nodes=nodes, dev_free=vals.get("dev_free", 0), host_free=vals.get("host_free", 0),
                     durable=sum(1 << p for p in range(k) if vals["durable"][p]),
                     dslot=tuple(vals["dslot"][p] if held[p] else -1 for p in range(k)),
                     dfree=sum(1 << i for i, f in enumerate(vals["dfree"]) if f), closed=vals.get("closed") is True)
