"""spec/eviction.py evict_lru / make_room: the eviction the scheduler's own steps do
(seed 004's evict(num_tokens)): an insert without device room (``insert_evicts``) and a
load_back without device room (``load_back_evicts``, HiRadixCache.load_back's retry)
first evict device leaves in victim order, holding a node's path locked meanwhile.

The loop runs ``k`` rounds (k = the page bound). That is exact, not a cut-off: every
round each rank still short of room takes one victim or none; a victim either frees its
device pages (it is demoted or deleted, never a candidate again) or frees nothing and is
skipped for good (``stuck``); no round creates nodes. So a rank takes at most one victim
per node, and there are at most k nodes.

The victim order is victim_keys' (encode/host_eviction.py): the end page under page
order (exact); under victim_order = "lru" a free key per page, shared by every rank when
the pre-state's replicas agree (the replicated LRU is part of the replica), per rank
otherwise or under lru-local-clock. A free order covers every order the spec can keep
(an over-approximation); on concrete states the keys are the state's positions, exact.
"""

from __future__ import annotations

from ...spec.state import ABSENT, RESIDENT
from ..state import PerRank, state_ite
from ..sym import and_, eq, implies, ite, not_, or_, py, sel
from .eviction import evict_leaf, write_and_demote
from .host_eviction import allocate_host, victim_keys
from .tree import child_pages, is_device_leaf, live, lock_path, node_len, on_path
from .write_path import insert_device_need, last_walked

# The actions that evict by themselves, and the flag that switches it on.
EVICTING = {"insert": "insert_evicts", "load_back": "load_back_evicts"}
UNCHECKED = "lru-evicts-locked-parent"  # a pushed parent is popped without its lock check
CHAIN_UNLOCKED = "load-back-evicts-chain-unlocked"  # load_back holds the first resident ancestor


def bare_leaf(ctx, rv, x: int):
    """_leaf_on(forced): resident, no child holds a device copy, whatever its lock."""
    parts = [eq(rv.dev[x], RESIDENT)]
    for c, cond in child_pages(ctx, rv, x):
        parts.append(implies(cond, eq(sel(rv.dev, rv.own[c]), ABSENT)))
    return and_(*parts)


def _pick(ctx, rv, active, stuck, pushed, key):
    """One rank's victim this round: (end page, found, forced). Candidates are the live
    evictable device leaves not skipped yet (and, under lru-evicts-locked-parent, the
    pushed parents without device children, locked or not); the smallest key wins, ties
    by the end page (spec: min by victim_key)."""
    unchecked = ctx.cfg.has(UNCHECKED)
    victim, best, found, forced = 0, 0, False, False
    for x in range(ctx.k):
        leaf = is_device_leaf(ctx, rv, x)
        ok = or_(leaf, and_(pushed[x], bare_leaf(ctx, rv, x))) if unchecked else leaf
        cand = and_(active, live(rv, x), not_(stuck[x]), ok)
        take = and_(cand, or_(not_(found), key[x] < best))
        victim, best = ite(take, x, victim), ite(take, key[x], best)
        forced, found = ite(take, not_(leaf), forced), or_(found, cand)
    return victim, found, forced


def _round(ctx, s, victim, found, failing):
    """evict_nodes: rank h evicts ``victim(h)`` where ``found(h)``. Under write_back a
    victim without a host copy is staged first: one agreed host allocation of the first
    writer's length (evict_host as its fallback), then the writers whose allocation
    succeeded stage and demote; the others evict as evict() does."""
    cfg, space = ctx.cfg, s.space

    def needs_write(h):
        return and_(found(h), eq(sel(s.rank(h).host, victim(h)), ABSENT))

    plain = s.map(lambda h, rv: evict_leaf(ctx, rv, victim(h), found(h)))
    if py(cfg.wb) is False:
        return plain
    # the first writer's length; with identical replicas (the fixed protocol) every
    # writer's (see encode/eviction.evict), else any writer's: a superset of the first's
    agree = not cfg.has("partial-backup-leak")
    if agree:
        pick = space.first if cfg.variants else space.some
        need = pick(needs_write, lambda h: node_len(ctx, s.rank(h), victim(h)), 0)
    else:  # each writing rank asks for its own node's length, alone
        need = lambda h: ite(needs_write(h), node_len(ctx, s.rank(h), victim(h)), 0)  # noqa: E731
    alloc, oks = allocate_host(ctx, s, need, failing, agree)

    def after(h, rv):
        nw = needs_write(h)
        rv = evict_leaf(ctx, rv, victim(h), and_(found(h), not_(nw)))
        return write_and_demote(ctx, rv, victim(h), and_(nw, oks(h)))

    return state_ite(and_(cfg.wb, space.any(needs_write)), alloc.map(after), plain)


def _named(space, fn, tag):
    return PerRank(space, fn).named(tag)


