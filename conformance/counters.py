"""What a rank's counters must have counted in one step, from the spec states around it.

The spec has no counters, but every counter the reference implementation keeps counts a
change of spec state: pages whose device copy went away (evicted), whose host copy began
(written), went away (host eviction, duplicate reclaim, mirror release), or that started
loading; storage acks drained, failed backup pages, prefetched pages. So the refinement
mapping extends to counters: per rank, each step's increment is a function of the spec
state before and after the step and of the action. Counters are in tokens (pages times
the model's page size) except the plain counts named in ``PAGE_COUNTS``.

The names are the reference implementation's (tiercheck.impl.hicache.metrics); a
counter not reported counts as 0, as the reference reports only counters it incremented.
"""

from __future__ import annotations

from collections import Counter

from tiercheck.impl.hicache.metrics import (BACKUPED, DEVICE_EVICTED, DUP_RECLAIMED, HOST_EVICTED, HOST_TOTAL,
                                             HOST_USED, HOST_WRITE, LOAD_BACK, MIRROR_RELEASED, PLAN_MISMATCH,
                                             PREFETCH_COMPLETED, PREFETCH_ORPHANED, PREFETCHED,
                                             STORAGE_FAILED_PAGES, WRITE_REJECTED)
from tiercheck.spec.request_locks import device_match
from tiercheck.spec.state import RankState, State
from tiercheck.spec.storage_path import SKIP

from . import rejections
from .compare import observable

CHECKED = (HOST_WRITE, LOAD_BACK, DEVICE_EVICTED, HOST_EVICTED, MIRROR_RELEASED, DUP_RECLAIMED, PLAN_MISMATCH,
           STORAGE_FAILED_PAGES, BACKUPED, PREFETCHED, PREFETCH_COMPLETED)
PAGE_COUNTS = (PLAN_MISMATCH, STORAGE_FAILED_PAGES)  # not scaled by the page size

# The names a rank may report (SGLang's, and tiercheck's own), and the labels of the one
# labelled counter: hicache_write_rejected_tokens_total{reason, stage} (docs/seed-table.md
# reads it by reason and stage).
PLAIN_NAMES = CHECKED + (HOST_USED, HOST_TOTAL, PREFETCH_ORPHANED)
REJECT_REASONS = ("host_alloc_failed", "rank_disagreement")
REJECT_STAGES = ("write_through", "write_back", "storage_prefetch")
REJECTED_NAMES = tuple(f'{WRITE_REJECTED}{{reason="{r}",stage="{s}"}}' for r in REJECT_REASONS for s in REJECT_STAGES)

DEV_ABSENT, DEV_RESIDENT, DEV_LOADING = 0, 1, 2
HOST_ABSENT, HOST_WRITING, HOST_RESIDENT = 0, 1, 2


def _page_state(rs: RankState, p: int):
    """(device state, host state, node released, cached) of page ``p``."""
    end = rs.owner[p]
    if end < 0:
        return DEV_ABSENT, HOST_ABSENT, False, False
    n = rs.nodes[end]
    return n.dev, n.host, n.rel, True


def rank_increments(model, before: RankState, after: RankState, action, rank: int, ranks) -> Counter:
    """Per counter, the increment one step ``action`` makes on one rank (in pages, or
    plain counts); ``ranks``: every rank's (before, after), for the agreed (MIN) values."""
    out = Counter()
    for p in range(model.pages.count):
        d0, h0, _r0, in0 = _page_state(before, p)
        d1, h1, r1, in1 = _page_state(after, p)
        if h0 == HOST_ABSENT and h1 != HOST_ABSENT and DEV_RESIDENT in (d0, d1):
            out[HOST_WRITE] += 1  # a D->H copy (an insert's or a write-back eviction's); not a prefetch
        if d0 == DEV_RESIDENT and d1 == DEV_ABSENT:
            out[DEVICE_EVICTED] += 1
        if d0 == DEV_ABSENT and d1 == DEV_LOADING:
            out[LOAD_BACK] += 1
        if h0 == HOST_RESIDENT and h1 == HOST_ABSENT:
            if in1 and r1:
                out[MIRROR_RELEASED] += 1  # the node stays, released
            elif in1 and d1 != DEV_ABSENT:
                out[DUP_RECLAIMED] += 1  # the device copy stays: a duplicate reclaimed
            else:
                out[HOST_EVICTED] += 1  # the node left the tree (host leaf, pruned subtree)
        if action.name == "check_prefetch_progress" and not in0 and in1:
            out[PREFETCHED] += 1
    if after.mismatch == before.mismatch + 1:
        out[PLAN_MISMATCH] += 1
    if action.name == "drain_storage_control_queues":
        drained = len(before.sq) - len(after.sq)
        out[BACKUPED] += sum(a.reported for a in before.sdone[:drained] if a.reported != SKIP)
    if action.name == "storage_backup_done" and dict(action.params).get("rank") == rank:
        k = len(before.sdone)
        if len(after.sdone) == k + 1 and after.sdone[k].reported != SKIP:
            first, last = before.sq[k]
            # the pages that really failed: under failed-batch-acked the ack reports them stored
            out[STORAGE_FAILED_PAGES] += len(model.pages.chain(first, last)) - after.sdone[k].actual
    if action.name == "check_prefetch_progress" and len(after.pq) < len(before.pq):
        i = dict(action.params)["op"]
        out[PREFETCH_COMPLETED] += min(max(b.pdone[i], 0) for b, _a in ranks)
    return out


