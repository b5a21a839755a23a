"""Host -> storage: the H->L3 backup finishing per rank, drain_storage_control_queues with
the mirror-release prepare/commit of seed 000, and the store losing keys."""

from __future__ import annotations

from .action import act
from .digest import negated_pairs_agree, plan_digest
from .durable import age_round, ageing, mark
from .host_eviction import is_redundant_mirror, victim_key
from .memo import per_model
from .prefetch_end import retire_revoked, revokes_ready
from .state import StorageAck, live_nodes, node_len, nodes_covering
from . import slots
from .sync import digest_round
from .tree import free_node_host, update_node

SKIP = -1  # a single-writer (MLA) follower's ack: it wrote nothing and defers to rank 0


def _writes(m, rank: int) -> bool:
    return not m.cfg.single_writer or rank == 0


# --- the H->L3 copy finishing on one rank ----------------------------------------------


def storage_backup_done_params(m, s):
    partial = m.cfg.fault("partial_storage")
    for r, rs in enumerate(s.ranks):
        i = len(rs.sdone)
        if i >= len(rs.sq):
            continue
        start, end = rs.sq[i]
        n = len(m.pages.chain(start, end))
        if partial and _writes(m, r):
            for k in range(n + 1):
                yield act("storage_backup_done", rank=r, pages=k)
        else:
            yield act("storage_backup_done", rank=r, pages=n)


def storage_backup_done_guard(m, s, a):
    """The head backup is in flight, and ``pages`` is what it can report: all of it, or
    under partial_storage any prefix (a replayed or shrunk trace may name any count)."""
    r, k = a["rank"], a["pages"]
    rs = s.ranks[r]
    if len(rs.sdone) >= len(rs.sq):
        return False
    start, end = rs.sq[len(rs.sdone)]
    n = len(m.pages.chain(start, end))
    if m.cfg.fault("partial_storage") and _writes(m, r):
        return 0 <= k <= n
    return k == n


def storage_backup_done(m, s, a):
    """The rank's backup thread finishes its head operation: the first ``pages`` pages
    reached the store; the ack reports the completed prefix."""
    r, k = a["rank"], a["pages"]
    rs = s.ranks[r]
    start, end = rs.sq[len(rs.sdone)]
    chain = m.pages.chain(start, end)
    store = list(s.store)
    if _writes(m, r):
        for p in chain[:k]:
            store[r] |= 1 << p
        reported = len(chain) if m.cfg.has("failed-batch-acked") else k
        ack = StorageAck(reported, k)
    else:
        ack = StorageAck(SKIP, SKIP)
    ranks = list(s.ranks)
    ranks[r] = rs._replace(sdone=rs.sdone + (ack,))
    return s._replace(ranks=tuple(ranks), store=tuple(store))


# --- drain_storage_control_queues --------------------------------------------------------


def mirror_release_on(m) -> bool:
    cfg = m.cfg
    return (
        cfg.mirror_release
        and cfg.storage
        and not cfg.write_back
        and not cfg.has("host-starvation")
    )


def deficit(m, rs) -> int:
    return max(0, m.cfg.host_free_target - rs.host_free)


def release_candidates(m, rs):
    """Derived from state each time, never from a stale list (seed 000)."""
    return list(_release_candidates(m, rs))


@per_model
def _release_candidates(m, rs):
    return tuple(sorted([e for e in live_nodes(rs) if is_redundant_mirror(m, rs, e)], key=victim_key(m, rs)))


@per_model
def prepare_plan(m, rs):
    """Pick candidates in key order until the pool deficit is covered."""
    want = deficit(m, rs)
    plan, tokens = [], 0
    if want == 0 or rs.closed:
        return ()
    for e in _release_candidates(m, rs):
        if tokens >= want:
            break
        plan.append(e)
        tokens += node_len(m.pages, rs, e)
    return tuple(plan)


def committable(m, rs):
    """The entries of last round's plan that are still release candidates on this rank,
    judged before this round's acks (what the rank proposes and would execute)."""
    return tuple(e for e in rs.plan if is_redundant_mirror(m, rs, e))


