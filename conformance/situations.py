"""Situations a random campaign seldom reaches, each as the shortest spec trace to it.

Some steps matter only in a state that takes many exact steps to set up (a prefetch whose
page one rank's store lost and the other's kept), or only as a step the spec does not
allow there (a request locked twice, a request unlocked that never ran): the default
campaign and the generated tours may never take them. Each situation here names a shipped
model and a goal over the spec's transitions; a breadth-first search of the spec finds the
shortest trace ending in a transition that meets the goal, and the trace is replayed on
the implementation with every check of conformance (refined state, bytes, counters,
what the step returned). A probe, a step the spec disables in the goal's state, is
applied after that trace: the implementation must not move either.
"""

from __future__ import annotations

from collections import deque
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable, NamedTuple, Optional

from tiercheck.impl.hicache.metrics import DEVICE_EVICTED, DUP_RECLAIMED, MIRROR_RELEASED
from tiercheck.models import model_file
from tiercheck.toml_compat import tomllib
from tiercheck.spec.action import act
from tiercheck.spec.cp_planner import lane_of
from tiercheck.spec.host_eviction import evict_host
from tiercheck.spec.load_path import nodes_to_load
from tiercheck.spec.state import ABSENT as DEV_ABSENT
from tiercheck.spec.state import RESIDENT as DEV_RESIDENT
from tiercheck.spec.state import HOST_RESIDENT, child_nodes, live_nodes, node_len, node_pages, path_to_root, subtree
from tiercheck.spec.model import Model
from tiercheck.spec.prefetch import _anchor as prefetch_anchor
from tiercheck.spec.prefetch import _held_from as held_from
from tiercheck.spec.prefetch_end import revokes_ready
from tiercheck.spec.write_path import _same_page, insert_device_need, insert_on_rank

from .counters import _page_state, rank_increments
from .reference import ReferenceDriver
from .runner import replay

SEARCH_LIMIT = 50_000  # spec states a search may visit


def first_path(model, goal: Callable, limit: int = SEARCH_LIMIT, successors: Optional[Callable] = None):
    """The shortest spec trace whose last transition ``(s, a, t)`` meets ``goal(s, a, t)``
    (breadth-first from the initial state); None when none within ``limit`` states.
    ``successors(s)``: the (action, next state) pairs to search (default: the spec's)."""
    if successors is None:
        def successors(s):
            return ((a, model.next_state(s, a)) for a in model.actions(s))
    init = model.init_states()[0]
    seen, todo = {init}, deque([(init, [])])
    while todo and len(seen) < limit:
        s, path = todo.popleft()
        for a, t in successors(s):
            if goal(s, a, t):
                return path + [a]
            if t not in seen:
                seen.add(t)
                todo.append((t, path + [a]))
    return None


@contextmanager
def before_last_step(cfg, goal: Callable):
    """The shortest trace of ``cfg``'s model to a transition that ``goal(model, s, a, t)``
    meets (as a Situation's goal),
    all but its last step replayed on a fresh reference driver (closed on exit): yields
    (model, trace, driver, the replay's outcome), for a fault applied at that last step."""
    model = Model(cfg)
    trace = first_path(model, lambda s, a, t: goal(model, s, a, t))
    driver = ReferenceDriver(cfg)
    try:
        yield model, trace, driver, replay(driver, trace[:-1])
    finally:
        driver.close()


def _made_durable(m, s, a, t) -> bool:
    """The first step that marks a page durable on rank 1 (a single-writer follower: its
    marks come from the writer's ack count, synced through the MIN of the ack slots)."""
    return s.ranks[-1].durable == 0 and t.ranks[-1].durable != 0


class Situation(NamedTuple):
    name: str
    model: str  # a shipped model
    faults: tuple  # added to the model's faults
    goal: Callable  # (model, s, a, t) -> bool
    probe: Optional[Callable] = None  # (model, t) -> an action the spec disables in t, applied after the trace
    overrides: tuple = ()  # (Config field, value) pairs changed from the shipped model
    backend: str = "lockstep"  # the reference's backend in the mutation suite (gloo: one process per rank)
    skip: tuple = ()  # actions the search does not take (a smaller space; the trace is still the spec's)


def _prefetch_one_store(m, s, a, t) -> bool:
    """A prefetch starts whose first missing page is in one rank's store only (the other
    lost it): the hit query must still find it (the spec reads any rank's store)."""
    if a.name != "prefetch_from_storage" or len(t.ranks[0].pq) <= len(s.ranks[0].pq):
        return False
    req, _anchor, k, _n = t.ranks[0].pq[-1]
    first = m.pages.request_pages[req][k]
    return len({held >> first & 1 for held in s.store}) > 1


def _host_evicted(m, before, after) -> int:
    """Host pages of nodes that left the tree in one step."""
    gone = [e for e, n in enumerate(before.nodes) if n is not None and n.host == HOST_RESIDENT
            and (e >= len(after.nodes) or after.nodes[e] is None)]
    return sum(len(m.pages.chain(before.nodes[e].start, e)) for e in gone)