def increments(model, before: State, after: State, action) -> list:
    """Per rank, counter name -> the increment in the implementation's units."""
    ps = model.cfg.page_size
    pairs = list(zip(before.ranks, after.ranks))
    out = []
    for r, (b, a) in enumerate(pairs):
        inc = rank_increments(model, b, a, action, r, pairs)
        out.append({k: v if k in PAGE_COUNTS else v * ps for k, v in inc.items()})
    return out


def _own_eviction_victims(model, before: RankState, after: RankState, action) -> int:
    """Pages whose host copy may have come and gone inside the step, unseen by the states
    around it: under write_back, the eviction an insert or a load_back runs by itself
    (insert_evicts, load_back_evicts) stages device-only victims (a D->H copy) and makes
    host room as it goes (evict_host, duplicate reclaim), which may take a copy staged or
    kept a round earlier. Each device victim is staged at most once."""
    cfg = model.cfg
    own = (action.name == "insert" and cfg.insert_evicts) or (
        action.name == "load_back" and cfg.load_back_evicts and not cfg.cp_planner)
    if not (own and cfg.write_back):
        return 0
    n = 0
    for p in range(model.pages.count):
        d0, _h0, _r0, _in0 = _page_state(before, p)
        d1, _h1, _r1, in1 = _page_state(after, p)
        n += d0 == DEV_RESIDENT and (not in1 or d1 == DEV_ABSENT)
    return n


HOST_GONE = (HOST_EVICTED, DUP_RECLAIMED, MIRROR_RELEASED)


def problems(model, before: State, after: State, action, was: list, now: list) -> list:
    """Lines for every checked counter whose increment over the step disagrees with the
    spec's state change (``was`` / ``now``: per rank, the counters before and after)."""
    out = []
    for r, want in enumerate(increments(model, before, after, action)):
        got_of = {key: now[r].get(key, 0) - was[r].get(key, 0) for key in CHECKED}
        # Host copies made and dropped inside the step: the states show the net change
        # only, so there the counters may exceed it, by as many host writes as host
        # copies dropped (the host pool's balance holds), at most one write per victim.
        limit = _own_eviction_victims(model, before.ranks[r], after.ranks[r], action) * model.cfg.page_size
        extra = got_of[HOST_WRITE] - want.get(HOST_WRITE, 0)
        if limit and 0 < extra <= limit \
                and all(got_of[k] >= want.get(k, 0) for k in HOST_GONE) \
                and sum(got_of[k] - want.get(k, 0) for k in HOST_GONE) == extra:
            want = {**want, HOST_WRITE: got_of[HOST_WRITE], **{k: got_of[k] for k in HOST_GONE}}
        for key in CHECKED:  # a counter never incremented is not reported: 0
            got = got_of[key]
            if got != want.get(key, 0):
                out.append(f"rank {r}: counter {key} went up by {got} in {action}, the spec's state change "
                           f"says {want.get(key, 0)}")
    return out + rejection_problems(model, before, action, was, now, after)


