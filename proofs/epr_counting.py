"""Counting over the page sort: the free-page counters against the pages held.

The page-sorted encoding (proofs.paged) has sets of pages, not numbers. slot_conservation
equates the pools' free counters with totals minus numbers of pages, so this module adds a
*cardinality abstraction*: an integer term ``#S`` for each finite set of pages S that the
encoding names (the pages one rank holds on the device or the host, the pages a step frees
or takes), constrained only by facts that are valid for every finite set, added as ground
instances where they are used, never as quantified axioms over sets:

- ``#S >= 0``;
- the balance of one step (``balance``): if the step's freed sets F1..Fn are pairwise
  disjoint, its taken sets T1..Tm pairwise disjoint, and the pages that left the held set
  X are exactly F \\ T, those that joined exactly T \\ F (F, T the unions), then
  ``#X' - #X = sum #Tj - sum #Fi``. Valid for finite sets: #X' - #X = #(X' \\ X) - #(X \\ X')
  = #(T \\ F) - #(F \\ T) = #T - #F, and a disjoint union's size is the sum of the sizes.
  With no freed or taken sets it says equal sets have equal sizes.

A step's encoding (proofs.epr_actions) moves its counters where the spec does, through
``moved``: the counter changes by the number of pages of a set the step names from its own
choices (the node it evicts, the victims evict_host picks, the nodes it stages), the spec's
arithmetic, and the set goes into the step's ledger (``u.ledger``); ``settle`` adds the
balance instances between the pre- and post-state. Nothing ties a freed set to what
leaves the held set except that instance's hypothesis, which z3 must prove from the step:
a step that frees pages it keeps, takes pages it already held, or counts a page twice
(the variants orphan-host-subtree, prefetch-double-free) has no balance, and the
obligation fails.

Over a closed page sort (the agreement tests, proofs.epr_agreement: ``u.pages``) every
``#S`` is defined exactly, the sum over the pages of S's indicator, so the instances are
checked against real counts there.
"""

from __future__ import annotations

import itertools
from typing import Callable, List

import z3

from ..spec.state import ABSENT, WRITING
from .forest import forall
from .paged import COUNTERS, Paged
from .sym import const

_ids = itertools.count()

# The pools (a free counter each) and the pages of a view each one holds: a cached page
# whose node holds a copy in that tier (spec/properties.py _pools_balance: node lengths of
# the live nodes with the copy).
POOLS = ("dev_free", "host_free")


def held(v: Paged, pool: str) -> Callable:
    tier = v.dev if pool == "dev_free" else v.host
    return lambda p: z3.And(v.cached(p), tier(v.own(p)) != ABSENT)


def node_pages(v: Paged, nodes: Callable) -> Callable:
    """The pages of the nodes with ``nodes(x)`` (a page's node is its owner: on trees
    satisfying tree_owner and tree_chain, a node's length is the number of pages it owns)."""
    return lambda p: z3.And(v.cached(p), nodes(v.own(p)))


def _fact(u, *facts) -> None:
    """Facts only the counting obligations need (``TARGETS``): kept apart
    (``counting_facts``) so that the other obligations of a step do not pay for them."""
    u.facts.extend(facts)
    u.__dict__.setdefault("counting_facts", []).extend(facts)


def counting_facts(u) -> list:
    return getattr(u, "counting_facts", [])


def size(u, pages: Callable, name: str):
    """``#pages``: a fresh integer >= 0 (exact over a closed page sort)."""
    n = z3.Int(f"#{name}!{next(_ids)}")
    _fact(u, n >= 0)
    closed = getattr(u, "pages", None)
    if closed is not None:
        _fact(u, exact_size(n, pages, closed))
    u.__dict__.setdefault("sizes", []).append((n, pages))
    return n


def exact_size(n, pages: Callable, closed) -> z3.BoolRef:
    return n == z3.Sum([z3.If(pages(c), 1, 0) for c in closed] or [z3.IntVal(0)])


def exact(u) -> Callable:
    """For a finite model search over given page constants (forest.finite_model): every
    ``#S`` the context named, defined exactly, so a model found is a real counterexample
    (model-based instantiation may give sizes no finite set has)."""
    return lambda closed: [exact_size(n, pages, closed) for n, pages in getattr(u, "sizes", ())] + [
        forall(lambda x, fn=fn, pages=pages: exact_size(fn(x), lambda p: pages(x, p), closed))
        for fn, pages in getattr(u, "size_fns", ())]


