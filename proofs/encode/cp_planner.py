"""spec/cp_planner.py: seed 004's owner-lane load-back planner and local_access.

The planner is encoded as the spec runs it, on each rank's own view: lanes of pages,
per-lane deficits, then at most K greedy rounds (each plans one node, and a K-page
universe has at most K nodes, so K rounds reach the spec's fixpoint), each taking the
candidate with the smallest (-gain, -credit, order, end page), with ancestor-unlock credit
and ancestor admission. Lanes and lane capacities are exact for every cp_lanes the model
files accept (1..8): ``(depth - 1) mod L`` and ``device_pages`` split evenly, enumerated
over L.

The planner's order is not encoded state (as for host victims, encode.host_eviction
victim_keys): each load_back sees a free order, one for every rank when the pre-state's
replicas are identical (the replicated LRU order is part of the replica) and the variant
is off, else one per rank. planner-local-tiebreak keys every rank by its own clock, so
its keys are free per rank. On concrete states (proofs.agreement) the keys are the
state's: the replicated LRU position (victim_order = "lru") or none (page order), and
each rank's clock position under the variant (``ctx.planner_order``).

local_access: a rank touches one of its device leaves (cp_planner) or host leaves
(victim_order = "lru") on its own; only its wall clock moves, which the encoded state does
not hold, so the step leaves the encoded state as it is.
"""

from __future__ import annotations

from ...spec.state import ABSENT, HOST_RESIDENT
from ..config import CP_LANES_MAX
from ..state import RV
from ..sym import and_, eq, implies, ite, ne, not_, or_, py, sel, sum_
from .tree import is_device_leaf, is_host_leaf, live, node_len, on_path, remove_nodes
from .write_path import rank_param, rank_view

TIEBREAK = "planner-local-tiebreak"


# --- lanes (spec lane_of, lane_capacity, lane_free, lane_deficits) ------------------------


def _lane_count(ctx) -> int:
    """Lane indices a page can have: min(L, K) for a known L, else K."""
    L = py(ctx.cfg.cp_lanes)
    return min(L, ctx.k) if L is not None else ctx.k


def _lane_is(ctx, p: int, lane: int):
    """(depth(p) - 1) mod cp_lanes == lane, enumerated over depth and cp_lanes."""
    L, depth = ctx.cfg.cp_lanes, ctx.uni.depth[p]
    Lv, dv = py(L), py(depth)
    if Lv is not None and dv is not None:
        return (dv - 1) % Lv == lane
    ls = [Lv] if Lv is not None else range(1, CP_LANES_MAX + 1)
    return or_(*(and_(eq(depth, d + 1), eq(L, n)) for d in range(ctx.k) for n in ls if d % n == lane))


def lanes(ctx):
    """lanes[p][l]: page p is on lane l (memoised per encoding)."""
    memo = ctx.__dict__.setdefault("_cp_lanes", {})
    if "lanes" not in memo:
        memo["lanes"] = [[_lane_is(ctx, p, l) for l in range(_lane_count(ctx))] for p in range(ctx.k)]
    return memo["lanes"]


def lane_capacity(ctx, lane: int):
    """device_pages split evenly over cp_lanes, the first lanes taking the rest."""
    D, L = ctx.cfg.device_pages, ctx.cfg.cp_lanes
    Lv = py(L)

    def cap(n):
        Dv = py(D)
        if Dv is not None:
            q, r = divmod(Dv, n)
            return q + (1 if lane < r else 0)
        return D / n + ite(D % n > lane, 1, 0)

    if Lv is not None:
        return cap(Lv)
    out = cap(CP_LANES_MAX)
    for n in range(CP_LANES_MAX - 1, 0, -1):
        out = ite(eq(L, n), cap(n), out)
    return out


def _count(ctx, pages, lane: int):
    """Pages with ``pages[p]`` on the lane."""
    ln = lanes(ctx)
    return sum_([ite(and_(pages[p], ln[p][lane]), 1, 0) for p in range(ctx.k)])