def _evicted_past_need(m, s, a, t) -> bool:
    """An insert's host allocation evicts a host leaf of more pages than it needs (one)
    while another host-only node stays: evict_host stops once it freed enough."""
    return (a.name == "insert" and _host_evicted(m, s.ranks[0], t.ranks[0]) > 1
            and any(n is not None and n.dev == DEV_ABSENT and n.host == HOST_RESIDENT for n in t.ranks[0].nodes))


def _locked(m, s, a, t) -> bool:
    return a.name == "lock_request"


def _lock_again(m, t):
    """The running request's lock step again: it is running already."""
    req, _end = t.ranks[0].running[0]
    return act("lock_request", req=req)


def _unlock_idle(m, t):
    """An unlock step for a request that is not running."""
    running = {r for r, _e in t.ranks[0].running}
    return act("unlock_request", req=next(r for r in range(len(m.pages.request_pages)) if r not in running))


def _lane_short(m, t):
    """An insert the spec disables although every rank's device pool has room for it:
    a CP owner lane lacks room (None when there is none)."""
    for req in range(len(m.pages.request_pages)):
        a = act("insert", req=req)
        if all(insert_device_need(m, rs, req) <= rs.dev_free for rs in t.ranks) and m.next_state(t, a) is None:
            return a
    return None


def _lane_short_insert(m, s, a, t) -> bool:
    return m.cfg.cp_lanes > 1 and _lane_short(m, t) is not None


def _inserted(m, s, a, t) -> bool:
    return a.name == "insert"


def _load_no_node(m, t):
    """load_back of a page where no node ends (the spec loads only evicted nodes): the
    rank finds no node at that path and must refuse without moving."""
    return act("load_back", node=next(e for e, n in enumerate(t.ranks[0].nodes) if n is None))


def _retired_anchored(m, s, a, t) -> bool:
    """A drain round retires a revoked prefetch that hangs below an anchor node (it must
    drop the anchor's host reference and free the prefetch's host slots)."""
    return a.name == "drain_storage_control_queues" and any(s.ranks[0].pq[i][1] >= 0 for i in revokes_ready(m, s))


def _fetchable(m, t):
    """A request whose first missing page the store holds, below an anchor a prefetch
    could hang from, with host room for the rest of it (None when there is none)."""
    for req in range(len(m.pages.request_pages)):
        anchor, path = prefetch_anchor(m, t.ranks[0], req), m.pages.request_pages[req]
        if (anchor is not None and held_from(m, t, 0, path, anchor[0])
                and t.ranks[0].host_free >= len(path) - anchor[0]):
            return req
    return None


def _store_hit(m, s, a, t) -> bool:
    """Storage without prefetch: a request could be prefetched, were prefetch on."""
    return not m.cfg.prefetch and _fetchable(m, t) is not None


def _prefetch_off(m, t):
    """prefetch_from_storage in a model without prefetch (not an action of the model):
    the rank must not start one."""
    return act("prefetch_from_storage", req=_fetchable(m, t))


def _increments(m, s, a, t):
    """Rank 0's counter increments (in pages) of the step from ``s`` to ``t``."""
    return rank_increments(m, s.ranks[0], t.ranks[0], a, 0, list(zip(s.ranks, t.ranks)))


def _reclaimed_two(m, s, a, t) -> bool:
    """A step reclaims two pages of duplicate host copies (a two-page node: the counter
    counts the node's pages times the page size)."""
    return _increments(m, s, a, t)[DUP_RECLAIMED] >= 2


def _cached_whole_backed(m, s, a, t) -> bool:
    """Request 0 is cached whole, its last node holding a host copy (the one anchor a
    prefetch of it could hang from): nothing is left to fetch."""
    rs, path = t.ranks[0], m.pages.request_pages[0]
    end = rs.owner[path[-1]]
    return all(rs.owner[p] >= 0 for p in path) and end == path[-1] and rs.nodes[end].host == HOST_RESIDENT


def _prefetch_cached(m, t):
    """prefetch_from_storage of request 0, cached whole: the spec has nothing to fetch."""
    return act("prefetch_from_storage", req=0)


def _released_one_page(m, s, a, t) -> bool:
    """A drain round releases the host copy of a one-page mirror (the counter counts
    pages times the page size: with two-token pages, 2 for 1 page, where 1 ** 2 is 1)."""
    return _increments(m, s, a, t)[MIRROR_RELEASED] == 1


def _insert_evicted(m, s, a, t) -> bool:
    """An insert without device room evicts first (insert_evicts: the scheduler's
    evict(num_tokens), in tokens: pages times the page size)."""
    return a.name == "insert" and _increments(m, s, a, t)[DEVICE_EVICTED] >= 1


def _insert_evicted_of_two(m, s, a, t) -> bool:
    """An insert that evicts while two unlocked nodes hold device copies: the victim
    order picks one."""
    return _insert_evicted(m, s, a, t) and sum(
        1 for n in s.ranks[0].nodes if n is not None and n.dev != DEV_ABSENT and n.lock == 0) >= 2


def _insert_evicted_the_shortfall(m, s, a, t) -> bool:
    """An insert of three pages or more that evicts while some device room is left: the
    scheduler's evict(num_tokens) is asked for the shortfall (need minus free pages)."""
    return (_insert_evicted(m, s, a, t) and insert_device_need(m, s.ranks[0], a["req"]) >= 3
            and s.ranks[0].dev_free > 0)


