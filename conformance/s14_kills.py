"""Units for survivors of the seed-14 mutation sample (session 17).

- a second prefetch queued on one rank: prefetch_from_storage returns the new prefetch's
  index in the queue, 1 here (the reference adapter checks it against the queue's length;
  every other unit queued one prefetch at a time, where any index expression that gives
  0 for a queue of one agrees);
- a prefetch anchored two pages deep: the anchor is the node ending at the request's k-th
  page, k = 2 (the units before anchored at k = 1 or at the root, where ``k - 1`` and
  expressions such as ``k ^ 1`` name the same page);
- a prefetch asked for a request whose match ends inside a node, in both orders of the
  two page hashes compared (the node's end and the request's k-th page): the spec starts
  no prefetch (the anchor must end where the match ends), whichever hash is the larger;
- a prefetch whose match ends exactly at a node with no host copy (write_back, the node
  on the device only): the spec starts none (the anchor must hold a host copy);
- a load-back of a one-page chain of two tokens under a threshold of three (paged-1r):
  the spec refuses it (too short to be worth a copy); the campaign's loads there were all
  of longer chains;
- a CP load-back of a two-page node on two lanes: a node's pages sit on consecutive
  owner lanes from its depth (every shipped CP model has one-page nodes only);
- (seed 15) check_prefetch_progress of an index two past the queue's end: refused as
  the index one past it is, not an error from inside the queue;
- (seed 15) a drain round beside a mirror that is busy one way only (locked with no
  host reference, or the reverse): no release candidate either way;
- a mirror-release drain round where no rank has a plan, after a round whose plans
  disagreed: the count of consecutive mismatches stands (only an agreed commit resets it;
  a round with nothing to agree on is neither);
- the twin of split-write-lock-leak committing a one-page write: the bug's check
  compares the node's end with the write's last page, which for one page is its only page
  (the variant's shipped model writes two-page requests, where the last page and the
  second are the same);
- the twin of digest-unchecked evicting a two-page node that only rank 1 must write (the
  replicas diverged): the agreed size is rank 1's two pages, read back from the MIN of
  (rank, pages) packed into one int64;
- (seed 15) the twin of early-return-collective with a copy finished on every rank: the
  bug's early return is taken only where no copy finished, so this round commits;
- the twin of failed-batch-acked through its drain: the drain marks durable a page the
  failed batch never stored, which the spec with the bug flags (durable_only_when_acked);
  the implementation's refined state must flag it too (the bug's shortest trace ends at
  the lying ack, before any page turns durable);
- (fault) other bytes in the store under a page whose backup is still in flight (a write
  not finished, as a threaded store leaves it torn): the self-check must not report it
  (it reads only pages whose backups finished), and once the backup is acked the page
  holds the right bytes. The companion of verdict_faults' "store page rewritten before
  its ack is drained", which must be reported.
"""

from __future__ import annotations

from tiercheck.models import model_file
from tiercheck.spec.action import act
from tiercheck.spec.model import Model
from tiercheck.spec.properties import durable_only_when_acked
from tiercheck.spec.load_path import nodes_to_load
from tiercheck.spec.state import ABSENT as DEV_ABSENT
from tiercheck.spec.state import RESIDENT as DEV_RESIDENT
from tiercheck.spec.state import ABSENT as HOST_ABSENT  # host states share the device's 0
from tiercheck.spec.state import HOST_RESIDENT, live_nodes, matched_prefix, node_len

from .reference import ReferenceDriver
from .runner import replay
from .s12_kills_ku1 import _prefetch_started
from .situations import Situation, first_path
from .verdict_faults import put_other_bytes


def _second_prefetch(m, s, a, t) -> bool:
    return a.name == "prefetch_from_storage" and len(s.ranks[0].pq) == 1 and len(t.ranks[0].pq) == 2


def _anchored_two_deep(m, s, a, t) -> bool:
    """A prefetch starts below a node that ends at the request's second page."""
    if a.name != "prefetch_from_storage" or len(t.ranks[0].pq) <= len(s.ranks[0].pq):
        return False
    _req, _anchor, k, _n = t.ranks[0].pq[-1]
    return k == 2