def plan_triple(m, rs, entries):
    """(count, tokens, digest): the plan's length, and the tokens and digest of the
    entries this rank would commit. Tokens and digest cover the committable entries, not
    the whole plan: durable marks are per rank, so a stale entry can be live on one rank
    and not on another, and agreeing on the plan alone let one rank release a mirror the
    other kept (found by the checker on wt-mirror-2r)."""
    tokens = sum(node_len(m.pages, rs, e) for e in entries)
    return (len(rs.plan), tokens, plan_digest(m.cfg, entries))


def execute_plan(m, rs, plan):
    """Release each planned mirror that is still a candidate (re-checked live)."""
    for e in plan:
        if is_redundant_mirror(m, rs, e):
            rs = free_node_host(m, rs, e)
            rs = update_node(rs, e, rel=True)
    return rs


def _mirror_work_pending(m, s) -> bool:
    if not mirror_release_on(m):
        return False
    for rs in s.ranks:
        if rs.closed:
            continue
        if rs.plan or (deficit(m, rs) > 0 and _release_candidates(m, rs)):
            return True
    return False


def drain_params(m, s):
    yield act("drain_storage_control_queues")


def drain_guard(m, s, a):
    # Runs every iteration while storage operations are outstanding; MIN may be 0.
    if any(rs.sq or rs.relq for rs in s.ranks) or revokes_ready(m, s):
        return True
    # An otherwise idle round still ages the durable marks (age_round) until the gate's
    # cap: not a stutter while some mark is younger than refresh_rounds.
    if mirror_release_on(m) and any(ageing(m, rs) for rs in s.ranks):
        return True
    return _mirror_work_pending(m, s)


def _synced_completed(m, s, i):
    """Per ack slot i, what each rank takes as completed: its own count, or in
    single-writer mode the MIN over ranks where followers send the SKIP sentinel (INT_MAX
    on the wire), i.e. the writer's count."""
    if not m.cfg.single_writer:
        return [rs.sdone[i].reported for rs in s.ranks]
    real = [rs.sdone[i].reported for rs in s.ranks if rs.sdone[i].reported != SKIP]
    synced = min(real) if real else 0
    return [synced] * len(s.ranks)


def drain_storage_control_queues(m, s, a):
    cfg = m.cfg
    s, halt = digest_round(m, s, "drain_storage_control_queues")
    if halt:
        return s._replace(halted=halt)
    s = retire_revoked(m, s)  # _drain_revoke runs first in the seed's drain
    nb = min(len(rs.sdone) for rs in s.ranks)
    nr = min(len(rs.relq) for rs in s.ranks)
    completed = [_synced_completed(m, s, i) for i in range(nb)]
    mirror = mirror_release_on(m)
    # The plan triples ride this round's all-reduce, so they are taken before its acks.
    entries = [committable(m, rs) for rs in s.ranks] if mirror else None
    ranks = [_drain_rank(m, rs, nb, nr) for rs in s.ranks]
    marks = [tuple([completed[i][r] for i in range(nb)]) for r in range(len(s.ranks))]
    # The agreed entries are released before this round's acks add durable marks: with a
    # bounded durable LRU (durable_capacity) a new mark can evict a planned entry's on one
    # rank only (marks are per rank), and the live re-check there would skip a release the
    # others make (durable-evicted-while-planned: the marks first). Without a bound the
    # order does not matter: marks never unmake a candidate.
    late = cfg.has("durable-evicted-while-planned") or cfg.has("release-no-consensus")
    if late or not mirror:
        ranks = [_mark_rank(m, rs, nb, done) for rs, done in zip(ranks, marks)]
    if not mirror:
        return s._replace(ranks=tuple(ranks))
    ranks, go_on = _commit_round(m, ranks, entries)
    if not late:
        ranks = [_mark_rank(m, rs, nb, done) for rs, done in zip(ranks, marks)]
    if go_on:
        ranks = [_with_next_plan(m, rs) for rs in ranks]
    return s._replace(ranks=tuple(ranks))