def held_size(u, v: Paged, pool: str):
    """``#held(v, pool)``, one term per view (memoised on the view's field functions)."""
    memo = u.__dict__.setdefault("held_sizes", {})
    key = (pool, *(id(v.f[n]) for n in ("cached", "own", "dev" if pool == "dev_free" else "host")))
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = (size(u, held(v, pool), f"held_{pool}"), v)  # v kept: ids stay unique
    return hit[0]


def slot_conservation(u, v: Paged):
    """spec slot_conservation on one rank: each free counter is >= 0 and equals its pool's
    size minus the pages held (the host pool also holds the prefetches' reserved slots,
    ``pq_held``, and the release queue's, ``relq_sum``)."""
    cfg = u.cfg
    dev, host = held_size(u, v, "dev_free"), held_size(u, v, "host_free")
    return z3.And(v.dev_free >= 0, v.dev_free + dev == cfg.device_pages,
                  v.host_free >= 0, v.host_free + host + v.pq_held + v.relq_sum == cfg.host_pages)


# the obligations whose targets count (their counterexamples are searched with exact sizes)
TARGETS = ("slot_conservation", "lock_accounting")


def writing_locked(u, v: Paged):
    """A node staging its host copy holds its write lock (lock_accounting: lock_ref counts
    1 for host WRITING under write-through, node_fields: WRITING only under
    write-through), so it is no device leaf: eviction never deletes it with its host
    slots taken. A hypothesis of the counting obligations, a consequence of invariants of
    the bounded audit (whose own obligations are theirs)."""
    return forall(lambda e: z3.Implies(z3.And(v.live(e), v.host(e) == WRITING), v.lock(e) >= 1))


def reserved_nonnegative(u, v: Paged):
    """The prefetches in flight reserve n >= 1 host pages each (prefetch_queue), so
    together >= 0 (a hypothesis as writing_locked: it keeps counterexamples' pre-states
    concrete, the proofs do not need it)."""
    return v.pq_held >= 0


def running_locked(u, v: Paged):
    """A running request's node and an H->D copy's anchor are live and locked
    (lock_accounting: lock_ref >= the requests and copies counted at the node, one at
    least). Implied by the counting obligations' own hypothesis lock_accounting
    (epr_locks) with the instance "a set with a member has size >= 1"; stated directly,
    as z3 does not find that instance in time."""
    return z3.And(forall(lambda q: z3.Implies(v.runs(q), z3.And(v.live(v.rlock(q)), v.lock(v.rlock(q)) >= 1))),
                  forall(lambda p: z3.Implies(v.lanch(p), z3.And(v.live(p), v.lock(p) >= 1))))


def anchor_loading(u, v: Paged):
    """An H->D copy's anchor has a device copy (LOADING until loading_check acks it:
    load_back marks the chain, anchor included, LOADING, and a LOADING node is locked,
    so not evicted): so a load_back's node, device-ABSENT, anchors no copy yet, and its
    new anchor adds one to the counts (epr_locks.loads_added). A consequence of
    load_queue and lock_accounting of the bounded audit, a hypothesis as running_locked."""
    return forall(lambda p: z3.Implies(v.lanch(p), v.dev(p) != ABSENT))


HYPOTHESES = {"writing_locked": writing_locked, "reserved_nonnegative": reserved_nonnegative,
              "running_locked": running_locked, "anchor_loading": anchor_loading}


# --- a step's ledger --------------------------------------------------------------------------


class Entry:
    def __init__(self, pool: str, sign: int, pages: Callable, n, cond=True):
        self.pool, self.sign, self.pages, self.n, self.cond = pool, sign, pages, n, cond

    def at(self, p):
        return z3.And(const(self.cond), self.pages(p))

    def amount(self):
        return z3.If(const(self.cond), self.n, 0)


def moved(u, v: Paged, pool: str, sign: int, pages: Callable, amount=None, name: str = "moved") -> Paged:
    """The step frees (sign +1) or takes (-1) ``pages`` in ``pool``: the counter moves by
    their number (the spec's node lengths), or by ``amount(number)``, and the set joins
    the step's ledger with its number (what ``balance`` compares with the held sets)."""
    n = size(u, pages, f"{name}_{pool}")
    if hasattr(u, "ledger"):
        u.ledger.append(Entry(pool, sign, pages, n))
    return v.update(**{pool: v.f[pool] + sign * (n if amount is None else amount(n))})


def branch(u, mark: int, cond) -> None:
    """The ledger entries since ``mark`` happen only where ``cond`` holds (a step's branch,
    epr_actions.view_ite)."""
    if hasattr(u, "ledger"):
        for e in u.ledger[mark:]:
            e.cond = z3.And(const(e.cond), cond)


def mark(u) -> int:
    return len(getattr(u, "ledger", ()))


