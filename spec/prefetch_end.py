"""How a prefetch ends (seed 004): the stop-policy vote of ``check_prefetch_progress``,
the ``timeout`` policy's timer, a read that fails on one rank, and revoke.

``can_terminate_prefetch``: each rank votes with its stop policy (best_effort: at once;
wait_complete: once its read completed; timeout: completed or its timer fired), and a
MAX all-reduce of ``[1 - can_terminate, terminated]`` decides: the prefetch terminates
when every rank can, or when the operation is terminated on any rank (``mark_terminate``:
its read failed midway, or the scheduler revoked it). No wall clock: the timer firing is
an action (``prefetch_timeout``), as a read finishing is.

Revoke (``prefetch_revoke_queue`` / ``release_aborted_request``): the scheduler revokes
an in-flight prefetch on every rank; the operation is terminated at once, and the next
drain round (``_drain_revoke``) retires it on every rank once every rank's read has
settled: the anchor's host reference is released and the host slots freed, never while a
read can still write into them.

Per-prefetch flags (``pflags``, aligned with ``pq``) are kept only when a model enables
one of these (``tracks_flags``), so every earlier model keeps its states.
"""

from __future__ import annotations

from . import slots
from .action import act
from .tree import update_node

NOT_DONE = -1  # pdone entry of a read that has not finished on that rank
TIMED_OUT, TERMINATED, REVOKED, FREED = 1, 2, 4, 8  # pflags bits


def tracks_flags(cfg) -> bool:
    return cfg.prefetch_stop == "timeout" or cfg.prefetch_revoke or cfg.prefetch_read_fail


def flags(rs, i: int) -> int:
    return rs.pflags[i] if rs.pflags else 0


def new_flags(m, rs):
    """pflags for a prefetch appended to ``pq``."""
    return rs.pflags + (0,) if tracks_flags(m.cfg) else ()


def drop_op(rs, i: int):
    """Take prefetch ``i`` out of the per-prefetch queues (pq, pdone, pflags, pslots)."""
    return rs._replace(
        pq=rs.pq[:i] + rs.pq[i + 1 :],
        pdone=rs.pdone[:i] + rs.pdone[i + 1 :],
        pflags=rs.pflags[:i] + rs.pflags[i + 1 :],
        pslots=rs.pslots[:i] + rs.pslots[i + 1 :],
    )


def _set_flag(rs, i: int, bit: int):
    f = list(rs.pflags)
    f[i] |= bit
    return rs._replace(pflags=tuple(f))


def _with_rank(s, r, rs):
    ranks = list(s.ranks)
    ranks[r] = rs
    return s._replace(ranks=tuple(ranks))


# --- the vote ------------------------------------------------------------------------------


def completed(rs, i: int) -> bool:
    """The read finished with every page the hit query found (a failed read did not)."""
    return rs.pdone[i] != NOT_DONE and not flags(rs, i) & TERMINATED


def can_terminate(m, rs, i) -> bool:
    """A rank's stop-policy vote (can_terminate_prefetch)."""
    stop = m.cfg.prefetch_stop
    if stop == "best_effort":
        return True
    if stop == "wait_complete":
        return completed(rs, i)
    return completed(rs, i) or bool(flags(rs, i) & TIMED_OUT)


def terminate_vote(m, s, i) -> bool:
    """The MAX all-reduce of ``[1 - can_terminate, terminated]``: terminate when every rank
    can, or when the operation is terminated on some rank. Variant terminated-half-dropped:
    the vote carries ``can_terminate`` only."""
    if all(can_terminate(m, rs, i) for rs in s.ranks):
        return True
    if m.cfg.has("terminated-half-dropped"):
        return False
    return any(flags(rs, i) & TERMINATED for rs in s.ranks)


def skips_vote(m, s, i) -> bool:
    """While the vote says go on, a rank that votes on its own terminates anyway and waits
    in the completed-pages MIN all-reduce its peers skipped: prefetch-vote-skipped (a rank
    that can terminate), timeout-local-vote (a rank whose timer fired)."""
    cfg = m.cfg
    if cfg.has("prefetch-vote-skipped") and any(can_terminate(m, rs, i) for rs in s.ranks):
        return True
    return cfg.has("timeout-local-vote") and any(flags(rs, i) & TIMED_OUT for rs in s.ranks)


# --- prefetch_timeout: a rank's timer fires ----------------------------------------------


def timeout_params(m, s):
    if m.cfg.prefetch_stop != "timeout":
        return
    for r, rs in enumerate(s.ranks):
        for i in range(len(rs.pq)):
            yield act("prefetch_timeout", rank=r, op=i)