def _fetched_inside_node(m, s, a, t) -> bool:
    """A prefetch ends whose fetched run is cached already up to a page inside a node
    (inserted since the prefetch started): the rank splits that node after the page, to
    attach the rest of the run below it (when something is left to attach)."""
    if a.name != "check_prefetch_progress" or t == s:
        return False
    rs, i = s.ranks[0], a["op"]
    req, _anchor, k, _n = rs.pq[i]
    completed = min(max(r.pdone[i], 0) for r in s.ranks)
    fetched = m.pages.request_pages[req][k:k + completed]
    have = next((j for j, p in enumerate(fetched) if rs.owner[p] < 0), len(fetched))
    return have > 0 and rs.owner[fetched[have - 1]] != fetched[have - 1]


def _fetched_all_cached(m, s, a, t) -> bool:
    """A prefetch ends whose whole fetched run is cached already (the request was
    inserted while its read ran): nothing is attached, the run's host slots are freed."""
    if a.name != "check_prefetch_progress" or t == s:
        return False
    rs, i = s.ranks[0], a["op"]
    req, _anchor, k, _n = rs.pq[i]
    completed = min(max(r.pdone[i], 0) for r in s.ranks)
    fetched = m.pages.request_pages[req][k:k + completed]
    return len(fetched) > 0 and all(rs.owner[p] >= 0 for p in fetched)


def _prefetch_below_three(m, s, a, t) -> bool:
    """A prefetch starts below an anchor at least three pages deep (the rank finds the
    anchor's node by the last matched page, wherever the match ends)."""
    return (a.name == "prefetch_from_storage" and len(t.ranks[0].pq) > len(s.ranks[0].pq)
            and t.ranks[0].pq[-1][2] >= 3)


def _backed_evict(m, s, a, t) -> bool:
    """write_back: an eviction of a node with a host copy already (no rank needs a
    write) while another node is host-only: the MIN of the ranks' (rank, pages) words is
    the all-ones sentinel, as the wire carries it (on gloo a new int, not the constant
    itself); a rank that took it for a size would run the host-eviction fallback."""
    node = s.ranks[0].nodes[a["node"]] if a.name == "evict" else None
    return (node is not None and node.host == HOST_RESIDENT and t != s
            and any(n is not None and n.dev == DEV_ABSENT and n.host == HOST_RESIDENT for n in s.ranks[0].nodes))


def _on_device(rs, e) -> bool:
    return e < len(rs.nodes) and rs.nodes[e] is not None and rs.nodes[e].dev != DEV_ABSENT


def _lane_victim_beside_another(m, s, a, t) -> bool:
    """A CP load-back whose planned victim shares an owner lane with a device node that
    stays: the planner must read each page's lane from its device slot whatever the slot
    (the implementation hands out the lowest free slot, so a node re-inserted after an
    eviction sits below an older one of the same lane; with requests [1], [2], [3] on
    three device pages the victim, page 2, is a lane-0 page in slot 1)."""
    if m.cfg.cp_lanes < 2 or a.name != "load_back" or t == s:
        return False
    rs, rt = s.ranks[0], t.ranks[0]
    held = [e for e in live_nodes(rs) if _on_device(rs, e)]

    def lanes(e):
        return {lane_of(m, p) for p in node_pages(m.pages, rs, e)}

    gone = [e for e in held if not _on_device(rt, e)]
    stay = [e for e in held if _on_device(rt, e)]
    return any(lanes(g) & lanes(k) for g in gone for k in stay)


def _evicted_by_load(rs, rt) -> list:
    """Nodes whose device copy a load-back step took (rank states before and after)."""
    return [e for e in live_nodes(rs) if _on_device(rs, e) and not _on_device(rt, e)]


def _victim_lane1_in_even_slot(m, s, a, t) -> bool:
    """A CP load-back (slot identities on) whose planned victim holds a lane-1 page in an
    even device slot: the planner reads a page's lane from the logical page
    ``1 + lane + cp * slot``, and a formula that agrees with it only in odd slots or on
    lane 0 (``lane ** 2 * slot``, ``lane % 2 * slot``, three lanes: ``(1 + lane) ^ 3 * slot``)
    or only for one-token pages (the token locations ``q & page_size``) misreads that page."""
    if m.cfg.cp_lanes < 2 or not m.cfg.slots or a.name != "load_back" or t == s:
        return False
    rs = s.ranks[0]
    return any(lane_of(m, p) == 1 and rs.dslot[p] % 2 == 0
               for e in _evicted_by_load(rs, t.ranks[0]) for p in node_pages(m.pages, rs, e))


def _lane0_load_evicts(m, s, a, t) -> bool:
    """A CP load-back of a lane-0 page that evicts: with two-token pages the planner reads
    the lane from a page's first token location ``q * 2`` (its logical page q), which a
    formula right only for one-token pages (``q / 2``, ``q // 2``, ``q ** 2``) reads as
    a page of another lane."""
    if m.cfg.cp_lanes < 2 or a.name != "load_back" or t == s or not _evicted_by_load(s.ranks[0], t.ranks[0]):
        return False
    rs = s.ranks[0]
    return any(lane_of(m, p) == 0 for x in nodes_to_load(m, rs, a["node"]) for p in node_pages(m.pages, rs, x))