def _match_end(m, t):
    """(node end, the node) where request 0's matched prefix ends on rank 0 in ``t``, when
    it is a proper prefix, the next page is in a store and no prefetch is queued; else None."""
    rs = t.ranks[0]
    path = m.pages.request_pages[0]
    k = matched_prefix(m.pages, rs, 0)
    if not 0 < k < len(path) or rs.pq or not any(held >> path[k] & 1 for held in t.store):
        return None
    end = rs.owner[path[k - 1]]
    return (end != path[k - 1]), rs.nodes[end]


def _inside_a_node(m, s, a, t) -> bool:
    """Request 0's match ends inside a node holding a host copy (``_match_end``): the spec's
    anchor is none, so it disables prefetch_from_storage of request 0 (the probe)."""
    got = _match_end(m, t)
    return got is not None and got[0] and got[1].host == HOST_RESIDENT


def _anchor_without_host_copy(m, s, a, t) -> bool:
    """Request 0's match ends exactly at a node's end, and that node holds no host copy
    (write_back: device only): the spec's anchor is none (it must hold a host copy), so
    prefetch_from_storage of request 0 is disabled (the probe)."""
    got = _match_end(m, t)
    return got is not None and not got[0] and got[1].host == HOST_ABSENT


def _prefetch_request_0(m, t):
    return act("prefetch_from_storage", req=0)


def _short_evicted_chain(m, t):
    """The end of a node of rank 0 whose load-back chain (host copies all there) holds fewer
    tokens than load_back_threshold, or None."""
    rs = t.ranks[0]
    for e in live_nodes(rs):
        if rs.nodes[e].dev != DEV_ABSENT:
            continue
        chain = nodes_to_load(m, rs, e)
        if all(rs.nodes[x].host == HOST_RESIDENT for x in chain):
            total = sum(node_len(m.pages, rs, x) for x in chain)
            if 0 < total * m.cfg.page_size < m.cfg.load_back_threshold:
                return e
    return None


def _short_chain_evicted(m, s, a, t) -> bool:
    return _short_evicted_chain(m, t) is not None


def _load_short_chain(m, t):
    return act("load_back", node=_short_evicted_chain(m, t))


def _two_lane_node_loaded(m, s, a, t) -> bool:
    """A load-back that succeeds for a node of two or more pages (its pages on consecutive
    owner lanes)."""
    return (a.name == "load_back" and t != s
            and node_len(m.pages, s.ranks[0], a["node"]) >= 2)


def _planless_round_after_a_mismatch(m, s, a, t) -> bool:
    """A drain round where no rank has a plan, after a round whose plans disagreed: the
    consecutive-mismatch count stands (only an agreed commit resets it)."""
    return (a.name == "drain_storage_control_queues" and s.ranks[0].mismatch >= 1
            and not any(rs.plan for rs in s.ranks) and not any(rs.closed for rs in s.ranks))


def _only_rank_1_must_write(m, s, a, t) -> bool:
    """A write_back eviction of a node of an even number of pages that rank 1 must write
    first (its host copy reclaimed) and rank 0 need not (it kept its own): the size is
    rank 1's, agreed through one MIN of (rank, pages) packed into an int64."""
    if a.name != "evict" or t == s:
        return False
    e = a["node"]
    nodes = [rs.nodes[e] if e < len(rs.nodes) else None for rs in s.ranks]
    if any(n is None for n in nodes):
        return False
    needs = [n.host == HOST_ABSENT and n.dev == DEV_RESIDENT for n in nodes]
    return needs == [False, True] and node_len(m.pages, s.ranks[1], e) % 2 == 0


def _check_two_past_end(m, t):
    """check_prefetch_progress of an index two past the queue's end: no such prefetch."""
    return act("check_prefetch_progress", op=len(t.ranks[0].pq) + 1)


def _every_rank_has_a_copy_done(m, s, a, t) -> bool:
    """writing_check with copies in flight on every rank and at least one finished on each:
    the bug's early return (taken only where none finished) is not taken, and the round commits."""
    return (a.name == "writing_check" and all(rs.wq for rs in s.ranks)
            and all(rs.wdone > 0 for rs in s.ranks))