def balance(u, pre: Paged, post: Paged, pool: str, entries: List[Entry]):
    """The balance instance of ``pool`` across one step (module docstring)."""
    x0, x1 = held(pre, pool), held(post, pool)
    freed = [e for e in entries if e.pool == pool and e.sign > 0]
    taken = [e for e in entries if e.pool == pool and e.sign < 0]
    f_any = lambda p: z3.Or([e.at(p) for e in freed]) if freed else z3.BoolVal(False)
    t_any = lambda p: z3.Or([e.at(p) for e in taken]) if taken else z3.BoolVal(False)
    disjoint = [forall(lambda p, a=a, b=b: z3.Not(z3.And(a.at(p), b.at(p))))
                for group in (freed, taken) for a, b in itertools.combinations(group, 2)]
    exact = forall(lambda p: z3.And(
        z3.And(f_any(p), z3.Not(t_any(p))) == z3.And(x0(p), z3.Not(x1(p))),
        z3.And(t_any(p), z3.Not(f_any(p))) == z3.And(x1(p), z3.Not(x0(p)))))
    delta = z3.Sum([z3.IntVal(0)] + [e.amount() for e in taken]) - z3.Sum([z3.IntVal(0)] + [e.amount() for e in freed])
    return z3.Implies(z3.And(*disjoint, exact),
                      held_size(u, post, pool) - held_size(u, pre, pool) == delta)


# --- the steps ---------------------------------------------------------------------------------

# The steps whose counter updates are followed (through ``moved`` in proofs.epr_actions,
# or none: the counters carried; check_prefetch_progress and the drain round through
# proofs.epr_drain; load_back through its eviction or the CP planner's victims,
# proofs.epr_sched_evict); every other step leaves them free.
COUNTED = ("init", "evict", "insert", "load_back", "prefetch_from_storage", "writing_check", "loading_check",
           "lock_request", "unlock_request", "prefetch_timeout", "prefetch_read_fails", "prefetch_revoke",
           "check_prefetch_progress", "drain_storage_control_queues")  # the last two: proofs.epr_drain


def begin(u) -> None:
    u.ledger = []


def settle(u, name: str, pre: Paged, post: Paged) -> Paged:
    """The step's counters: init's values, the balance instances of a counted step, free
    values otherwise."""
    ledger = u.__dict__.pop("ledger", [])
    if name == "init":  # nothing held: an empty set has size 0
        _fact(u, *[z3.Implies(forall(lambda p: z3.Not(held(post, pool)(p))), held_size(u, post, pool) == 0)
                   for pool in POOLS])
        return post.update(dev_free=const(u.cfg.device_pages), host_free=const(u.cfg.host_pages),
                           pq_held=z3.IntVal(0))
    if name not in COUNTED:
        return post.update(**{c: z3.Int(f"{name}.{c}!{next(_ids)}") for c in COUNTERS})
    _fact(u, *[balance(u, pre, post, pool, ledger) for pool in POOLS])
    return post


# --- the spec's allocations ---------------------------------------------------------------------


def fits(u, v: Paged, pool: str) -> None:
    """The spec took what it took from ``pool`` only where it fit: v, the view after the
    taking, has a counter >= 0 (insert's guard: insert_device_need, computed by the walk
    the insert then does, <= dev_free; a host allocation's success: allocate_host's ok
    means host_free >= need)."""
    _fact(u, z3.Implies(getattr(u, "fit_cond", True), v.f[pool] >= 0))  # (where the step runs: ``fit_cond``)


def peer_amount(u, when, name: str) -> Callable:
    """The pages an allocation takes (``moved``'s amount): under the fixed protocol the
    node's length on this rank (replicas are identical where a replicated step runs:
    rank_agreement, as the bounded encoding says in proofs/encode/eviction.py); with a
    variant whose replicas diverge (spec/variants.py breaks_rank_symmetry), the first
    wanting rank's, which may be a peer's: any value >= 0."""
    from ..spec.variants import VARIANTS

    if not any(VARIANTS[n].breaks_rank_symmetry for n in u.cfg.variants if n in VARIANTS):
        return lambda n: n
    x = z3.Int(f"{name}!{next(_ids)}")
    _fact(u, x >= 0)
    return lambda n: z3.If(const(when), x, 0)


def reserve(u, v: Paged, ok) -> Paged:
    """prefetch_from_storage: where the allocation succeeded, the prefetch's n host pages
    (n >= 0: missing pages, or the storage hit) move from host_free to the prefetches'
    reservations; the allocation succeeded only if they fit."""
    n = z3.Int(f"prefetch_n!{next(_ids)}")
    _fact(u, n >= 0, z3.Implies(ok, n <= v.host_free))
    amount = z3.If(ok, n, 0)
    return v.update(host_free=v.host_free - amount, pq_held=v.pq_held + amount)