def _reclaim_diverged(m, s, a, t) -> bool:
    """A ready-count round halts: the ranks reclaimed different duplicates since the last
    round (registry skew) and their digests must tell (the spec takes the fixed encoding
    for an ideal hash)."""
    return not s.halted and "diverged" in t.halted


def _touched_second_of_three(m, s, a, t) -> bool:
    """A rank-local touch of the second least recent of three nodes on its clock: it
    becomes the most recent (the rank must compare the touched node with the last entry,
    and only the last: the second entry is the last one only on a two-node clock)."""
    if a.name != "local_access":
        return False
    rs = s.ranks[a["rank"]]
    live = [x for x in rs.clock if rs.nodes[x] is not None]
    return len(live) >= 3 and live[1] == a["node"]


def _evicts_with_room_left(m, s, t) -> bool:
    """The step evicts while the device has some free pages, and a device leaf it did not
    need stays: evicting more than the shortfall would take that leaf too."""
    rs, rt = s.ranks[0], t.ranks[0]
    evicted = [e for e in live_nodes(rs) if rs.nodes[e].dev == DEV_RESIDENT and
               (rt.nodes[e] is None or rt.nodes[e].dev != DEV_RESIDENT)]
    spare = [e for e in live_nodes(rt) if rt.nodes[e].dev == DEV_RESIDENT and rt.nodes[e].lock == 0
             and not any(rt.nodes[c].dev == DEV_RESIDENT for c in child_nodes(m.pages, rt, e))]
    return rs.dev_free > 0 and bool(evicted) and bool(spare)


def _load_evicts_with_room_left(m, s, a, t) -> bool:
    """A load_back that evicts its shortfall (chain - free), not the chain's size or more."""
    return a.name == "load_back" and _evicts_with_room_left(m, s, t)


def _insert_evicts_with_room_left(m, s, a, t) -> bool:
    """The same for an insert (insert_evicts): it evicts its shortfall, the pages it needs
    beyond the free ones, and a device leaf it did not need stays."""
    return a.name == "insert" and _evicts_with_room_left(m, s, t)


def _evict_above_busy_host_leaf(m, s, a, t) -> bool:
    """An evict of a node without a host copy while a host-only node below it holds a host
    reference (a backup reading it): the subtree is busy, so nothing may be pruned."""
    if a.name != "evict":
        return False
    rs, e = s.ranks[0], a["node"]
    if rs.nodes[e] is None or rs.nodes[e].host == HOST_RESIDENT:
        return False
    return any(rs.nodes[d] is not None and rs.nodes[d].href > 0 for d in subtree(m.pages, rs, e)[1:])


def _split_long_lower_half(m, s, a, t) -> bool:
    """An insert that splits a device-resident node and leaves a lower half of two pages
    or more (a one-page lower half hides which end of the slot list a slice cuts)."""
    if a.name != "insert":
        return False
    rs, rt = s.ranks[0], t.ranks[0]
    return any(rt.nodes[e] is not None and rt.nodes[e].start != rs.nodes[e].start
               and rs.nodes[e].dev == DEV_RESIDENT and node_len(m.pages, rt, e) >= 2 for e in live_nodes(rs))


def _split_long_upper_half(m, s, a, t) -> bool:
    """An insert that splits a device-resident node and leaves an upper half of two pages
    or more (a one-page upper half hides how many of its slots a slice takes)."""
    if a.name != "insert":
        return False
    rs, rt = s.ranks[0], t.ranks[0]
    return any(rt.nodes[e] is not None and rs.nodes[e].dev == DEV_RESIDENT
               and node_len(m.pages, rs, e) - node_len(m.pages, rt, e) >= 2 for e in live_nodes(rs))


def _touch_most_recent(m, t):
    """Probe: a rank touches the node its clock already ends with (nothing would change,
    so the spec disables it and the rank must refuse it)."""
    for r, rs in enumerate(t.ranks):
        live = [x for x in rs.clock if rs.nodes[x] is not None]
        if live:
            return act("local_access", rank=r, node=live[-1])
    raise LookupError("no rank has a live clock entry")


def _named(name: str):
    """A goal: a step of that action."""
    def goal(m, s, a, t) -> bool:
        return a.name == name
    return goal


def _diverged_insert(m, s, a, t) -> bool:
    """An insert of a request whose pages the two replicas cache differently (they
    diverged): the ranks would stage different nodes, so none does."""
    if a.name != "insert" or t == s:
        return False
    return any(_page_state(s.ranks[0], p)[:2] != _page_state(s.ranks[1], p)[:2]
               for p in m.pages.request_pages[a["req"]])


def _diverged_node_keys(m, s, a, t) -> bool:
    """An insert for which the diverged replicas would stage different nodes at the same
    place of their lists (as many nodes each up to there): comparing how many nodes is not
    enough, the ranks must compare which node (its key), and none stages it."""
    if a.name != "insert" or t == s:
        return False
    mine, theirs = (insert_on_rank(m, rs, a["req"])[1] for rs in s.ranks)
    return any(e != f for e, f in zip(mine, theirs))