def evict_lru(ctx, s, wants, failing):
    """Per rank, evict leaves in victim order until ``wants(h)`` device pages are freed
    or no candidate is left; a victim that frees nothing is skipped; under
    lru-evicts-locked-parent a victim's parent joins the candidates once it has freed
    something (the seed's heap push, popped without the lock check)."""
    space, k = s.space, ctx.k
    keys = victim_keys(ctx)
    freed = PerRank(space, lambda h: 0)
    stuck = [PerRank(space, lambda h: False) for _ in range(k)]
    pushed = [PerRank(space, lambda h: False) for _ in range(k)]
    unchecked = ctx.cfg.has(UNCHECKED)
    for i in range(k):
        cur = s
        picks = PerRank(space, lambda h, cur=cur, fr=freed, st=stuck, pu=pushed: _pick(
            ctx, cur.rank(h), fr(h) < wants(h), [x(h) for x in st], [x(h) for x in pu], keys(h)))
        victim = _named(space, lambda h, p=picks: p(h)[0], f"sched_victim{i}")
        found = _named(space, lambda h, p=picks: p(h)[1], f"sched_found{i}")
        s = _round(ctx, cur, victim, found, failing).named(f"sched_evict{i}")
        got = _named(space, lambda h, cur=cur, s=s: s.rank(h).dev_free - cur.rank(h).dev_free, f"sched_got{i}")
        freed = _named(space, lambda h, fr=freed, g=got: fr(h) + g(h), f"sched_freed{i}")
        stuck = [_named(space, lambda h, x=x, o=stuck[x], v=victim, f=found, g=got: or_(
            o(h), and_(f(h), eq(v(h), x), eq(g(h), 0))), f"sched_stuck{i}.{x}") for x in range(k)]
        if unchecked:
            up = PerRank(space, lambda h, cur=cur, v=victim: _parent_node(ctx, cur.rank(h), v(h)))
            pushed = [_named(space, lambda h, x=x, o=pushed[x], f=found, g=got, up=up, s=s: or_(
                o(h), and_(f(h), g(h) > 0, eq(up(h), x), live(s.rank(h), x))), f"sched_pushed{i}.{x}")
                for x in range(k)]
    return s


def _parent_node(ctx, rv, e):
    """parent_node: the node holding the page above node e's first page (-1: a root)."""
    par = ctx.uni.parent_of(sel(rv.start, e))
    return ite(par >= 0, sel(rv.own, par), -1)


def make_room(ctx, s, needs, hold, failing):
    """make_room: ``hold(h)`` (a node end, or -1) and its path locked, evict_lru frees
    each rank's shortfall ``needs(h) - dev_free``, the hold is dropped if the node is
    still in the tree."""
    space = s.space
    wants = PerRank(space, lambda h: ite(needs(h) > s.rank(h).dev_free, needs(h) - s.rank(h).dev_free, 0))
    locked = s.map(lambda h, rv: lock_path(ctx, rv, hold(h), 1, hold(h) >= 0))
    out = evict_lru(ctx, locked, wants, failing)
    return out.map(lambda h, rv: lock_path(ctx, rv, hold(h), -1, and_(hold(h) >= 0, live(rv, hold(h)))))


# --- the two callers ----------------------------------------------------------------------


def room_for_insert(ctx, s, q, failing):
    """insert_evicts: (the state after the insert's own eviction, whether the request
    fits every rank then). The eviction runs when some rank lacks room, holding the last
    node the request's walk reaches (spec/write_path._make_room); ``s`` itself, fitting,
    where the option is off (the guard then asks for room)."""
    cfg, space = ctx.cfg, s.space
    if py(cfg.insert_evicts) is False:
        return s, True
    need = lambda st, h: insert_device_need(ctx, st.rank(h), q)
    short = space.any(lambda h: need(s, h) > s.rank(h).dev_free)
    room = make_room(ctx, s, lambda h: need(s, h), lambda h: last_walked(ctx, s.rank(h), q), failing)
    after = state_ite(and_(cfg.insert_evicts, short), room, s).named("insert_room")
    from .cp_planner import insert_lanes_fit  # the spec's _fits: the pool and every CP lane

    return after, space.all(lambda h: and_(need(after, h) <= after.rank(h).dev_free,
                                           insert_lanes_fit(ctx, after.rank(h), q)))


def room_for_load(ctx, s, e, chain_of):
    """load_back_evicts: the state after the load_back's own eviction (``s`` where the
    option is off or every rank has room). ``chain_of(rv)`` = (chain conditions per
    page, total pages, first page) of the evicted chain above ``e``. The hold is ``e``
    (its path); load-back-evicts-chain-unlocked holds the chain's first resident
    ancestor (the node above the chain's top, -1 at the root)."""
    cfg, space = ctx.cfg, s.space
    if py(cfg.load_back_evicts) is False:
        return s
    total = lambda h: chain_of(s.rank(h))[1]
    short = space.any(lambda h: total(h) > s.rank(h).dev_free)
    if ctx.cfg.has(CHAIN_UNLOCKED):
        def hold(h):
            par = ctx.uni.parent_of(chain_of(s.rank(h))[2])
            return ite(par >= 0, sel(s.rank(h).own, par), -1)
    else:
        hold = lambda h: e
    room = make_room(ctx, s, total, hold, lambda h: False)
    return state_ite(and_(cfg.load_back_evicts, short), room, s).named("load_room")


def held_while_evicting(ctx, s, name, params):
    """spec/properties._held_while_evicting: per rank handle h and node x, whether the
    step's own eviction ran with x locked on h (release_safety does not count such a
    node as an evictable device leaf). None when the step evicts nothing by itself."""
    cfg = ctx.cfg
    if name == "insert" and py(cfg.insert_evicts) is not False:
        q = params["req"]

        def held(h, x):
            rv = s.rank(h)
            end = last_walked(ctx, rv, q)
            return and_(cfg.insert_evicts, insert_device_need(ctx, rv, q) > rv.dev_free, end >= 0,
                        on_path(ctx, rv, x, end))
        return held
    if name == "load_back" and py(cfg.load_back_evicts) is not False:
        from .load_path import load_chain

        e = params["node"]

        def held(h, x):
            rv = s.rank(h)
            return and_(cfg.load_back_evicts, live(rv, e), load_chain(ctx, rv, e)[1] > rv.dev_free,
                        on_path(ctx, rv, x, e))
        return held
    return None