def rejection_problems(model, before: State, action, was: list, now: list, after: State) -> list:
    """Lines for every write-rejection counter whose increment over the step disagrees
    with what the spec's step rejects (tiercheck.conformance.rejections). Only where the
    implementation's step is the spec's (``after``, its refined state, is the spec's
    successor, or ``before`` for a step the spec disables): a step that went elsewhere is
    the state comparison's finding, not a second one."""
    spec = model.next_state(before, action)
    if observable(after) != observable(before if spec is None else spec):
        return []
    out = []
    skip = rejections.unchecked(model, action)
    for r, want in enumerate(rejections.rejections(model, before, action, spec)):
        for key in REJECTED_NAMES:
            got = now[r].get(key, 0) - was[r].get(key, 0)
            if key not in skip and got != want.get(key, 0):
                out.append(f"rank {r}: counter {key} went up by {got} in {action}, the spec's step "
                           f"rejects {want.get(key, 0)}")
    return out


def name_problems(reported: list) -> list:
    """Lines for every metric a rank reports under a name (or label set) that is not one
    of the documented ones (``reported``: per rank, name -> value)."""
    return [f"rank {r}: metric {key!r} is not a documented name (or label set)"
            for r, m in enumerate(reported) for key in m if key not in PLAIN_NAMES and key not in REJECTED_NAMES]


def _per_rank_returns(model, before: State, after: State, action) -> list:
    """Per rank, what the step's call returns on that rank according to the spec (None:
    not checked): the driver API's documented results (impl/hicache/group.py)."""
    pairs = list(zip(before.ranks, after.ranks))
    name = action.name
    out = []
    for b, a in pairs:
        if name in ("insert", "evict", "load_back"):
            moved = 0
            for p in range(model.pages.count):
                d0, _h0, _r0, _in0 = _page_state(b, p)
                d1, _h1, _r1, _in1 = _page_state(a, p)
                moved += {"insert": d0 != DEV_RESIDENT and d1 == DEV_RESIDENT,
                          "evict": d0 == DEV_RESIDENT and d1 == DEV_ABSENT,
                          "load_back": d0 == DEV_ABSENT and d1 == DEV_LOADING}[name]
            out.append(moved)  # pages new to the device / freed on it / submitted for loading
        elif name == "writing_check":
            out.append(len(b.wq) - len(a.wq) if len(a.wq) <= len(b.wq) else None)
        elif name == "loading_check":
            out.append(len(b.lq) - len(a.lq))
        elif name == "check_prefetch_progress":  # whether the prefetch was retired
            out.append(len(a.pq) < len(b.pq))
        elif name == "drain_storage_control_queues":
            out.append((len(b.sq) - len(a.sq), len(b.relq) - len(a.relq)))
        elif name in ("lock_request", "unlock_request"):
            req = action["req"]
            started = _runs(a, req) and not _runs(b, req)
            if name == "lock_request":  # the pages of the device prefix it locked (0: refused)
                out.append(device_match(model, b, req) if started else 0)
            else:  # whether the request was running (and now is not)
                out.append(_runs(b, req) and not _runs(a, req))
        else:
            out.append(None)
    return out


def _runs(rs: RankState, req: int) -> bool:
    return any(r == req for r, _end in rs.running)


def _local_return(before: State, after: State, action):
    """What a one-rank step returns according to the spec (None: not checked): the pages
    a prefetch read got, 1 for a timer that fired, 0 for a read that failed; for a rank's
    own touch 1 when its clock moved, 0 when nothing would (the spec disables it)."""
    name = action.name
    if name == "local_access":
        return int(after != before)
    if after == before:
        return None
    if name == "prefetch_io":
        return after.ranks[action["rank"]].pdone[action["op"]]
    return {"prefetch_timeout": 1, "prefetch_read_fails": 0}.get(name)


def returned_problems(model, before: State, after: State, action, got) -> list:
    """Lines for every rank whose return value of a step disagrees with the spec's state
    change (``got``: the group's per-rank results, or one rank's for a one-rank step)."""
    if action.get("rank") is not None and not isinstance(got, (list, tuple)):
        want = _local_return(before, after, action)
        return [] if want is None or got == want else [
            f"rank {action['rank']}: {action} returned {got!r}, the spec's state change says {want!r}"]
    if not isinstance(got, (list, tuple)) or len(got) != len(before.ranks):
        return []
    out = []
    for r, (want, value) in enumerate(zip(_per_rank_returns(model, before, after, action), got)):
        if want is not None and _plain(value) != want:
            out.append(f"rank {r}: {action} returned {value!r}, the spec's state change says {want!r}")
    return out


def _plain(value):
    return tuple(value) if isinstance(value, list) else value