def device_page(ctx, rv: RV, p: int):
    """Page p is cached in a node holding a device copy (spec lane_free's pages)."""
    return and_(rv.own[p] >= 0, ne(sel(rv.dev, rv.own[p]), ABSENT))


def lane_free(ctx, rv: RV, lane: int):
    return lane_capacity(ctx, lane) - _count(ctx, [device_page(ctx, rv, p) for p in range(ctx.k)], lane)


def deficits(ctx, rv: RV, pages, total):
    """lane_deficits: per lane, what a device allocation of ``pages`` (a condition per
    page; ``total`` of them) lacks; one lane: the shortfall of the pool."""
    one = eq(ctx.cfg.cp_lanes, 1)
    pool = ite(total > rv.dev_free, total - rv.dev_free, 0)
    out = []
    for lane in range(_lane_count(ctx)):
        short = _count(ctx, pages, lane) - lane_free(ctx, rv, lane)
        out.append(ite(one, pool if lane == 0 else 0, ite(short > 0, short, 0)))
    return out


def lanes_fit(ctx, rv: RV, pages, total):
    return not_(or_(*(d > 0 for d in deficits(ctx, rv, pages, total))))


def insert_lanes_fit(ctx, rv: RV, q):
    """write_path._lanes_fit: with more than one lane, each lane has room for the pages
    insert(q) takes (the request's pages not cached, or cached in an evicted node)."""
    k, uni = ctx.k, ctx.uni
    if py(ctx.cfg.cp_lanes) == 1:
        return True
    taken = [and_(uni.anc_sym(p, q), or_(rv.own[p] < 0, eq(sel(rv.dev, rv.own[p]), ABSENT))) for p in range(k)]
    return or_(eq(ctx.cfg.cp_lanes, 1), lanes_fit(ctx, rv, taken, sum_([ite(t, 1, 0) for t in taken])))


# --- the planner (spec plan_victims) --------------------------------------------------------


def planner_keys(ctx):
    """Per rank handle, the order key of each end page (ties by the end page)."""
    if ctx.planner_order is not None:
        return ctx.planner_order
    cfg = ctx.cfg
    call = ctx.int("plan_call")  # a fresh name per load_back
    if cfg.has(TIEBREAK) or not ctx.replicas_agree:
        own = [ctx.rank_int(f"{call}.clock{p}") for p in range(ctx.k)]
        return lambda h: [own[p](h) for p in range(ctx.k)]
    # victim_order = "lru": the replicated LRU position; page order: the end page alone
    shared = [ite(cfg.lru, ctx.int(f"{call}.order{p}"), 0) for p in range(ctx.k)]
    return lambda h: shared


class _Tree:
    """One rank's tree as the planner reads it (nothing here changes while it plans)."""

    def __init__(self, ctx, rv: RV, protected):
        k, uni, cfg = ctx.k, ctx.uni, ctx.cfg
        self.k = k
        self.live = [live(rv, x) for x in range(k)]
        self.dev = rv.dev
        # child[x][y]: node y hangs off node x (its start's parent page is x's end)
        self.child = [[and_(self.live[x], self.live[y], or_(*(and_(eq(uni.parent[c], x), eq(rv.own[c], y))
                                                           for c in range(x + 1, k))))
                       if y > x else False for y in range(k)] for x in range(k)]
        # above[y][x]: node y is a strict ancestor of node x
        self.above = [[and_(self.live[y], self.live[x], uni.anc[y][x]) if y < x else False
                       for x in range(k)] for y in range(k)]
        ln = lanes(ctx)
        self.cnt = [[sum_([ite(and_(eq(rv.own[p], x), ln[p][l]), 1, 0) for p in range(k)])
                     for l in range(len(ln[0]))] for x in range(k)]
        childless = [not_(or_(*self.child[x])) for x in range(k)]
        self.base = [and_(self.live[x], ne(rv.dev[x], ABSENT), not_(rv.lock[x] > 0), not_(protected[x]),
                          or_(eq(rv.host[x], HOST_RESIDENT), and_(not_(cfg.wb), childless[x])))
                     for x in range(k)]

    def leaf_after(self, x, planned):
        return and_(self.base[x], *(implies(self.child[x][y], or_(planned[y], eq(self.dev[y], ABSENT)))
                                    for y in range(self.k)))

    def gain(self, x, rem):
        return sum_([ite(c < d, c, d) for c, d in zip(self.cnt[x], rem)])

    def nearest(self, x, stop):
        """[y is the nearest strict ancestor node of x with stop[y]]."""
        return [and_(self.above[y][x], stop[y],
                     *(implies(and_(self.above[z][x], self.above[y][z]), not_(stop[z])) for z in range(y + 1, x)))
                if y < x else False for y in range(self.k)]