def _room_beside_host_leaf(m, s, a, t) -> bool:
    """An insert where a rank has host room for the first node it stages while
    evict_host would free a host leaf: with partial-backup-leak each rank allocates on its
    own, and a rank with room must not run the fallback eviction."""
    if a.name != "insert" or t == s:
        return False
    for r, rs in enumerate(s.ranks):
        if r in (a.get("fail") or ()):
            continue
        rs, want = insert_on_rank(m, rs, a["req"])
        if want:
            need = node_len(m.pages, rs, want[0])
            if rs.host_free >= need and evict_host(m, rs, need) != rs:
                return True
    return False


def _diverged_anchor_req(m, t):
    """A request every rank could hang a prefetch below, but each below its own anchor
    (the replicas diverged), with the first missing page in some rank's store: the ranks
    must agree to refuse it (None when there is none)."""
    for req in range(len(m.pages.request_pages)):
        anchors = [prefetch_anchor(m, rs, req) for rs in t.ranks]
        path = m.pages.request_pages[req]
        if (None not in anchors and len(set(anchors)) > 1
                and any(held_from(m, t, r, path, x[0]) for r, x in enumerate(anchors))):
            return req
    return None


def _diverged_anchors(m, s, a, t) -> bool:
    return _diverged_anchor_req(m, t) is not None


def _prefetch_diverged(m, t):
    """prefetch_from_storage of that request (the spec disables it: the anchors differ)."""
    return act("prefetch_from_storage", req=_diverged_anchor_req(m, t))


def _diverged_counts_two_apart(m, s, a, t) -> bool:
    """An insert for which one diverged replica wants at least two nodes staged more than
    the other: past the shorter list the ranks must go on refusing, not stage by index."""
    if a.name != "insert" or t == s:
        return False
    counts = [len(insert_on_rank(m, rs, a["req"])[1]) for rs in s.ranks]
    return max(counts) - min(counts) >= 2


def _taken_for_sibling(m, s, a, t) -> bool:
    """An insert (page-ceil-match) with a page of the request not cached while a sibling
    page with the same leading token is: the walk takes the sibling for it."""
    if a.name != "insert":
        return False
    rs = s.ranks[0]
    for p in m.pages.request_pages[a["req"]]:
        above = m.pages.parent[p]
        siblings = m.pages.children[above] if above >= 0 else m.pages.roots
        if rs.owner[p] < 0 and any(c != p and rs.owner[c] >= 0 and _same_page(m, c, p) for c in siblings):
            return True
    return False


def _unbacked_leaves(m, rs, e) -> int:
    """Pages of the unlocked childless device nodes without a host copy off ``e``'s path:
    what the CP planner could free by deleting them, were they freeable."""
    path = set(path_to_root(m.pages, rs, e))
    return sum(node_len(m.pages, rs, x) for x in live_nodes(rs)
               if x not in path and rs.nodes[x].dev != DEV_ABSENT and rs.nodes[x].host != HOST_RESIDENT
               and rs.nodes[x].lock == 0 and not child_nodes(m.pages, rs, x))


def _load_unbacked_only(m, t):
    """write_back, CP planner: a load_back of a host-only node the spec disables while,
    on every rank, device nodes without a host copy could make the room (a victim must
    free its device copy without a host write: under write_back an unbacked leaf would
    need one first, so it is no victim). None when there is none."""
    if not (m.cfg.cp_planner and m.cfg.write_back):
        return None
    for e in sorted({e for rs in t.ranks for e in live_nodes(rs) if rs.nodes[e].dev == DEV_ABSENT}):
        a = act("load_back", node=e)
        if m.next_state(t, a) is not None:
            continue
        fits = True
        for rs in t.ranks:
            n = rs.nodes[e]
            chain = nodes_to_load(m, rs, e) if n is not None and n.dev == DEV_ABSENT else ()
            need = sum(node_len(m.pages, rs, x) for x in chain)
            if (not chain or any(rs.nodes[x].host != HOST_RESIDENT for x in chain)
                    or need <= rs.dev_free or _unbacked_leaves(m, rs, e) < need - rs.dev_free):
                fits = False
        if fits:
            return a
    return None


def _unbacked_blocks_load(m, s, a, t) -> bool:
    return _load_unbacked_only(m, t) is not None


def _load_deleted_unbacked(m, s, a, t) -> bool:
    """A CP load-back whose planned victim has no host copy (write-through: a childless
    one is deleted, nothing to write)."""
    if not m.cfg.cp_planner or a.name != "load_back" or t == s:
        return False
    rs, rt = s.ranks[0], t.ranks[0]
    return any(rs.nodes[e].dev != DEV_ABSENT and rs.nodes[e].host != HOST_RESIDENT
               and (e >= len(rt.nodes) or rt.nodes[e] is None) for e in live_nodes(rs))