@per_model
def _drain_rank(m, rs, nb, nr):
    """One rank's part of the drain: the acks drop their host references, the release
    queue is freed. The acked ops stay in ``sq`` until their durable marks (_mark_rank)."""
    cfg = m.cfg
    for i in range(nb):
        start, end = rs.sq[i]
        # release_host: the ack drops the host reference of the backup.
        if cfg.has("split-during-backup"):
            targets = (end,) if rs.nodes[end] is not None else ()
        else:
            targets = nodes_covering(m.pages, rs, start, end)
        for e in targets:
            rs = update_node(rs, e, href=rs.nodes[e].href - 1)
    freed = sum(rs.relq[:nr])
    if cfg.slots:
        rs = slots.release(m, rs, [s for entry in rs.rslots[:nr] for s in entry])
        rs = rs._replace(rslots=rs.rslots[nr:])
    return rs._replace(sdone=rs.sdone[nb:], relq=rs.relq[nr:], host_free=rs.host_free + freed)


@per_model
def _mark_rank(m, rs, nb, completed):
    """The durable marks of the first ``nb`` acks: ``completed[i]`` is what this rank
    takes as completed for ack slot i (see _synced_completed); then the ops leave ``sq``."""
    cfg = m.cfg
    if mirror_release_on(m):
        rs = age_round(m, rs)
        for i in range(nb):
            chain = m.pages.chain(*rs.sq[i])
            done = len(chain) if cfg.has("durable-on-ack") else completed[i]
            for p in chain[: max(done, 0)]:
                if rs.owner[p] >= 0:
                    rs = mark(m, rs, p)
    return rs._replace(sq=rs.sq[nb:])


def _commit_round(m, ranks, entries):
    """Commit last round's plans if every rank proposed the identical (count, tokens,
    digest) triple (one MIN all-reduce of negated pairs). ``entries``: per rank, the
    committable entries of its plan, taken before the acks (an ack only drops references,
    which never makes a candidate stop being one). Returns the ranks and whether the next
    plans are to be prepared (not once the feature is closed)."""
    cfg = m.cfg
    if any(rs.closed for rs in ranks):
        return ranks, False
    if cfg.has("release-no-consensus"):
        # Mutation before consensus: each rank runs its own fresh plan at once.
        return [execute_plan(m, rs, prepare_plan(m, rs)) for rs in ranks], False
    if any(rs.plan for rs in ranks):
        triples = [plan_triple(m, rs, e) for rs, e in zip(ranks, entries)]
        agree = all(
            negated_pairs_agree([t[f] for t in triples], cfg.digest_bits) for f in range(3)
        )
        if agree:
            ranks = [_commit_plan(m, rs, e) for rs, e in zip(ranks, entries)]
        else:
            mism = ranks[0].mismatch + 1
            closed = mism >= cfg.fail_close_after
            ranks = [rs._replace(mismatch=mism, closed=closed, plan=()) for rs in ranks]
            if closed:
                return ranks, False
    return ranks, True


@per_model
def _commit_plan(m, rs, entries):
    return execute_plan(m, rs, entries)._replace(mismatch=0)


@per_model
def _with_next_plan(m, rs):
    return rs._replace(plan=prepare_plan(m, rs))


# --- the environment ---------------------------------------------------------------------


def store_lose_params(m, s):
    if not m.cfg.fault("store_loss"):
        return
    for r, held in enumerate(s.store):
        for p in range(m.pages.count):
            if held >> p & 1:
                yield act("store_lose", rank=r, page=p)


def store_lose_guard(m, s, a):
    return bool(s.store[a["rank"]] >> a["page"] & 1)


def store_lose(m, s, a):
    """The store drops an acked key (lease eviction over the watermark, master restart)."""
    store = list(s.store)
    store[a["rank"]] &= ~(1 << a["page"])
    return s._replace(store=tuple(store))


def registry_skew_params(m, s):
    if not m.cfg.fault("registry_skew"):
        return
    for r in range(m.cfg.ranks):
        yield act("registry_skew", rank=r)


def registry_skew_guard(m, s, a):
    return len(s.ranks[a["rank"]].dups) >= 2


def registry_skew(m, s, a):
    """A rank's registry order drifts from its peers' (e.g. a birth point processed in a
    different order): its oldest entry moves to the back."""
    r = a["rank"]
    rs = s.ranks[r]
    ranks = list(s.ranks)
    ranks[r] = rs._replace(dups=rs.dups[1:] + rs.dups[:1])
    return s._replace(ranks=tuple(ranks))