def _busy_mirror_drained(m, s, a, t) -> bool:
    """A drain round while a mirror (device and host resident, every page durable) is busy
    in one way only: locked but with no host reference or pending load, or the other way
    round. Busy either way, it is no release candidate."""
    if a.name != "drain_storage_control_queues":
        return False
    rs = s.ranks[0]
    for e in live_nodes(rs):
        n = rs.nodes[e]
        if n.dev != DEV_RESIDENT or n.host != HOST_RESIDENT:
            continue
        if all(rs.durable >> p & 1 for p in m.pages.chain(n.start, e)) and (n.lock == 0) != (n.href == 0 and not n.lbp):
            return True
    return False


def _one_page_write_committed(m, s, a, t) -> bool:
    """writing_check commits a D->H write of one page."""
    if a.name != "writing_check":
        return False
    before, after = s.ranks[0].wq, t.ranks[0].wq
    return any(len(m.pages.chain(start, end)) == 1 for start, end in before[:len(before) - len(after)])


# wt-prefetch-1r sized as conformance.s12_kills_b.SECOND_PREFETCH: three one-page requests,
# one device page, each evicted to the store in turn, then two prefetches queued.
SECOND = (("requests", ((1,), (2,), (3,))), ("device_pages", 1), ("host_pages", 2), ("faults", frozenset()))
# (1, 2, 3) split by (1, 2), its third page backed up, then pushed out of both pools by (5,):
# (1, 2, 3) prefetches its third page below the node (1, 2) (14 steps).
TWO_DEEP = (("requests", ((1, 2, 3), (1, 2), (5,))), ("device_pages", 3), ("host_pages", 3), ("faults", frozenset()))

# (1, 2, 4) backed up, then pushed out of both pools by (5,) and that by (1, 2, X): request
# 0's match (1, 2) ends inside the node (1, 2, X) (15 steps). The implementation compares that node's end hash with the
# hash of (1, 2): for X = 3 the end's is the larger, for X = 6 the smaller
# (tiercheck.impl.hicache.pages.PageRegistry; test_s14_kills checks both orders).
def _inside(x: int) -> tuple:
    return (("requests", ((1, 2, 4), (1, 2, x), (5,))), ("device_pages", 3), ("host_pages", 3),
            ("faults", frozenset()))


INSIDE_TOKENS = (3, 6)

SITUATIONS = (
    Situation("a second prefetch queued on one rank", "wt-prefetch-1r", (), _second_prefetch, overrides=SECOND),
    Situation("a prefetch anchored two pages deep", "wt-prefetch-1r", (), _anchored_two_deep, overrides=TWO_DEEP),
    # paged-1r: pages of two tokens, load-backs of fewer than three tokens refused; a
    # one-page chain (two tokens) evicted from the device must not be loaded back.
    Situation("a load-back of one two-token page under a three-token threshold", "paged-1r", (),
              _short_chain_evicted, probe=_load_short_chain),
    # two one-page lanes: (1, 2) fills both, is evicted, (3,) takes lane 0, and loading
    # (1, 2) back needs lane 0 again: the planner demotes (3,). A node's pages sit on
    # consecutive lanes from its depth (every shipped CP model has one-page nodes only).
    Situation("a CP load-back of a node spanning both lanes", "cp-planner-lanes-2r", (), _two_lane_node_loaded,
              overrides=(("requests", ((1, 2), (3,))),)),
    # (seed 15) an index past the end by more than one must be refused as cleanly as the
    # first one past it (s12_kills_ku1), not fail inside the queue's indexing
    Situation("a check of the prefetch two past the queue's end", "wt-prefetch-1r", (), _prefetch_started,
              _check_two_past_end),
    # (seed 15) wt-mirror-1r: a load-back below the mirror (1,) locks it: a busy mirror at
    # the drain round, which must not be released (9 steps)
    Situation("a drain round beside a mirror that is locked but holds no host reference", "wt-mirror-1r", (),
              _busy_mirror_drained),
    # wt-mirror-2r: partial backups leave the ranks' plans different (a mismatch, 1 of
    # fail_close_after 2), then a round with no plan anywhere (11 steps)
    Situation("a mirror-release round with no plan after a mismatch", "wt-mirror-2r", (),
              _planless_round_after_a_mismatch),
    # write_back: (1, 2) written back and stored, evicted from both pools, then (1,)
    # inserted on the device only: (1, 2)'s match ends at (1,), which has no host copy.
    Situation("a prefetch whose anchor holds no host copy", "wb-reclaim-prefetch-1r", (), _anchor_without_host_copy,
              probe=_prefetch_request_0, overrides=(("requests", ((1, 2), (1,), (5, 6, 7))),)),
    *(Situation(f"a prefetch whose match ends inside the node (1, 2, {x})", "wt-prefetch-1r", (), _inside_a_node,
                probe=_prefetch_request_0, overrides=_inside(x)) for x in INSIDE_TOKENS),
)