SITUATIONS = (
    Situation("host eviction stops at the need", "wt-1r", (), _evicted_past_need,
              overrides=(("requests", ((1, 2), (3,), (4,))), ("device_pages", 2), ("host_pages", 3))),
    Situation("prefetch hit in one rank's store", "wt-prefetch-2r", ("store_loss",), _prefetch_one_store),
    Situation("lock a running request again", "request-locks-2r", (), _locked, _lock_again),
    Situation("unlock a request that is not running", "request-locks-2r", (), _locked, _unlock_idle),
    Situation("insert short of a CP lane only", "cp-planner-lanes-2r", (), _lane_short_insert, _lane_short),
    # The same with two-token pages: a node's lanes follow its depth in pages, not tokens.
    Situation("insert short of a CP lane only, two-token pages", "cp-planner-lanes-2r", (), _lane_short_insert,
              _lane_short, overrides=(("page_size", 2), ("requests", ((1, 2), (1, 2, 3, 4), (5, 6))))),
    # Lanes of two pages, one of lane 0's used: one free there (capacity minus used,
    # not a bitwise difference: 2 ^ 1 would be 3), where request 2/3/4 needs two.
    Situation("insert short of a CP lane of two pages", "cp-planner-lanes-2r", (), _lane_short_insert, _lane_short,
              overrides=(("device_pages", 4), ("requests", ((1,), (2, 3, 4))))),
    Situation("a CP load-back victim in a higher device slot", "cp-planner-2r", (), _lane_victim_beside_another,
              overrides=(("cp_lanes", 2), ("device_pages", 3), ("requests", ((1,), (2,), (3,))))),
    # Two-token pages, three device pages (lanes of 2 and 1 pages), slots tracked: the
    # second page of (1, 101, 2, 102) (lane 1) is evicted from slot 1, request (3, 103,
    # 4, 104) takes slots 1 and 2, so its lane-1 page sits in slot 2; loading the evicted
    # page back lacks a lane-1 page and the one victim that frees it is that request's
    # node: read on lane 0, nothing frees the lane and the load is refused.
    Situation("a CP load-back whose victim holds a lane-1 page in an even slot", "cp-planner-lanes-2r", (),
              _victim_lane1_in_even_slot,
              overrides=(("page_size", 2), ("device_pages", 3), ("host_pages", 4), ("slots", True),
                         ("requests", ((1, 101), (1, 101, 2, 102), (3, 103, 4, 104))))),
    # Skewed registries: rank 0 reclaims page (1,), rank 1 page (1, 269849), and the
    # round must halt. 269849 is the least second token whose page key differs from
    # page (1,)'s by a multiple of 61, 62 and 63: a digest modulus that small (2^63 - 1
    # mistyped as 63, 62, 61 or -63) folds the two victims to one digest and the round passes.
    Situation("reclaim victims the ranks' digests must tell apart", "wb-reclaim-2r", (), _reclaim_diverged,
              overrides=(("requests", ((1,), (1, 269849), (1, 269849, 3))),)),
    # The same on three lanes (4 device pages: lanes of 2, 1 and 1 pages): page 3 of (1, 3)
    # (lane 1) is evicted, (5,) and (1, 2) come in and page 2 (lane 1) lands in slot 2;
    # loading 3 back lacks lane 1, and page 2's node is the one victim for it. Lane 1 in
    # slot 2 is logical page 8; a mutant reading 1 - 1 + 6, 2 | 6 or 1 ^ 7 (page 6:
    # lane 2) or 2 ^ 6 (page 4: lane 0) frees nothing there and refuses the load.
    Situation("a CP load-back whose victim holds a lane-1 page in an even slot, three lanes", "cp-planner-lanes-2r",
              (), _victim_lane1_in_even_slot,
              overrides=(("cp_lanes", 3), ("device_pages", 4), ("host_pages", 4), ("slots", True),
                         ("requests", ((1, 3), (5,), (1, 2))))),
    # Two-token pages on the lanes model's own requests: (1, 101) is evicted, (4, 104)
    # takes lane 0's one page (slot 0), and loading (1, 101) back must evict it: its
    # logical page is 1, its first token location 2; a mutant writing 1 / 2, 1 // 2 or
    # 1 ** 2 there reads page 0 (lane 1) and the planner finds no lane-0 victim.
    Situation("a CP load-back of a lane-0 page, two-token pages", "cp-planner-lanes-2r", (), _lane0_load_evicts,
              overrides=(("page_size", 2), ("requests", ((1, 101), (1, 101, 2, 102), (4, 104))))),
    # Three one-page lanes: a node's lanes count from its first page (its depth in pages
    # minus its length), so page 1 is on lane 0 and request 4 lacks lane 0 (counted from
    # its last page, 1 + 1, page 1 would sit on lane 2; with two lanes the two agree).
    Situation("insert short of a CP lane only, three lanes", "cp-planner-lanes-2r", (), _lane_short_insert,
              _lane_short, overrides=(("cp_lanes", 3), ("device_pages", 3))),
    # write_back: the device holds only leaves without a host copy (2 and 3) when page 1
    # (evicted, backed) is loaded back: the planner may not take them (deleting an
    # unbacked leaf is write-through's way; write_back would have to write it first),
    # so the spec refuses the load.
    Situation("a CP load-back with only unbacked leaves, write_back", "cp-planner-2r", (), _unbacked_blocks_load,
              _load_unbacked_only, overrides=(("policy", "write_back"),)),
    # The other way round: under write_through_selective a node seen once has no host copy;
    # with the device full of such leaves the planner deletes one to load page 1 back.
    Situation("a CP load-back deleting an unbacked leaf, write_through_selective", "cp-planner-2r", (),
              _load_deleted_unbacked, overrides=(("policy", "write_through_selective"),)),
    Situation("a local touch of the second of three nodes", "lru-2r", (), _touched_second_of_three,
              overrides=(("host_pages", 3),)),
    # The CP planner's own clock (victim order "path"): a touch of the most recent entry
    # changes nothing, and the rank says so (local_access returns 0), as the spec disables it.
    Situation("a CP touch of the most recent node", "cp-planner-2r", (), _named("local_access"),
              _touch_most_recent),
    # load_back with load_back_evicts: it evicts the shortfall (chain - free), not more.
    Situation("a load-back evicting its shortfall beside a free page", "wt-evicts-1r", (),
              _load_evicts_with_room_left,
              overrides=(("device_pages", 3), ("host_pages", 4), ("requests", ((1,), (2,), (3, 4))),
                         ("insert_evicts", False))),
    # insert with insert_evicts: the same shortfall (need - free), not need << free.
    Situation("an insert evicting its shortfall beside a free page", "wt-evicts-1r", (),
              _insert_evicts_with_room_left,
              overrides=(("device_pages", 3), ("host_pages", 4), ("requests", ((1,), (2,), (3, 4))),
                         ("load_back_evicts", False))),
    Situation("an evict above a host-only node a backup still reads", "wts-mirror-1r", (),
              _evict_above_busy_host_leaf, overrides=(("requests", ((1,), (1, 2))),)),
    Situation("load back where no node ends", "wt-1r", (), _inserted, _load_no_node),
    Situation("a revoked prefetch with an anchor retired", "wt-prefetch-revoke-1r", (), _retired_anchored,
              overrides=(("requests", ((1,), (1, 2), (3,))),)),
    Situation("a store hit with prefetch off", "wt-mirror-1r", (), _store_hit, _prefetch_off),
    Situation("a two-page duplicate reclaimed", "wb-reclaim-1r", (), _reclaimed_two,
              overrides=(("requests", ((1, 2), (1, 2, 3), (4,))),)),
    Situation("a one-page mirror released, two-token pages", "wt-mirror-1r", (), _released_one_page,
              overrides=(("page_size", 2),)),
    Situation("an insert that evicts, two-token pages", "wt-evicts-1r", (), _insert_evicted,
              overrides=(("page_size", 2), ("requests", ((1, 2), (1, 2, 3, 4), (5, 6, 7, 8))))),
    # The victim order as a model file spells it: TOML's "path" is a string of its own,
    # not the interned literal (an identity test with "path" fails on it), and the
    # requests come in against path order (2 before 1): path order evicts (1,), the LRU
    # order (2,).
    Situation("an insert that evicts by path order read from TOML", "wt-evicts-1r", (), _insert_evicted_of_two,
              overrides=(("victim_order", tomllib.loads('victim_order = "path"')["victim_order"]),
                         ("requests", ((2,), (1,), (3,))))),
    # 63 pages backed up by the single writer: the follower's SKIP rides the MIN as
    # INT64_MAX, which must exceed every real ack (a bound of 62 reads the writer's
    # 63 as "no ack").
    Situation("a 63-page backup acked through the single writer's synced slots", "wt-mirror-mla-2r", (), _made_durable,
              overrides=(("requests", (tuple(range(1, 64)),)), ("device_pages", 63), ("host_pages", 63),
                         ("faults", frozenset()))),
    Situation("an insert that evicts its shortfall", "wt-evicts-1r", (), _insert_evicted_the_shortfall,
              overrides=(("requests", ((1,), (2, 3, 4))), ("device_pages", 3))),
    Situation("a prefetch read fails", "wt-prefetch-fail-1r", (), _named("prefetch_read_fails")),
    Situation("an eviction nobody needs to write, on gloo", "wb-2r", (), _backed_evict, backend="gloo"),
    Situation("a prefetch below a three-page match", "wt-prefetch-1r", (), _prefetch_below_three,
              overrides=(("requests", ((1, 2, 3, 4), (1, 2, 3), (5, 6, 7))), ("device_pages", 4), ("host_pages", 4),
                         ("faults", frozenset()))),
    Situation("a fetched run cached up to inside a node", "wt-prefetch-1r", (), _fetched_inside_node,
              overrides=(("requests", ((1, 2, 3), (1,), (4,))), ("device_pages", 3), ("host_pages", 3),
                         ("faults", frozenset()))),
    # The same up to the node's second page: an odd offset, and the split node's end hash
    # and the page's compare the other way round (an order test in place of != would
    # pass one of the two).
    Situation("a fetched run cached up to a node's second page", "wt-prefetch-1r", (), _fetched_inside_node,
              overrides=(("requests", ((1, 2, 3), (1, 2), (4,))), ("device_pages", 3), ("host_pages", 3),
                         ("faults", frozenset()))),
    # A long request (257 pages, past the 256 up to which CPython shares one int object
    # per value, so a page count compared by identity differs from one compared by value).
    Situation("a fetched run of 257 pages cached whole", "wt-prefetch-1r", (), _fetched_all_cached,
              overrides=(("requests", (tuple(range(1, 258)), (258,))), ("device_pages", 257), ("host_pages", 257),
                         ("faults", frozenset()))),
    # And a prefetch of a 257-page request cached whole, backed up: the match covers the
    # request (257 == 257 by value, not by identity), so there is nothing to fetch and the
    # rank must not start one.
    Situation("a prefetch of a 257-page request cached whole", "wt-prefetch-1r", (), _cached_whole_backed,
              _prefetch_cached,
              overrides=(("requests", (tuple(range(1, 258)), (258,))), ("device_pages", 257), ("host_pages", 257),
                         ("faults", frozenset()))),
)