def plan(ctx, rv: RV, e, rem, key):
    """plan_victims for deficits ``rem`` (per lane) with order keys ``key``: (the plan
    covers every deficit, [x is planned]); the planned set is only meaningful with it."""
    k = ctx.k
    t = _Tree(ctx, rv, [on_path(ctx, rv, x, e) for x in range(k)])
    none = [False] * k
    planned = list(none)
    pool = [and_(is_device_leaf(ctx, rv, x), t.leaf_after(x, none)) for x in range(k)]
    for _round in range(k):
        active = or_(*(r > 0 for r in rem))
        gains = [t.gain(x, rem) for x in range(k)]
        stop = [or_(planned[y], and_(ne(rv.dev[y], ABSENT), or_(not_(t.base[y]), gains[y] > 0))) for y in range(k)]
        best, bg, bu, bo, found = 0, 0, 0, 0, False
        for x in range(k):
            near = t.nearest(x, stop)
            credit = sum_([ite(and_(near[y], not_(planned[y]), t.base[y]), gains[y], 0) for y in range(x)])
            u = ite(gains[x] > 0, 0, credit)
            ok = and_(active, pool[x], not_(planned[x]), t.leaf_after(x, planned), or_(gains[x] > 0, u > 0))
            better = or_(not_(found), gains[x] > bg, and_(eq(gains[x], bg), or_(u > bu, and_(eq(u, bu), key[x] < bo))))
            take = and_(ok, better)
            best, bg, bu, bo = ite(take, x, best), ite(take, gains[x], bg), ite(take, u, bu), ite(take, key[x], bo)
            found = or_(found, ok)
        picked = [and_(found, eq(best, x)) for x in range(k)]
        planned = [or_(planned[x], picked[x]) for x in range(k)]
        rem = [ite(found, _minus(r, sum_([ite(picked[x], t.cnt[x][l], 0) for x in range(k)])), r)
               for l, r in enumerate(rem)]
        # ancestor admission: the nearest planned-or-device ancestor of the victim joins
        # the pool if it is a leaf after the plan
        reach = [or_(planned[y], ne(rv.dev[y], ABSENT)) for y in range(k)]
        admit = [False] * k
        for x in range(k):
            near = t.nearest(x, reach)
            admit = [or_(admit[y], and_(picked[x], near[y])) for y in range(k)]
        pool = [or_(and_(pool[y], not_(picked[y])), and_(admit[y], not_(planned[y]), t.leaf_after(y, planned)))
                for y in range(k)]
    return not_(or_(*(r > 0 for r in rem))), planned


def _minus(r, c):
    d = r - c
    return ite(d > 0, d, 0)