def _lying_ack_drained(m, s, a, t) -> bool:
    """The drain that marks durable a page the failed batch never stored (its ack lied)."""
    return a.name == "drain_storage_control_queues" and durable_only_when_acked(m, s, a, t) is not None


# The variant's model with a one-page request added: its write is committed with the bug on.
TWIN_SITUATIONS = (
    Situation("split-write-lock-leak committing a one-page write", "variants/split-write-lock-leak", (),
              _one_page_write_committed, overrides=(("requests", ((1, 2), (1, 3), (4,))),)),
    # Diverged replicas (the registry drift the bug lets through): (1, 2, 3, 4)'s upper half
    # (3, 4) is reclaimed from rank 1's host pool only, then evicted from the device: rank
    # 1 must write two pages, rank 0 none (8 steps).
    Situation("digest-unchecked evicting a two-page node only rank 1 must write", "variants/digest-unchecked", (),
              _only_rank_1_must_write, overrides=(("requests", ((1, 2), (1, 2, 3, 4), (1, 2, 3, 4, 5, 6))),
                                                  ("device_pages", 6), ("host_pages", 4))),
    # (seed 15) the bug's branch must fire only where nothing finished: with a copy done on
    # every rank the round commits as in the fixed spec
    Situation("early-return-collective with a copy done on every rank", "variants/early-return-collective", (),
              _every_rank_has_a_copy_done),
    # The bug's shortest trace ends at the lying ack; here its drain follows, where the spec
    # with the bug breaks durable_only_when_acked: so must the implementation's refined state,
    # which knows what each backup really stored only from the snapshot's "sstored".
    Situation("failed-batch-acked drained", "variants/failed-batch-acked", (), _lying_ack_drained),
)


def _backup_in_flight(s, a, t) -> bool:
    rs = t.ranks[0]
    return len(rs.sq) > len(rs.sdone)


def store_torn_under_a_backup() -> str:
    """wt-storage-1r: a backup in flight, other bytes under one of its pages in the store
    (a write not finished): no problem reported; after storage_backup_done, none either
    (the backup wrote the page's bytes)."""
    cfg = model_file.load("wt-storage-1r").config
    model = Model(cfg)
    trace = first_path(model, _backup_in_flight)
    driver = ReferenceDriver(cfg)
    try:
        out = replay(driver, trace)
        if out.mismatch is not None:
            return f"before the fault: {out.mismatch.message}"
        rank = driver.group.ranks[0]
        op = next((o for o in rank.sq if o.ack is None), None)
        if op is None:
            return "the trace left no backup in flight"
        put_other_bytes(rank, op.pages[0])
        problems = driver.verify()
        if problems:
            return f"a page whose backup is still in flight is reported: {problems}"
        done = next(a for a in model.actions(_end(model, trace)) if a.name == "storage_backup_done")
        driver.apply(done)
        problems = driver.verify()
        if problems:
            return f"after {done}: {problems}"
    finally:
        driver.close()
    return ""


def _end(model, trace):
    s = model.init_states()[0]
    for a in trace:
        s = model.next_state(s, a)
    return s


def scenarios() -> list:
    return [("store bytes torn under a backup in flight", store_torn_under_a_backup)]