def unreserve(u, v: Paged) -> Paged:
    """revoke-frees-in-flight: the revoked prefetch's reserved pages (some n >= 0; none
    if they were freed already) go back to host_free at once."""
    n = z3.Int(f"revoked_n!{next(_ids)}")
    _fact(u, n >= 0)
    return v.update(host_free=v.host_free + n, pq_held=v.pq_held - n)



# --- request locks (spec/request_locks.py) ------------------------------------------------------


def lock_path(u, v: Paged, end, delta: int, when=True) -> Paged:
    """spec/tree.py lock_path: every live node at or above ``end`` (``end`` a node end)
    gets ``delta`` on its lock count, where ``when``."""
    on = lambda x: z3.And(const(when), v.live(x), u.forest.le(x, end))
    return v.set_node(on, lock=lambda x: v.lock(x) + delta)


def unlock_params(u) -> dict:
    """unlock_request: the request (its last page) and the node its lock named
    (RankState.running; ``unlock``). lock_accounting (a running request's lock names a
    live node on its own path, and every live node's lock_ref counts the running requests
    whose node is at or below it) gives that node live, on the request's path, and
    lock >= 1 on every live node at or above it: assumed here, a consequence of an invariant of the bounded audit (whose own
    obligations are its), like epr_properties.queue_pages."""
    from .forest import fresh_page

    return {"req": fresh_page("req"), "locked": fresh_page("locked")}


def unlock(u, v: Paged, a) -> Paged:
    """dec_lock_ref on the node the request locked (unlock_params); the request stops
    running."""
    from .epr_locks import runs_removed

    locked, req = a["locked"], a["req"]
    u.facts += [v.live(locked), u.forest.le(locked, req), v.runs(req), v.rlock(req) == locked,
                forall(lambda x: z3.Implies(z3.And(v.live(x), u.forest.le(x, locked)), v.lock(x) >= 1))]
    out = lock_path(u, v, locked, -1).update(runs=lambda q: z3.And(v.runs(q), q != req)).named("unlocked", u.facts)
    runs_removed(u, v, out, req)
    return out


def size_fn(u, pages: Callable, name: str, add: Callable = None):
    """``x -> #{p : pages(x, p)}``: a size per page x (a fresh function, >= 0; exact over a
    closed page sort); its fact goes to ``add(u, fact)`` (default: every obligation's)."""
    from .forest import PageSort

    fn = z3.Function(f"#{name}!{next(_ids)}", PageSort, z3.IntSort())
    u.__dict__.setdefault("size_fns", []).append((fn, pages))
    closed = getattr(u, "pages", None)
    fact = forall(lambda x: fn(x) >= 0 if closed is None else exact_size(fn(x), lambda p: pages(x, p), closed))
    (add or (lambda u, f: u.facts.append(f)))(u, fact)
    return fn


def unlock_loads(u, v: Paged, loaded: Callable) -> Paged:
    """loading_check's unlocks: each acked H->D copy, named by its anchor (the node its
    load_back locked the path of: a live node the copy loads, ``loaded``; every loaded
    node has one at or below it), unlocks the live nodes at or above its anchor once
    (spec lock_path(end, -1)), so a node loses the number of acked anchors at or below
    it. lock_accounting (lock_ref counts the H->D copies whose anchor is at or below the
    node; anchors are distinct, the copies covering disjoint LOADING chains) gives
    lock >= that number: assumed, as in ``unlock``."""
    from .epr_actions import choice
    from .forest import PageSort

    acked = choice("acked_load")
    wit = z3.Function(f"acked_anchor!{next(_ids)}", PageSort, PageSort)
    u.facts += [forall(lambda p: z3.Implies(acked(p), z3.And(v.live(p), loaded(p)))),
                forall(lambda x: z3.Implies(loaded(x), z3.And(acked(wit(x)), u.forest.le(x, wit(x)))))]
    below = size_fn(u, lambda x, p: z3.And(acked(p), u.forest.le(x, p)), "acked_below")
    u.facts += [forall(lambda x: z3.Implies(v.live(x), v.lock(x) >= below(x))),
                forall(lambda p: z3.Implies(acked(p), v.lanch(p)))]  # acked copies are queued ones
    out = v.set_node(v.live, lock=lambda x: v.lock(x) - below(x)).update(
        lanch=lambda p: z3.And(v.lanch(p), z3.Not(acked(p)))).named("acked", u.facts)
    from .epr_locks import loads_acked

    loads_acked(u, v, out, acked, below)
    return out
