"""What every ready-count sync round does besides its own counts.

In SGLang the write acks, load acks, storage queue sizes and the duplicate-reclaim digest
share one MIN all-reduce (_sync_hicache_ready_counts); the digest travels as
[digest, -digest] and every rank asserts min == -max. A failed assertion stops the TP group
(fail-stop): the spec records it in ``State.halted`` and the state has no successors.
"""

from __future__ import annotations

from .digest import digests_agree


def digest_round(m, s, where: str):
    """The digest part of a sync round: (state, halt message or '').

    The digest is rolling in the code; once a round has found all ranks equal, comparing
    cumulative digests at the next round is the same as comparing what was folded in
    since (hash collisions aside), so the spec keeps each rank's victims since the last
    round (``RankState.digest``) and clears them after a passing round. Rounds run every
    scheduler iteration, so the sequences stay short.
    """
    cfg = m.cfg
    if not tracks_digest(cfg):
        return s, ""
    victims = [rs.digest for rs in s.ranks]
    if not cfg.has("digest-unchecked") and not digests_agree(cfg, victims):
        return s, f"{where}: duplicate-reclaim victims diverged across ranks"
    if any(victims):
        s = s._replace(ranks=tuple(rs._replace(digest=()) for rs in s.ranks))
    return s, ""


def digest_check_will_fire(m, s) -> bool:
    """The next round's digest comparison (as its arithmetic really computes it) fails."""
    cfg = m.cfg
    if not tracks_digest(cfg) or cfg.has("digest-unchecked"):
        return False
    return not digests_agree(cfg, [rs.digest for rs in s.ranks])


def tracks_digest(cfg) -> bool:
    return cfg.write_back and cfg.duplicate_reclaim and cfg.ranks > 1


def replicated(ranks, fn):
    """Apply a replicated step: every rank runs ``fn(index, rank_state)`` on its replica."""
    return tuple(fn(i, rs) for i, rs in enumerate(ranks))


def round_due(m, s) -> bool:
    """A reclaim happened since the last ready-count round. The scheduler runs that round
    (check_hicache_events) once per iteration, before it issues the next batch, so no
    replicated step may run until the round has compared the digests."""
    return tracks_digest(m.cfg) and any(rs.digest for rs in s.ranks)