# Situations only a catalogued bug leads to (a bug model's own variants): replayed with
# the bug on both sides and only the refined states compared (the bug breaks a property
# on both: benchmarks/mutation_suite.py's twin replay). Diverged replicas (lru-local-clock:
# different host victims) and an insert of pages they cache differently: the write path
# must refuse to stage what they disagree on, as the spec's write_backup does.
TWIN_SITUATIONS = (
    Situation("a split with a lower half of two pages", "variants/split-slice-off-by-one", (), _split_long_lower_half,
              overrides=(("requests", ((1, 2, 3), (1, 4))), ("device_pages", 4))),
    Situation("a split with an upper half of two pages", "variants/split-slice-off-by-one", (), _split_long_upper_half,
              overrides=(("requests", ((1, 2, 3), (1, 2, 4))), ("device_pages", 4))),
    Situation("an insert the diverged replicas disagree on", "variants/lru-local-clock", (), _diverged_insert),
    Situation("an insert the diverged replicas stage different nodes for", "variants/lru-local-clock", (),
              _diverged_node_keys, overrides=(("requests", ((1,), (2,), (3,), (1, 4))),)),
    Situation("a backup with host room beside a host leaf, each rank on its own", "variants/partial-backup-leak", (),
              _room_beside_host_leaf, overrides=(("requests", ((1,), (2,))),)),
    # Rank 1 drops pages 1 and 2, which rank 0 keeps host-only (each rank's own LRU
    # clock); page 1 comes back on both, on rank 1 without a host copy (the ranks' counts
    # differ, nobody stages it); then request (1, 2) wants page 1's node and a new one
    # staged on rank 1, nothing on rank 0.
    Situation("an insert the diverged replicas stage two nodes apart for", "variants/lru-local-clock", (),
              _diverged_counts_two_apart, overrides=(("requests", ((1,), (1, 2), (3,), (4,))), ("host_pages", 3)),
              skip=("load_back", "load_dma_done", "loading_check")),
    # Rank 1's backup of page 1 fails, rank 0's lands (committed once rank 1 acks a
    # backup of page 3): rank 0 keeps page 1 as a host-only node once it leaves the
    # device, rank 1 drops it; with one writer, rank 1's hit query finds it in the store.
    # (Request (1, 2) is not inserted before: until session 19 the spec's bug staged rank
    # 0's node on every rank, which departed from the implementation once the ranks wanted
    # different nodes at the same place of their lists; s19_kills has that twin now.)
    Situation("a prefetch the diverged replicas anchor differently", "variants/partial-backup-leak", (),
              _diverged_anchors, _prefetch_diverged,
              overrides=(("requests", ((1,), (1, 2), (3,))), ("storage", True), ("prefetch", True),
                         ("single_writer", True))),
    # page-ceil-match at the root (two-token pages): page (1, 3) is taken for the cached
    # page (1, 2); both are first pages, their token paths one page long (the walk must
    # read a page's leading token at -page_size: at +page_size there is none).
    Situation("a first page rounded up to a cached sibling", "variants/page-ceil-match", (), _taken_for_sibling,
              overrides=(("requests", ((1, 2), (1, 3, 5, 6))),)),
    # The same three pages deep: page (5, 7) is taken for (5, 6), and +page_size would
    # read the second page's leading token (3), not the third's.
    Situation("a third page rounded up to a cached sibling", "variants/page-ceil-match", (), _taken_for_sibling,
              overrides=(("requests", ((1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 7, 8, 9))),)),
)


