"""The properties of domain.md section 4, each by name, each with one definition.

Three shapes, as in TLA+:
  * state invariants ``inv(m, s) -> str | None`` ([]P): None when it holds, else what broke;
  * transition properties ``prop(m, s, a, t) -> str | None`` ([][A => P]_vars), for facts
    only visible at the moment a step happens (a release, an eviction, a sync round);
  * progress properties, checked on the explored state graph by the checker: their
    predicates live here, the graph algorithm in tiercheck.models.

The same definitions are evaluated on implementation snapshots (through the refinement
mapping in tiercheck.conformance) and encoded for z3 (tiercheck.proofs).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from . import load_path, write_path
from .host_eviction import can_reclaim_duplicate, host_holders
from .prefetch import held_during_step
from .prefetch_end import held_by_prefetches, read_into_freed, tracks_flags
from .memo import per_model
from .digest import wire_digest
from .sync import digest_check_will_fire, tracks_digest
from .state import (
    ABSENT,
    HOST_RESIDENT,
    LOADING,
    RESIDENT,
    WRITING,
    is_device_leaf,
    live_nodes,
    node_len,
)



INVARIANT, TRANSITION, PROGRESS, LIVENESS = "invariant", "transition", "progress", "liveness"


def always(cfg) -> bool:
    return True


class Property(NamedTuple):
    """One property and where it lives. ``applies(cfg)``: it is among the properties a model
    file checks by default (models/model_file.py); ``twin``: tla/HiCache.tla defines it
    (state invariants and transition properties only); ``proofs``: proofs/properties.py
    encodes it. Kinds: INVARIANT ``fn(m, s)``, TRANSITION ``fn(m, s, a, t)``, PROGRESS
    ``fn`` a Progress, LIVENESS (under weak fairness) ``fn`` a LeadsTo."""

    name: str
    kind: str
    number: int  # domain.md section 4 numbering (0: beyond the list)
    doc: str
    fn: Callable
    applies: Callable = always
    twin: bool = False
    proofs: bool = False


# --- 1. no ghost --------------------------------------------------------------------------


def no_ghost(m, s) -> Optional[str]:
    return _each_rank(s, lambda r, rs: _ghost(m, rs))


@per_model
def _ghost(m, rs) -> Optional[str]:
    for e in live_nodes(rs):
        n = rs.nodes[e]
        if n.dev != RESIDENT and n.host != HOST_RESIDENT:
            return f"node {m.name(e)} has no usable copy (device {n.dev}, host {n.host})"
    return None


def _each_rank(s, check) -> Optional[str]:
    for r, rs in enumerate(s.ranks):
        msg = check(r, rs)
        if msg:
            return f"rank {r}: {msg}"
    return None


# --- 2. no use-after-free -------------------------------------------------------------


def no_use_after_free(m, s) -> Optional[str]:
    return _each_rank(s, lambda r, rs: _dma_targets_held(m, rs, not (m.cfg.single_writer and r > 0)))


@per_model
def _dma_targets_held(m, rs, reads_for_storage: bool) -> Optional[str]:
    pages = m.pages
    inflight = (
        ("D->H", rs.wq[rs.wdone :], (RESIDENT,), (WRITING,)),
        ("H->D", rs.lq[rs.ldone :], (LOADING,), (HOST_RESIDENT,)),
    )
    if reads_for_storage:  # a single-writer follower's backup reads nothing
        inflight += (("H->L3", rs.sq[len(rs.sdone) :], None, (HOST_RESIDENT,)),)
    i = read_into_freed(m, rs)
    if i is not None:
        return f"L3->H read of prefetch {i} in flight into host slots already freed"
    for what, ops, dev_ok, host_ok in inflight:
        for start, end in ops:
            for p in pages.chain(start, end):
                e = rs.owner[p]
                if e < 0:
                    return f"{what} copy of page {m.page_name(p)} in flight, page left the tree"
                n = rs.nodes[e]
                if n.host not in host_ok or (dev_ok and n.dev not in dev_ok):
                    return (
                        f"{what} copy of page {m.page_name(p)} in flight while node "
                        f"{m.name(e)} has device {n.dev}, host {n.host} (slots freed under DMA)"
                    )
    return None


# --- 3. slot conservation -------------------------------------------------------------


def slot_conservation(m, s) -> Optional[str]:
    return _each_rank(s, lambda r, rs: _pools_balance(m, rs))


@per_model
def _pools_balance(m, rs) -> Optional[str]:
    cfg = m.cfg
    dev_held = sum(node_len(m.pages, rs, e) for e in live_nodes(rs) if rs.nodes[e].dev != ABSENT)
    if rs.dev_free < 0 or rs.dev_free + dev_held != cfg.device_pages:
        return f"device free {rs.dev_free} + held {dev_held} != {cfg.device_pages}"
    host_held = host_holders(m, rs) + held_by_prefetches(rs) + sum(rs.relq)
    if rs.host_free < 0 or rs.host_free + host_held != cfg.host_pages:
        return f"host free {rs.host_free} + held {host_held} != {cfg.host_pages}"
    return None


def slot_ownership(m, s) -> Optional[str]:
    """3, with slot identities: each slot has at most one owner, no owned slot is free,
    every slot is owned or free, and the free counter counts distinct free slots (a slot
    freed twice counts twice)."""
    if not m.cfg.slots:
        return None  # free-page counters only: slot_conservation is the property
    return _each_rank(s, lambda r, rs: _slot_owners(m, rs))


@per_model
def _slot_owners(m, rs) -> Optional[str]:
    for pool, owner, free, count, cap in (
        ("device", rs.dslot, rs.dfree, rs.dev_free, m.cfg.device_pages),
        ("host", rs.hslot, rs.hfree, rs.host_free, m.cfg.host_pages),
    ):
        held = {}
        for e in live_nodes(rs):
            n = rs.nodes[e]
            if (n.dev if pool == "device" else n.host) == ABSENT:
                continue
            for p in m.pages.chain(n.start, e):
                held.setdefault(owner[p], []).append(f"page {m.page_name(p)}")
        if pool == "host":
            for i, got in enumerate(rs.pslots):
                for x in got:
                    held.setdefault(x, []).append(f"prefetch {i}")
            for i, got in enumerate(rs.rslots):
                for x in got:
                    held.setdefault(x, []).append(f"release entry {i}")
        for slot, who in sorted(held.items()):
            if slot < 0:
                return f"{pool}: {who[0]} holds no slot"
            if len(who) > 1:
                return f"{pool} slot {slot} has two owners: {who[0]} and {who[1]}"
            if free >> slot & 1:
                return f"{pool} slot {slot} is free but owned by {who[0]}"
        lost = [x for x in range(cap) if x not in held and not free >> x & 1]
        if lost:
            return f"{pool} slot {lost[0]} is allocated but owned by nobody (leak)"
        if count != bin(free).count("1"):
            return f"{pool} free counter {count} but {bin(free).count('1')} distinct free slots (a double free)"
    return None


def slotted(cfg) -> bool:
    return cfg.slots


# --- 4. durable only when acked -----------------------------------------------------------


def durable_only_when_acked(m, s, a, t) -> Optional[str]:
    """A page turns durable only inside the prefix that a storage write really stored."""
    for r, (rs, rt) in enumerate(zip(s.ranks, t.ranks)):
        if rs is rt:
            continue  # a rank the step left alone
        new = rt.durable & ~rs.durable
        if not new:
            continue
        allowed = 0
        if a.name == "drain_storage_control_queues":
            nb = min(len(x.sdone) for x in s.ranks)
            writer = s.ranks[0] if m.cfg.single_writer else rs
            for i in range(nb):
                start, end = rs.sq[i]
                chain = m.pages.chain(start, end)
                for p in chain[: max(writer.sdone[i].actual, 0)]:
                    allowed |= 1 << p
        bad = new & ~allowed
        if bad:
            p = (bad & -bad).bit_length() - 1
            return f"rank {r}: page {m.page_name(p)} marked durable after {a}, but no storage write stored it"
    return None


# --- 5. release safety --------------------------------------------------------------------


def release_safety(m, s, a, t) -> Optional[str]:
    """Every host copy dropped while the node keeps its device copy (a mirror release or a
    duplicate reclaim) met the guard at that moment."""
    held = held_during_step(m, s, a)
    for r, (rs, rt) in enumerate(zip(s.ranks, t.ranks)):
        if rs is not rt:
            why = _release_ok(m, rs, rt, held, _held_while_evicting(m, rs, a))
            if why:
                return f"rank {r}: {a} {why}"
    return None


def _held_while_evicting(m, rs, a) -> frozenset:
    """Nodes a step's own eviction runs with locked (insert_evicts, load_back_evicts): no
    device leaves while it reclaims, whatever they were before and after the step."""
    if a.name == "insert" and m.cfg.insert_evicts:
        return write_path.held_while_evicting(m, rs, a["req"])
    if a.name == "load_back" and m.cfg.load_back_evicts and not m.cfg.cp_planner:
        return load_path.held_while_evicting(m, rs, a["node"])
    return frozenset()


@per_model
def _release_ok(m, rs, rt, held: int, locked: frozenset = frozenset()) -> Optional[str]:
    cfg, pages = m.cfg, m.pages
    dropped = [
        e
        for e in live_nodes(rs)
        if rt.nodes[e] is not None
        and rs.nodes[e].host == HOST_RESIDENT
        and rt.nodes[e].host == ABSENT
        and rt.nodes[e].dev != ABSENT
    ]
    for e in dropped:
        # A step may drop a reference before it releases (the drain processes backup
        # acks, then commits the plan): judge the node as the release left it.
        n = rt.nodes[e]
        why = None
        if n.href > 0:
            why = "host-referenced (storage backup or prefetch in flight)"
        elif n.lbp:
            why = "load-back pending"
        elif not cfg.write_back:
            if n.lock > 0:
                why = "locked"
            elif n.dev != RESIDENT:
                why = "device copy not resident"
            elif not all((rs.durable | rt.durable) >> p & 1 for p in pages.chain(n.start, e)):
                # durable when released: before the step (the drain commits before its
                # acks' marks, which may evict the entry's from a bounded LRU) or after
                why = "not every page durable"
        elif is_device_leaf(pages, rs, e) and e not in locked:
            spared = [
                d
                for d in rs.dups
                if d != e
                and rt.nodes[d] is not None
                # reclaimable before the step and once it is over: a node the step itself
                # brings back to the device (an insert after its own eviction) was no
                # duplicate when the reclaim ran
                and can_reclaim_duplicate(m, rs, d)
                and can_reclaim_duplicate(m, rt, d)
                and d != held  # ... and was when the reclaim ran (not protected by the step)
                and not is_device_leaf(pages, rs, d)
            ]
            if spared:
                why = (
                    "an evictable device leaf (about to be demoted) while "
                    f"{m.name(spared[0])} was reclaimable"
                )
        if why:
            return f"freed the host copy of node {m.name(e)}: {why}"
    return None


# --- 8. data integrity, at the spec's resolution: the tree is prefix-closed -------------


def prefix_closed(m, s) -> Optional[str]:
    """Every cached node hangs below the page before it on its token path: a page's KV
    is computed in the context of every token before it, so a node attached below any
    other page (a match that did not stop at the page boundary) serves KV of other tokens."""
    return _each_rank(s, lambda r, rs: _detached(m, rs))


@per_model
def _detached(m, rs) -> Optional[str]:
    for e in live_nodes(rs):
        above = m.pages.parent[rs.nodes[e].start]
        if above >= 0 and rs.owner[above] < 0:
            return (f"node {m.name(e)} is cached but page {m.page_name(above)} before it is not: "
                    "its KV was attached below another page")
    return None


def paged(cfg) -> bool:
    return cfg.page_size > 1


# --- 6. rank agreement -------------------------------------------------------------------


def replica(rs):
    """What TP ranks must hold identically: the tree, its tier states and the pools."""
    return (rs.owner, rs.nodes, rs.dev_free, rs.host_free, rs.wq, rs.lq, rs.sq, rs.pq, rs.relq, rs.closed,
            rs.running, rs.lru)


def rank_agreement(m, s) -> Optional[str]:
    """Replicas are identical in every state, unless the group stopped itself, or the
    difference is one that the next ready-count round is bound to detect (the
    duplicate-reclaim digests differ and the digest check is on and sound). Replicated
    steps run on every replica and per-rank steps touch no replicated field, so a
    correct protocol never needs more slack than that."""
    if s.halted or s.hung or len(s.ranks) < 2:
        return None
    first = replica(s.ranks[0])
    for r in range(1, len(s.ranks)):
        if replica(s.ranks[r]) != first:
            if digest_check_will_fire(m, s):
                return None
            msg = f"rank {r}'s replica differs from rank 0's and no check will notice"
            if tracks_digest(m.cfg):
                wire = [wire_digest(m.cfg, rs.digest) for rs in s.ranks]
                msg += f" (reclaim digests on the wire {wire}, {m.cfg.digest_bits}-bit)"
            return msg
    return None


# --- 7. counter sanity --------------------------------------------------------------------


def counter_sanity(m, s) -> Optional[str]:
    return _each_rank(s, lambda r, rs: _counters_sane(m, rs))


@per_model
def _counters_sane(m, rs) -> Optional[str]:
    for e in live_nodes(rs):
        n = rs.nodes[e]
        if n.lock < 0 or n.href < 0:
            return f"node {m.name(e)} has lock_ref {n.lock}, host_ref_counter {n.href}"
    return None


def locked_never_evicted(m, s, a, t) -> Optional[str]:
    for r, (rs, rt) in enumerate(zip(s.ranks, t.ranks)):
        if rs is not rt:
            e = _locked_evicted(m, rs, rt)
            if e is not None:
                return f"rank {r}: {a} evicted node {m.name(e)} while lock_ref={rs.nodes[e].lock}"
    return None


@per_model
def _locked_evicted(m, rs, rt):
    for e in live_nodes(rs):
        if rs.nodes[e].lock > 0 and rs.nodes[e].dev == RESIDENT:
            after = rt.nodes[e]
            if after is None or after.dev == ABSENT:
                return e
    return None


def planner_determinism(m, s, a, t) -> Optional[str]:
    """The same replicated state yields the same eviction plan on every rank: a load-back
    drops the same device copies everywhere (seed 004 header)."""
    if a.name != "load_back" or len(s.ranks) < 2 or not m.cfg.cp_planner:
        return None
    if len({replica(rs) for rs in s.ranks}) > 1:
        return None  # replicas already differed: rank_agreement's business
    dropped = [
        tuple(e for e in live_nodes(rs) if rs.nodes[e].dev == RESIDENT and (rt.nodes[e] is None or rt.nodes[e].dev == ABSENT))
        for rs, rt in zip(s.ranks, t.ranks)
    ]
    if any(d != dropped[0] for d in dropped):
        names = [[m.name(e) for e in d] for d in dropped]
        return f"{a} planned different victims per rank from the same replicated state: {names}"
    return None


# --- beyond the list: the TP group must not hang ---------------------------------------


def no_collective_hang(m, s) -> Optional[str]:
    if s.hung:
        return f"ranks wait forever in the {s.hung} all-reduce that a peer skipped"
    return None


# --- 9 and 10: progress, checked on the state graph -------------------------------------
#
# A progress property names, for each state, the obligations it opens ("this backup
# waits"), when an obligation is met, and which steps a path that meets it may take. The
# checker verifies on the explored graph that from every state with an open obligation a
# path of allowed steps reaches a state that meets it; issue-level fairness (lassos) is
# in tiercheck.models.liveness.


def waiting_backups(m, s):
    """Nodes whose write-through staging waits for host room (on rank 0's replica)."""
    cfg = m.cfg
    if cfg.write_back or not cfg.storage or s.hung or s.halted:
        return ()
    rs = s.ranks[0]
    out = []
    for e in live_nodes(rs):
        n = rs.nodes[e]
        if (
            n.dev == RESIDENT
            and n.host == ABSENT
            and n.hits >= cfg.write_threshold
            and not all(rs.durable >> p & 1 for p in m.pages.chain(n.start, e))
            and rs.host_free < node_len(m.pages, rs, e)
        ):
            out.append(e)
    return tuple(out)


def stored_everywhere(m, s, pages) -> bool:
    """Ground truth, not bookkeeping: every writing rank's store holds these pages."""
    writers = (0,) if m.cfg.single_writer else range(len(s.ranks))
    return all(all(s.store[r] >> p & 1 for p in pages) for r in writers)


def redundant_mirrors(m, s):
    """Idle host mirrors of device-resident nodes whose pages the store really holds."""
    rs0 = s.ranks[0]
    out = []
    for e in live_nodes(rs0):
        if all(_idle_mirror(rs, e) for rs in s.ranks) and stored_everywhere(
            m, s, m.pages.chain(rs0.nodes[e].start, e)
        ):
            out.append(e)
    return out


def _idle_mirror(rs, e) -> bool:
    n = rs.nodes[e]
    return (
        n is not None
        and n.dev == RESIDENT
        and n.host == HOST_RESIDENT
        and n.lock == 0
        and n.href == 0
        and not n.lbp
    )


def host_channel_obligations(m, s):
    """9. Host pool as a channel (storage on): a backup that waits for host room while
    redundant mirrors exist must be admitted without evicting any device copy, since
    device eviction is not fair to hot nodes (seed 000)."""
    waiting = waiting_backups(m, s)
    if waiting and redundant_mirrors(m, s):
        return waiting
    return ()


def backup_admitted(m, s, e, frees) -> bool:
    n = s.ranks[0].nodes[e]
    return n is None or n.host != ABSENT or n.dev == ABSENT


def not_device_eviction(kind: str, name: str) -> bool:
    return name != "evict"


def evictable_data(m, s) -> bool:
    if s.hung or s.halted:
        return False
    rs = s.ranks[0]
    return any(is_device_leaf(m.pages, rs, e) for e in live_nodes(rs))


def eviction_obligations(m, s):
    """10. Eviction progress: with unlocked evictable device data, an evict() step frees a
    device page, at once or once in-flight work drains (no new requests needed)."""
    return ("evict",) if evictable_data(m, s) else ()


def eviction_frees(m, s, key, frees) -> bool:
    return frees


def background_step(kind: str, name: str) -> bool:
    """In-flight work, no new requests: DMA and storage completions, sync rounds, the
    environment, and a running request finishing (unlock_request): a request lock held by
    a request that runs is dropped when it ends, as a copy's lock is when the copy does."""
    return kind != "replicated" or name == "unlock_request"


def locked_nodes(m, s):
    """11. Lock release: every lock is dropped once in-flight work drains (no new requests
    needed); a lock nobody will drop makes its node unevictable forever."""
    if s.hung or s.halted:
        return ()
    return tuple(sorted({e for rs in s.ranks for e in live_nodes(rs) if rs.nodes[e].lock > 0}))


def unlocked(m, s, e, frees) -> bool:
    return all(rs.nodes[e] is None or rs.nodes[e].lock == 0 for rs in s.ranks)


def prefetches_in_flight(m, s):
    """12. Prefetch progress: every prefetch ends (terminated by the vote and retired, or
    revoked and retired) by in-flight work alone: reads, timers, sync rounds. One that never
    ends holds its host slots and its anchor's host reference for good."""
    if s.hung or s.halted:
        return ()
    return tuple(sorted({_request_name(m, op[0]) for rs in s.ranks for op in rs.pq}))


def _request_name(m, req: int) -> str:
    return ",".join(map(str, m.cfg.requests[req]))


def prefetch_retired(m, s, key, frees) -> bool:
    return all(_request_name(m, op[0]) != key for rs in s.ranks for op in rs.pq)


class Progress(NamedTuple):
    obligations: Callable  # (model, state) -> keys of open obligations
    met: Callable  # (model, state, key, frees) -> bool; frees: an evict step frees pages
    step: Callable  # (action kind, action name) -> may a discharging path take it
    describe: str  # message template, {key} is the node name


class LeadsTo(NamedTuple):
    """``P leads-to Q`` under weak fairness (checked by tiercheck.models.liveness)."""

    opens: Callable  # (model, state) -> keys of the obligations P opens
    met: Callable  # (model, state, key, frees) -> Q holds for key
    describe: str  # {key}: the obligation, for messages
    from_init: bool = False  # ``eventually Q``: the only obligation is opened initially
    # Actions a lasso's cycle may not take: the behaviour eventually stops taking them
    # (<>[] not A). host_channel: a scheduler that evicts forever can starve anything, and
    # seed 000's claim is admission without relying on device eviction.
    cycle_excludes: tuple = ()


def multi_rank(cfg) -> bool:
    return cfg.ranks > 1


def planning_ranks(cfg) -> bool:
    return cfg.ranks > 1 and cfg.cp_planner


def host_channel_applies(cfg) -> bool:
    """Liveness of the host channel is promised for a storage tier that does not fail
    backups: after a failed backup seed 000 keeps the mirror by design (see
    models/library/findings/mirror-pinned-after-failed-backup.toml). Nor with prefetch:
    a node prefetched back from storage has a host copy of stored pages but no durable
    marks (only backup acks mark), so its mirror is never released
    (findings/mirror-pinned-after-prefetch.toml). A target below the
    longest request makes the channel unprovable by construction (model files reject
    that combination when host_channel is asked for explicitly)."""
    admits_longest = cfg.host_free_target >= max(cfg.pages_of(r) for r in cfg.requests)
    return (cfg.storage and cfg.mirror_release and "partial_storage" not in cfg.faults and not cfg.prefetch
            and admits_longest)


def evictions_can_finish(cfg) -> bool:
    """Under write_back a device node is evicted only after its backup, so a node larger than
    the whole host pool stays on device for good, by construction rather than by any step
    of the protocol (SGLang sizes the host pool above the device pool). eviction_progress
    is a claim only where every request fits the host pool (model files reject asking for
    it elsewhere)."""
    return not cfg.write_back or cfg.host_pages >= max(cfg.pages_of(r) for r in cfg.requests)


def on_request(cfg) -> bool:
    return False  # checked only when a model file names it


def _safety(name, kind, number, doc, fn, applies=always) -> Property:
    return Property(name, kind, number, doc, fn, applies, twin=True, proofs=True)


def _fair(name: str, of: Property, describe: str, applies, cycle_excludes=()) -> Property:
    """The leads-to form of a progress property: obligation ~> met, under weak fairness."""
    return Property(name, LIVENESS, of.number, f"{of.doc} (leads-to under weak fairness)",
                    LeadsTo(of.fn.obligations, of.fn.met, describe, cycle_excludes=tuple(cycle_excludes)),
                    applies)


_HOST_CHANNEL = Property(
    "host_channel", PROGRESS, 9, "a waiting backup is admitted while redundant mirrors exist",
    Progress(host_channel_obligations, backup_admitted, not_device_eviction,
             "the backup of node {key} waits for host room while redundant mirrors exist, "
             "and no path without device eviction admits it"),
    host_channel_applies,
)
_EVICTION_PROGRESS = Property(
    "eviction_progress", PROGRESS, 10, "eviction with evictable data frees something",
    Progress(eviction_obligations, eviction_frees, background_step,
             "unlocked evictable device data exists, and no evict() step frees a device "
             "page now or after in-flight work drains"),
    evictions_can_finish,
)

# In the order a model file lists its default properties.
PROPERTIES = [
    _safety("no_ghost", INVARIANT, 1, "every cached node has a usable copy", no_ghost),
    _safety("no_use_after_free", INVARIANT, 2, "no slot freed under an in-flight DMA", no_use_after_free),
    _safety("slot_conservation", INVARIANT, 3, "free + owned = capacity per pool, per rank", slot_conservation),
    _safety("durable_only_when_acked", TRANSITION, 4, "a page is durable only if a write stored it", durable_only_when_acked),
    _safety("release_safety", TRANSITION, 5, "mirrors freed only when redundant and idle", release_safety),
    _safety("counter_sanity", INVARIANT, 7, "lock_ref and host_ref_counter never negative", counter_sanity),
    _safety("locked_never_evicted", TRANSITION, 7, "locked nodes are never evicted", locked_never_evicted),
    _EVICTION_PROGRESS,
    Property("slot_ownership", INVARIANT, 3, "each slot has one owner or is free, counted once (slots)",
             slot_ownership, slotted, twin=True, proofs=True),
    Property("prefix_closed", INVARIANT, 8, "every cached node hangs below the page before it (page_size > 1)",
             prefix_closed, paged, twin=True, proofs=True),
    _safety("rank_agreement", INVARIANT, 6, "replicas agree after every sync round", rank_agreement, multi_rank),
    _safety("no_collective_hang", INVARIANT, 0, "no rank waits in a collective its peers skipped", no_collective_hang, multi_rank),
    _safety("planner_determinism", TRANSITION, 0, "ranks plan the same load-back victims from the same state", planner_determinism, planning_ranks),
    Property("lock_release", PROGRESS, 11, "every lock is dropped once in-flight work drains",
             Progress(locked_nodes, unlocked, background_step,
                      "node {key} is locked, and no path of in-flight work (no new requests) unlocks it"),
             on_request),
    Property("prefetch_progress", PROGRESS, 12, "every prefetch ends once in-flight work drains",
             Progress(prefetches_in_flight, prefetch_retired, background_step,
                      "the prefetch of request {key} is in flight, and no path of in-flight work ends it"),
             tracks_flags),
    _HOST_CHANNEL,
    _fair("host_channel_fair", _HOST_CHANNEL,
          "the backup of node {key} waits for host room while redundant mirrors exist, and "
          "a fair run keeps it waiting forever", host_channel_applies, cycle_excludes=("evict",)),
    _fair("eviction_progress_fair", _EVICTION_PROGRESS,
          "unlocked evictable device data exists, and a fair run never reaches a state in which "
          "an evict() step frees a device page", on_request),
]

BY_NAME = {p.name: p for p in PROPERTIES}


def default_properties(cfg) -> list:
    """Every property that applies to the configuration (a model file's default)."""
    return [p.name for p in PROPERTIES if p.applies(cfg)]
