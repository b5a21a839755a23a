"""Consensus properties of the two reclaim protocols, as transition obligations on the
spec's own transition relation (the bit-vector facts they rest on are in consensus.py).

  release_after_consensus  a mirror is released (write-through: a host copy dropped
                           under a resident device copy) only by a drain round, only for
                           a node of the rank's plan from the previous round, and only if
                           every rank proposed the identical (count, tokens, digest)
                           triple: no rank mutates before consensus.
  mismatch_fail_closes     a round whose triples differ releases nothing, counts the
                           mismatch on every rank, and the fail_close_after-th
                           consecutive one closes the feature on every rank.
  fail_closed_is_final     a rank that fail-closed stays closed, holds no plan and
                           releases nothing.
  reclaim_digest_checked   a ready-count round that passes (does not halt) saw identical
                           duplicate-reclaim victim sequences on every rank.
"""

from __future__ import annotations

from ..spec.state import ABSENT, HOST_RESIDENT
from .encode.storage_path import committable, plan_triple
from .encode.sync import tracks_digest_round
from .formula import Every
from .properties import Encoded
from .sym import and_, eq, implies, ne, not_, or_

SYNC_ROUNDS = ("writing_check", "loading_check", "drain_storage_control_queues")


def _released(ctx, rs, rt, e):
    return and_(
        not_(ctx.cfg.wb), rs.live(e), rt.live(e),
        eq(rs.host[e], HOST_RESIDENT), eq(rt.host[e], ABSENT), ne(rt.dev[e], ABSENT),
    )


def _triples_agree(ctx, s):
    space = s.space
    def triple(h):
        rv = s.rank(h)
        return plan_triple(ctx, rv, committable(ctx, rv))

    t0 = triple(space.r0)
    return space.all(lambda h: eq(triple(h), t0))


def release_after_consensus(ctx, s, name, t):
    drain = name == "drain_storage_control_queues"
    agree = _triples_agree(ctx, s) if drain else False

    def per_rank(h):
        rs, rt = s.rank(h), t.rank(h)
        parts = []
        for e in range(ctx.k):
            ok = and_(agree, rs.plan.contains(e)) if drain else False
            parts.append(implies(_released(ctx, rs, rt, e), ok))
        return and_(*parts)

    return [Every(per_rank)]


def mismatch_fail_closes(ctx, s, name, t):
    if name != "drain_storage_control_queues":
        return []
    space, cfg = s.space, ctx.cfg
    on = and_(cfg.mirror_release_on(), eq(s.halted, 0))
    any_closed = space.any(lambda h: s.rank(h).closed)
    any_plan = space.any(lambda h: s.rank(h).plan.n > 0)
    differ = not_(_triples_agree(ctx, s))
    mism = s.rank(space.r0).mismatch + 1
    closing = mism >= cfg.fail_close_after
    mismatch_round = and_(on, not_(any_closed), any_plan, differ)
    halted = ne(t.halted, 0)

    def per_rank(h):
        rs, rt = s.rank(h), t.rank(h)
        none = and_(*(not_(_released(ctx, rs, rt, e)) for e in range(ctx.k)))
        effect = and_(none, eq(rt.mismatch, mism), implies(closing, and_(rt.closed, eq(rt.plan.n, 0))))
        return implies(and_(mismatch_round, not_(halted)), effect)

    return [Every(per_rank)]


def fail_closed_is_final(ctx, s, name, t):
    def per_rank(h):
        rs, rt = s.rank(h), t.rank(h)
        none = and_(*(not_(_released(ctx, rs, rt, e)) for e in range(ctx.k)))
        return implies(rs.closed, and_(rt.closed, eq(rt.plan.n, 0), none))

    return [Every(per_rank)]


def reclaim_digest_checked(ctx, s, name, t):
    if name not in SYNC_ROUNDS:
        return []
    space = s.space
    d0 = s.rank(space.r0).digest
    passed = and_(tracks_digest_round(ctx), eq(s.halted, 0), eq(s.hung, 0), eq(t.halted, 0), eq(t.hung, 0))
    return [Every(lambda h: implies(passed, s.rank(h).digest.same(d0)))]


PROTOCOL = {
    p.name: p
    for p in [
        Encoded("release_after_consensus", "transition", release_after_consensus,
                "mirrors are released only from the previous round's plan, after every rank proposed the identical triple"),
        Encoded("mismatch_fail_closes", "transition", mismatch_fail_closes,
                "a plan mismatch releases nothing and the fail_close_after-th one closes the feature everywhere"),
        Encoded("fail_closed_is_final", "transition", fail_closed_is_final,
                "a fail-closed rank stays closed, plans nothing, releases nothing"),
        Encoded("reclaim_digest_checked", "transition", reclaim_digest_checked,
                "a passing ready-count round saw identical reclaim victims on every rank"),
    ]
}