def timeout_guard(m, s, a):
    """The rank's monotonic clock passes base + pages * per_page (is_prefetch_timeout) while
    its read has not completed; once fired it stays fired. A revoked prefetch is past voting."""
    rs = s.ranks[a["rank"]]
    i = a["op"]
    return i < len(rs.pq) and not flags(rs, i) & (TIMED_OUT | REVOKED) and not completed(rs, i)


def prefetch_timeout(m, s, a):
    r = a["rank"]
    return _with_rank(s, r, _set_flag(s.ranks[r], a["op"], TIMED_OUT))


# --- prefetch_read_fails: a storage batch fails on one rank -------------------------------


def read_fails_params(m, s):
    if not m.cfg.prefetch_read_fail:
        return
    for r, rs in enumerate(s.ranks):
        for i in range(len(rs.pq)):
            yield act("prefetch_read_fails", rank=r, op=i)


def read_fails_guard(m, s, a):
    rs = s.ranks[a["rank"]]
    i = a["op"]
    return i < len(rs.pq) and rs.pdone[i] == NOT_DONE


def prefetch_read_fails(m, s, a):
    """_page_transfer: a batch comes back short, the IO thread marks the operation
    terminated on this rank and stops; nothing it read is usable (one batch per read)."""
    r, i = a["rank"], a["op"]
    rs = s.ranks[r]
    pdone = list(rs.pdone)
    pdone[i] = 0
    return _with_rank(s, r, _set_flag(rs._replace(pdone=tuple(pdone)), i, TERMINATED))


# --- prefetch_revoke: the scheduler revokes a prefetch on every rank ---------------------


def revoke_params(m, s):
    if not m.cfg.prefetch_revoke:
        return
    for i in range(len(s.ranks[0].pq)):
        yield act("prefetch_revoke", op=i)


def revoke_guard(m, s, a):
    i = a["op"]
    rs0 = s.ranks[0]
    return (all(i < len(rs.pq) and rs.pq[i] == rs0.pq[i] for rs in s.ranks)
            and not flags(rs0, i) & REVOKED)


def prefetch_revoke(m, s, a):
    """terminate_prefetch on every rank (its read stops) and the revoke queued for the next
    drain round. Variant revoke-frees-in-flight: the host slots are freed now, as seed
    004's _force_release_pending_storage_ops does (safe there only because the storage
    threads were stopped first), while a read may still be writing into them."""
    i = a["op"]
    ranks = []
    for rs in s.ranks:
        rs = _set_flag(rs, i, REVOKED | TERMINATED)
        if m.cfg.has("revoke-frees-in-flight"):
            rs = _free_slots(m, rs, i)
        ranks.append(rs)
    return s._replace(ranks=tuple(ranks))


def _free_slots(m, rs, i):
    if flags(rs, i) & FREED:
        return rs
    if m.cfg.slots:
        rs = slots.release(m, rs, rs.pslots[i])
        rs = rs._replace(pslots=rs.pslots[:i] + ((),) + rs.pslots[i + 1 :])
    rs = rs._replace(host_free=rs.host_free + rs.pq[i][3])
    return _set_flag(rs, i, FREED)


def revokes_ready(m, s):
    """Revoked prefetches whose read has settled on every rank (_drain_revoke's count)."""
    if not m.cfg.prefetch_revoke:
        return ()
    rs0 = s.ranks[0]
    return tuple(i for i in range(len(rs0.pq))
                 if flags(rs0, i) & REVOKED and all(rs.pdone[i] != NOT_DONE for rs in s.ranks))


def retire_revoked(m, s):
    """_drain_revoke: each ready revoke releases its anchor and frees its host slots."""
    ready = revokes_ready(m, s)
    if not ready:
        return s
    ranks = []
    for rs in s.ranks:
        for i in reversed(ready):
            anchor = rs.pq[i][1]
            rs = _free_slots(m, rs, i)
            if anchor >= 0 and rs.nodes[anchor] is not None:
                rs = update_node(rs, anchor, href=rs.nodes[anchor].href - 1)
            rs = drop_op(rs, i)
        ranks.append(rs)
    return s._replace(ranks=tuple(ranks))


def held_by_prefetches(rs) -> int:
    """Host pages the prefetches in flight hold (a prefetch whose slots were freed early,
    revoke-frees-in-flight, holds none)."""
    return sum(op[3] for i, op in enumerate(rs.pq) if not flags(rs, i) & FREED)


def read_into_freed(m, rs):
    """A read still in flight into host slots already freed (revoke-frees-in-flight)."""
    for i in range(len(rs.pq)):
        if flags(rs, i) & FREED and rs.pdone[i] == NOT_DONE:
            return i
    return None
