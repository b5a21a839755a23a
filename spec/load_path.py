"""Host -> device: load_back, the H->D DMA finishing per rank, loading_check."""

from __future__ import annotations

from .action import act
from .cp_planner import evict_victims, lane_deficits, plan_victims
from .eviction import make_room
from .state import (
    ABSENT,
    HOST_RESIDENT,
    LOADING,
    RESIDENT,
    live_nodes,
    node_len,
    node_pages,
    nodes_covering,
    parent_node,
    path_to_root,
)
from . import slots
from .sync import digest_round
from .tree import lock_path, register_duplicate, touch, update_node


def nodes_to_load(m, rs, end):
    """The evicted chain from ``end`` up to (not including) the first resident ancestor,
    top-down; () when ``end`` is not an evicted node."""
    chain = []
    e = end
    while e >= 0 and rs.nodes[e].dev == ABSENT:
        chain.append(e)
        e = parent_node(m.pages, rs, e)
    return tuple(reversed(chain))


def load_back_params(m, s):
    ends = sorted({e for rs in s.ranks for e in live_nodes(rs) if rs.nodes[e].dev == ABSENT})
    for e in ends:
        yield act("load_back", node=e)


def load_back_guard(m, s, a):
    e = a["node"]
    short = False
    for rs in s.ranks:
        n = rs.nodes[e]
        if n is None or n.dev != ABSENT:
            return False
        chain = nodes_to_load(m, rs, e)
        if any(rs.nodes[x].host != HOST_RESIDENT for x in chain):
            return False
        total = sum(node_len(m.pages, rs, x) for x in chain)
        if total * m.cfg.page_size < m.cfg.load_back_threshold:
            return False  # too short to be worth a copy: the request recomputes it
        deficits = lane_deficits(m, rs, _chain_pages(m, rs, chain))
        if any(deficits):
            if m.cfg.cp_planner:
                if not plan_victims(m, rs, deficits, set(path_to_root(m.pages, rs, e))):
                    return False
            elif m.cfg.load_back_evicts:
                short = True
            else:
                return False  # the scheduler evicts first (separate evict steps)
    # load_back_evicts: a step when its own eviction or the load changes something.
    return load_back(m, s, a) != s if short else True


def _chain_pages(m, rs, chain):
    return [p for x in chain for p in node_pages(m.pages, rs, x)]


def load_back(m, s, a):
    """load_back(node): lock the path, take device slots, submit one H->D copy for the
    whole evicted chain ("all or nothing"), mark its nodes load_back_pending. With the CP
    planner, each rank first plans and evicts the victims that make room; with
    load_back_evicts, a rank without room evicts by victim order first. The chain, its
    pages and host copies are taken before that eviction (the seed's ``host_indices``)."""
    e = a["node"]
    cfg = m.cfg
    mark = cfg.write_back or not cfg.lbp_write_back_only
    ranks = []
    after = s.ranks
    if cfg.load_back_evicts and not cfg.cp_planner:
        after = _make_room(m, s.ranks, e)
    for was, rs in zip(s.ranks, after):
        chain = nodes_to_load(m, was, e)
        pages = _chain_pages(m, was, chain)
        deficits = lane_deficits(m, rs, pages)
        if any(deficits):
            if not cfg.cp_planner:
                ranks.append(rs)  # still no room after load_back_evicts' eviction: returns 0
                continue
            path = set(path_to_root(m.pages, rs, e))
            rs = evict_victims(m, rs, plan_victims(m, rs, deficits, path))
        # load-back-evicts-chain-unlocked: the eviction may have taken chain nodes; the
        # load goes on with what it took before (detached nodes, freed host copies), and
        # locks what is left of the node's path.
        kept = [x for x in chain if rs.nodes[x] is not None]
        for x in kept:
            rs = update_node(rs, x, dev=LOADING, lbp=mark)
        for x in path_to_root(m.pages, was, e):
            if rs.nodes[x] is not None:
                rs = update_node(rs, x, lock=rs.nodes[x].lock + 1)
        rs = touch(m, rs, kept)
        first = was.nodes[chain[0]].start
        rs = rs._replace(dev_free=rs.dev_free - len(pages), lq=rs.lq + ((first, e),))
        rs = slots.take(m, rs, "d", pages)
        ranks.append(rs)
    return s._replace(ranks=tuple(ranks))


def held_while_evicting(m, rs, e) -> frozenset:
    """load_back_evicts: the nodes a load_back of ``e`` holds locked while it evicts on
    this rank (``e``'s path), empty when the chain fits."""
    if rs.nodes[e] is None or sum(node_len(m.pages, rs, x) for x in nodes_to_load(m, rs, e)) <= rs.dev_free:
        return frozenset()
    return frozenset(path_to_root(m.pages, rs, e))


def _make_room(m, ranks, e):
    """load_back_evicts (HiRadixCache.load_back's retry: evict, then load again): every
    rank whose device pool lacks the chain's pages evicts by victim order while the node
    being loaded and its path are locked."""
    needs = [sum(node_len(m.pages, rs, x) for x in nodes_to_load(m, rs, e)) for rs in ranks]
    if all(n <= rs.dev_free for n, rs in zip(needs, ranks)):
        return ranks
    hold = [e] * len(ranks)
    if m.cfg.has("load-back-evicts-chain-unlocked"):
        # the seed's inc_lock_ref(ancester_node): the first resident ancestor, not the chain
        hold = [parent_node(m.pages, rs, nodes_to_load(m, rs, e)[0]) for rs in ranks]
    return tuple(make_room(m, ranks, needs, hold))


def load_dma_done_params(m, s):
    for r in range(m.cfg.ranks):
        yield act("load_dma_done", rank=r)


def load_dma_done_guard(m, s, a):
    rs = s.ranks[a["rank"]]
    return rs.ldone < len(rs.lq)


def load_dma_done(m, s, a):
    r = a["rank"]
    ranks = list(s.ranks)
    ranks[r] = ranks[r]._replace(ldone=ranks[r].ldone + 1)
    return s._replace(ranks=tuple(ranks))


def loading_check_params(m, s):
    yield act("loading_check")


def loading_check_guard(m, s, a):
    # Runs every iteration while loads are in flight; MIN may be 0 (a stuttering step).
    return any(rs.lq for rs in s.ranks)


def loading_check(m, s, a):
    """Ack the load-backs finished on every rank (MIN, with the digest pair): device
    copies become usable, the path lock is dropped, finish_load_back clears the marks."""
    s, halt = digest_round(m, s, "loading_check")
    if halt:
        return s._replace(halted=halt)
    n = min(rs.ldone for rs in s.ranks)
    ranks = []
    for rs in s.ranks:
        for start, end in rs.lq[:n]:
            loaded = nodes_covering(m.pages, rs, start, end)
            for x in loaded:
                rs = update_node(rs, x, dev=RESIDENT, lbp=False)
            if m.cfg.settled_duplicates:
                # finish_load_back walks from the anchor to the root: a birth point.
                for x in reversed(loaded):
                    rs = register_duplicate(m, rs, x)
            if rs.nodes[end] is not None:
                rs = lock_path(m, rs, end, -1)
        ranks.append(rs._replace(lq=rs.lq[n:], ldone=rs.ldone - n))
    return s._replace(ranks=tuple(ranks))
