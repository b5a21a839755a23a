"""A prefetch whose anchor left the tree before it ended: what the rank does with the pages.

The spec has no such state: a prefetch holds a host reference on its anchor, so no spec
step takes the anchor away (only a buggy release could, and none of the catalogued bugs
reaches it). The implementation still guards it: check_prefetch_progress finds nowhere
to attach the fetched run, counts it as orphaned and frees its host slots. Here the
anchor is taken out of the tree by hand (on top of the shortest spec trace to a prefetch
that attaches a fetched run below an anchor), and the step must retire the prefetch as
the spec would, except that the run the spec attaches is dropped: counted in
``prefetch_orphaned_tokens_total`` instead of ``prefetched_tokens_total``, its host
slots back in the pool, no node added, the unused tail queued for release as usual.
"""

from __future__ import annotations

from dataclasses import replace

from tiercheck.impl.hicache.metrics import PREFETCH_COMPLETED, PREFETCH_ORPHANED, PREFETCHED
from tiercheck.models import model_file

from .counters import increments
from .situations import before_last_step


def _attached_below_anchor(m, s, a, t) -> bool:
    """check_prefetch_progress attaching a fetched run below an anchor node."""
    if a.name != "check_prefetch_progress" or len(t.ranks[0].pq) >= len(s.ranks[0].pq):
        return False
    return s.ranks[0].pq[a["op"]][1] >= 0 and increments(m, s, t, a)[0].get(PREFETCHED, 0) > 0


def _gone(rank, anchor_end) -> None:
    """The anchor leaves the tree, its slots back in their pools (a release that ignored
    the prefetch's host reference)."""
    node = rank.tree.node_at(anchor_end)
    if node.host_slots:
        rank.host_pool.free(node.host_slots)
    if node.dev_slots:
        rank.device_pool.free(node.dev_slots)
    rank._remove_nodes([node])


def orphaned_prefetch_is_dropped() -> str:
    """wt-prefetch-1r with two-token pages, requests [1,2], [1..8], [9,10] on 4 device and
    4 host pages, no faults (a three-page run fetched below the first page: 6 tokens, so
    every operator between the run's pages and the page size gives another count); ""
    when the rank drops the orphaned run as it must."""
    cfg = replace(model_file.load("wt-prefetch-1r").config, page_size=2,
                  requests=((1, 2), (1, 2, 3, 4, 5, 6, 7, 8), (9, 10)), device_pages=4, host_pages=4,
                  faults=frozenset())
    with before_last_step(cfg, _attached_below_anchor) as (model, trace, driver, out):
        if out.mismatch is not None:
            return f"before the anchor left: {out.mismatch.message}"
        s, step = out.states[-1], trace[-1]
        want = increments(model, s, model.next_state(s, step), step)[0]
        rank = driver.group.ranks[0]
        op = rank.pq[step["op"]]
        _gone(rank, op.anchor_end)
        nodes, free, relq = len(rank.tree.nodes()), rank.host_pool.available(), len(rank.relq)
        was = driver.group.metrics()[0]
        retired = driver.group.apply(step.name, op=step["op"])
        now = driver.group.metrics()[0]
        got = {k: now.get(k, 0) - was.get(k, 0) for k in (PREFETCHED, PREFETCH_ORPHANED, PREFETCH_COMPLETED)}
        dropped = want.get(PREFETCHED, 0) // cfg.page_size  # the run the spec attaches, in pages
        problems = []
        if not retired or rank.pq:
            problems.append(f"the prefetch is not retired ({retired!r}, {len(rank.pq)} left)")
        expected = {PREFETCHED: 0, PREFETCH_ORPHANED: want.get(PREFETCHED, 0),
                    PREFETCH_COMPLETED: want.get(PREFETCH_COMPLETED, 0)}
        problems += [f"counter {k} went up by {got[k]}, {v} expected" for k, v in expected.items() if got[k] != v]
        if len(rank.tree.nodes()) != nodes:
            problems.append(f"the tree went from {nodes} to {len(rank.tree.nodes())} nodes")
        if rank.host_pool.available() != free + dropped:
            problems.append(f"{rank.host_pool.available() - free} host pages freed, the dropped run holds {dropped}")
        tail = len(op.slots) - want.get(PREFETCH_COMPLETED, 0) // cfg.page_size  # reserved, not fetched
        if len(rank.relq) != relq + (tail > 0):
            problems.append(f"the release queue went from {relq} to {len(rank.relq)} entries")
    return f"a prefetch whose anchor left the tree: {'; '.join(problems)}" if problems else ""