def evict_victims(ctx, rv: RV, victim):
    """Demote the backed victims, delete the others (write-through leaves)."""
    k = ctx.k
    freed = sum_([ite(victim[x], node_len(ctx, rv, x), 0) for x in range(k)])
    backed = [and_(victim[x], eq(rv.host[x], HOST_RESIDENT)) for x in range(k)]
    rv = rv._replace(dev_free=rv.dev_free + freed)
    for x in range(k):
        rv = rv.set_fields(x, backed[x], dev=ABSENT)
    return remove_nodes(ctx, rv, lambda x: and_(victim[x], not_(backed[x])))


def chain_pages(ctx, rv: RV, chain):
    """Per page, whether it belongs to a node of ``chain`` (a condition per node)."""
    return [or_(*(and_(eq(rv.own[p], x), chain[x]) for x in range(ctx.k))) for p in range(ctx.k)]


def load_room(ctx, rv: RV, e, chain, total, key):
    """What load_back(e) needs on one rank before its chain fits: (the chain fits after
    the planner's evictions (its guard), the rank view after them)."""
    rem = deficits(ctx, rv, chain_pages(ctx, rv, chain), total)
    short = or_(*(d > 0 for d in rem))
    if py(ctx.cfg.cp) is False:
        return not_(short), rv  # no planner: the chain must fit as the pool is
    ok, planned = plan(ctx, rv, e, rem, key)
    evict = and_(ctx.cfg.cp, short)
    after = evict_victims(ctx, rv, [and_(evict, ok, x) for x in planned])
    return or_(not_(short), and_(ctx.cfg.cp, ok)), after


def load_keys(ctx):
    """The order keys of the load_back being encoded (one free order per step, shared by
    its guard and its effect)."""
    memo = ctx.__dict__
    if memo.get("_cp_keys") is None:
        memo["_cp_keys"] = planner_keys(ctx)
    return memo["_cp_keys"]


def order_into_state(ctx, value, reps, state):
    """A CTI's pre-state with the order its load_back's planner saw (``value``: a term's
    value in the z3 model; ``reps``: a rank handle per rank of ``state``): each rank's
    clock under planner-local-tiebreak, the replicated LRU order under victim_order =
    "lru"; live node ends by (key, end page), so the explicit spec replays the same plan."""
    keys = ctx.__dict__.get("_cp_keys")
    if keys is None or ctx.planner_order is not None:
        return state
    field = "clock" if ctx.cfg.has(TIEBREAK) else ("lru" if value(ctx.cfg.lru) else None)
    if field is None:
        return state
    ranks = []
    for h, rs in zip(reps, state.ranks):
        key = [value(x) for x in keys(h)]
        order = tuple(sorted((e for e, n in enumerate(rs.nodes) if n is not None), key=lambda e: (key[e], e)))
        ranks.append(rs._replace(**{field: order}))
    return state._replace(ranks=tuple(ranks))


# --- local_access ----------------------------------------------------------------------


def local_access_params(ctx, s):
    e = ctx.int("node")
    ctx.side.append(and_(e >= 0, e < ctx.k))
    return {"rank": rank_param(ctx), "node": e}


def local_access_guard(ctx, s, a):
    """A live touchable node of the rank (_touchable: device leaves under the planner,
    else host leaves) that is not already its most recent touch (checked where the clock
    is known: proofs.agreement on concrete states)."""
    cfg = ctx.cfg
    rv = rank_view(s, a["rank"])
    e = a["node"]
    clock = ctx.clock_of(a["rank"]) if ctx.clock_positions is not None else None

    def at(x):
        touchable = ite(cfg.cp, is_device_leaf(ctx, rv, x), is_host_leaf(ctx, rv, x))
        ok = and_(eq(e, x), live(rv, x), touchable)
        if clock is None:
            return ok
        later = or_(*(and_(live(rv, y), clock[y] > clock[x]) for y in range(ctx.k) if y != x))
        return and_(ok, or_(clock[x] < 0, later))

    return and_(or_(cfg.cp, cfg.lru), or_(*(at(x) for x in range(ctx.k))))


def local_access(ctx, s, a):
    return s
