"""spec/cp_planner.py's local_access, the one part of that module the proofs model (the
CP planner itself is refused, proofs.scope): under victim_order = "lru" a rank touches a
host leaf on its own (a probe, a metrics walk). Only that rank's wall-clock order moves,
which the encoded state does not hold (encode.host_eviction.victim_keys gives each
evict_host a free order instead), so the step leaves the encoded state as it is."""

from __future__ import annotations

from ..sym import and_, eq, or_
from .tree import is_host_leaf, live
from .write_path import rank_param, rank_view


def local_access_params(ctx, s):
    e = ctx.int("node")
    ctx.side.append(and_(e >= 0, e < ctx.k))
    return {"rank": rank_param(ctx), "node": e}


def local_access_guard(ctx, s, a):
    """A live host leaf of the rank (_touchable) that is not already its most recent
    touch (checked where the clock is known: proofs.agreement on concrete states)."""
    rv = rank_view(s, a["rank"])
    e = a["node"]
    clock = ctx.clock_of(a["rank"]) if ctx.lru_positions is not None else None

    def at(x):
        ok = and_(eq(e, x), live(rv, x), is_host_leaf(ctx, rv, x))
        if clock is None:
            return ok
        later = or_(*(and_(live(rv, y), clock[y] > clock[x]) for y in range(ctx.k) if y != x))
        return and_(ok, later)

    return and_(ctx.cfg.lru, or_(*(at(x) for x in range(ctx.k))))


def local_access(ctx, s, a):
    return s