def trace(sit: Situation):
    """(config, actions, indices of probes) of a situation; LookupError when no search
    reaches its goal (the model no longer has the situation)."""
    cfg = model_file.load(sit.model).config
    if sit.overrides:
        cfg = replace(cfg, **dict(sit.overrides))
    if sit.faults:
        cfg = replace(cfg, faults=frozenset(cfg.faults) | frozenset(sit.faults))
    model = Model(cfg)
    path = first_path(model, lambda s, a, t: sit.goal(model, s, a, t), successors=(
        lambda s: ((a, model.next_state(s, a)) for a in model.actions(s) if a.name not in sit.skip)) if sit.skip else None)
    if path is None:
        raise LookupError(f"situation {sit.name!r}: no trace of {sit.model} reaches it")
    probes = ()
    if sit.probe is not None:
        t = model.init_states()[0]
        for a in path:
            t = model.next_state(t, a)
        path, probes = path + [sit.probe(model, t)], (len(path),)
    return cfg, path, probes


def check(sit: Situation, driver_for) -> str:
    """Replay the situation on ``driver_for(cfg)()``: "" when the implementation agrees,
    else the disagreement."""
    cfg, actions, probes = trace(sit)
    driver = driver_for(cfg)()
    try:
        mm = replay(driver, actions, expect_disabled=probes).mismatch
    finally:
        driver.close()
    return "" if mm is None else f"{mm.kind} at step {mm.step} of {len(actions)}: {mm.message}"
