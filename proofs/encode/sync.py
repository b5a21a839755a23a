"""spec/sync.py and spec/digest.py: the digest part of every ready-count round, and the
w-bit wire arithmetic of negated pairs (used by the overflow variant and the release
plan digest)."""

from __future__ import annotations

import z3

from ..sym import SymList, and_, const, eq, ite, not_, or_

MULT = 1000003  # digest.mix


def tracks_digest_round(ctx):
    return ctx.cfg.tracks_digest(ctx.multi())


def round_due(ctx, s):
    """A reclaim happened since the last ready-count round: replicated steps wait."""
    return and_(tracks_digest_round(ctx), s.space.any(lambda h: s.rank(h).digest.n > 0))


def wrap(x, bits: int):
    """Two's-complement wrap to a signed ``bits``-wide integer (digest.wrap)."""
    m = 1 << bits
    r = x % m
    return ite(r >= (m >> 1), r - m, r)


def mix(cfg, d, node):
    raw = d * MULT + node + 1
    if cfg.has("negated-pair-overflow"):
        return wrap(raw, cfg.digest_bits)
    return raw % ((1 << (cfg.digest_bits - 1)) - 1)


def wire_digest(cfg, lst: SymList):
    """digest.wire_digest over a bounded list of node ends."""
    d = 0
    for i in range(lst.cap):
        d = ite(lst.valid(i), mix(cfg, d, lst.items[i][0]), d)
    return d


def negated_pairs_agree(space, value, bits: int):
    """What every rank concludes from MIN over [x, -x] in ``bits``-wide arithmetic;
    ``value(h)`` is rank h's field."""
    lo = space.min(lambda h: wrap(value(h), bits))
    neg_lo = space.min(lambda h: wrap(-value(h), bits))
    return eq(lo, wrap(-neg_lo, bits))


def digests_agree(ctx, s):
    """digest.digests_agree: exact victim sequences (an ideal hash), or under
    negated-pair-overflow the real w-bit wire comparison."""
    cfg, space = ctx.cfg, s.space
    if cfg.has("negated-pair-overflow"):
        return negated_pairs_agree(space, lambda h: wire_digest(cfg, s.rank(h).digest), cfg.digest_bits)
    d0 = s.rank(space.r0).digest
    return space.all(lambda h: s.rank(h).digest.same(d0))


def digest_round(ctx, s, where: str):
    """(state after the digest part of a round, halt condition)."""
    cfg, space = ctx.cfg, s.space
    tracks = tracks_digest_round(ctx)
    if cfg.has("digest-unchecked"):
        halt = False
    else:
        halt = and_(tracks, not_(digests_agree(ctx, s)))
    any_victims = space.any(lambda h: s.rank(h).digest.n > 0)
    clear = and_(tracks, not_(halt), any_victims)

    def cleared(h, rv):
        d = rv.digest
        return rv._replace(digest=SymList(d.cap, ite(clear, 0, d.n), d.items, d.overflow))

    return s.map(cleared), halt


def digest_check_will_fire(ctx, s):
    cfg = ctx.cfg
    if cfg.has("digest-unchecked"):
        return False
    return and_(tracks_digest_round(ctx), not_(digests_agree(ctx, s)))
