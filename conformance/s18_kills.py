"""Units for mutation survivors worked in session 18.

- two duplicate-reclaim victims folded into one rank's digest before a ready-count round
  (wb-reclaim-2r with two one-page duplicates filling the host pool and a two-page node
  written back): the rolling digest's second fold is the first that can leave the fixed
  encoding's range [0, 2^(w-1) - 1] (a digest of one victim is its 60-bit key + 1), so a
  modulus past the wire's width (2^64, 2^65 - 1, 2^128 - 1 instead of 2^63 - 1) puts a
  negative value on the 64-bit wire here, whose negation can wrap: the reference adapter
  checks every snapshot's digest pair (tiercheck.conformance.wire_digest). Every unit
  before reclaimed at most one victim per round. Pages (1,) and (2,) are chosen so that
  their two-victim digest lands in the upper half of 2^64 in either order.
- (fault) a peer stopped at a sync point under GlooHiCache's default timeouts: the
  running rank gives up after the documented default collective timeout (10 s) and the
  driver names the stopped rank as stalled one grace later (that timeout + 5 s), saying
  so. Every other gloo unit sets its own (short) collective timeout, so the default was
  never exercised (gloo.py's ``collective_timeout: float = 10.0``). Costs about 25 s.
- (fault) a device page of a resident node overwritten (wt-1r, after the first insert):
  the self-check must name the device pool's page. The conformance's byte verdicts come
  from that self-check, and until now only host and store pages were ever corrupted on
  purpose, so a self-check that skipped device copies (observe.py's ``dev ==
  "resident"`` read as ``dev > "resident"``) passed every unit.
- (fault) a host slot freed under the node that owns it (wt-1r, request 0 written to the
  host): the self-check must report that slot as owned but free (a use after free), and
  not also as a leak (observe.py's ``allocated - seen`` read as ``allocated ^ seen``
  names it both ways).
- (fault) verdict_faults' stall beside a long failure with the ranks' roles swapped: rank
  0 stopped, rank 1 failing at once. The driver polls the ranks in turn; one that kept
  polling the first pending rank (gloo.py's ``pending.pop(0)`` read as ``pop(-1)``) never
  sees rank 1's failure and reports a plain timeout at its deadline.
- a duplicate reclaim that frees more than it needs with another duplicate left
  (wb-reclaim-1r: a two-page duplicate reclaimed for a one-page write-back while a
  one-page duplicate stays): the reclaim stops once it freed enough, not only once it
  freed exactly enough (eviction.py's ``freed >= need`` read as ``freed is need`` went on
  to the next duplicate). Every unit before freed exactly what it needed.
- an insert that evicts two pages of two tokens for itself (wt-evicts-1r with two-token
  pages): insert asks evict() for the missing pages in tokens (pages x page size); the
  units before evicted one page at a time or had one-token pages, where pages x 2 and
  pages / 2 ask for the same single page.
- a three-page prefetch retired after its first page was inserted meanwhile
  (wt-prefetch-1r: (1, 2, 3) stored and pushed out by (5, 6, 7), prefetched, (1,)
  inserted while the read runs): the prefetched counter counts the two pages the tree
  gains (completed - have); before, every retired prefetch had have = 0 or two pages,
  where ``completed >> have`` gives the same count.
- a mirror-release plan covered by its first candidate, two pages for a one-page deficit,
  with another candidate left (wt-mirror-1r): the plan stops once it covers the deficit
  (storage_path.py's ``pages >= want`` read as ``pages == want`` went on past it); every
  plan before covered its deficit exactly.
- an insert short of CP lane 1 only, two lanes over four device pages (cp-planner-lanes-2r:
  (1, 2) and (1, 5) fill lane 1 while lane 0 keeps a free page, then (1, 6) needs lane 1):
  the spec refuses it; each lane holds device_pages // cp_lanes pages, the first
  device_pages % cp_lanes one more (cp_load.py's ``lane < r`` read as ``lane is not r``
  gave lane 1 a third page here). The units before had lane shortfalls only where the
  two readings agree (three device pages over two lanes) or on lane 0.
"""

from __future__ import annotations

import os
import signal
import time

from tiercheck.models import model_file
from tiercheck.spec.state import HOST_RESIDENT, live_nodes, node_len
from tiercheck.spec.state import RESIDENT as DEV_RESIDENT
from tiercheck.spec.storage_path import release_candidates
from tiercheck.spec.write_path import insert_device_need

from . import verdict_faults
from .reference import ReferenceDriver, impl_config
from .situations import Situation, _lane_short, _lane_short_insert

DEFAULT_COLLECTIVE_TIMEOUT = 10.0  # GlooHiCache's documented default (its docstring)


def _second_victim_folded(m, s, a, t) -> bool:
    return any(len(rt.digest) >= 2 and len(rt.digest) > len(rs.digest) for rs, rt in zip(s.ranks, t.ranks))


def _duplicates(rs) -> list:
    return [e for e in live_nodes(rs) if rs.nodes[e].dev == DEV_RESIDENT and rs.nodes[e].host == HOST_RESIDENT]


def _reclaimed_past_need(m, s, a, t) -> bool:
    """One step reclaims one duplicate of two or more pages (its device copy stays) and
    leaves another duplicate."""
    b, c = s.ranks[0], t.ranks[0]
    gone = [e for e in _duplicates(b) if e not in _duplicates(c) and e in live_nodes(c)
            and c.nodes[e].dev == DEV_RESIDENT]
    return len(gone) == 1 and node_len(m.pages, b, gone[0]) >= 2 and bool(_duplicates(c))


def _insert_evicted_two_pages(m, s, a, t) -> bool:
    """An insert two or more pages short of device room that evicts and goes through."""
    if a.name != "insert":
        return False
    b, c = s.ranks[0], t.ranks[0]
    short = insert_device_need(m, b, a["req"]) - b.dev_free
    cached = all(c.owner[p] >= 0 and c.nodes[c.owner[p]].dev == DEV_RESIDENT for p in m.pages.request_pages[a["req"]])
    return short >= 2 and cached


def _prefetch_retired_over_an_insert(m, s, a, t) -> bool:
    """check_prefetch_progress retires a whole prefetch whose first page (or more) the
    tree gained meanwhile, two or more pages still new."""
    if a.name != "check_prefetch_progress":
        return False
    rs, rt = s.ranks[0], t.ranks[0]
    if len(rt.pq) >= len(rs.pq):
        return False
    req, _anchor, k, n = rs.pq[a["op"]]
    pages = m.pages.request_pages[req][k:k + n]
    have = next((i for i, p in enumerate(pages) if rs.owner[p] < 0), len(pages))
    return have >= 1 and n - have >= 2 and all(rt.owner[p] >= 0 for p in pages)


def _plan_past_its_deficit(m, s, a, t) -> bool:
    """A drain round prepares a one-entry plan of two or more pages while another
    release candidate stays out of it."""
    rt = t.ranks[0]
    if a.name != "drain_storage_control_queues" or len(rt.plan) != 1 or s.ranks[0].plan == rt.plan:
        return False
    return node_len(m.pages, rt, rt.plan[0]) >= 2 and any(e != rt.plan[0] for e in release_candidates(m, rt))


SITUATIONS = (
    Situation("two duplicate-reclaim victims folded before a round", "wb-reclaim-2r", (), _second_victim_folded,
              overrides=(("requests", ((1,), (2,), (3, 4))), ("device_pages", 4), ("faults", frozenset()))),
    Situation("a two-page duplicate reclaimed for a one-page need, another left", "wb-reclaim-1r", (),
              _reclaimed_past_need, overrides=(("requests", ((1, 2), (3,), (4,))), ("device_pages", 4), ("host_pages", 3))),
    Situation("an insert evicting two two-token pages for itself", "wt-evicts-1r", (), _insert_evicted_two_pages,
              overrides=(("page_size", 2), ("requests", ((1, 2), (3, 4), (5, 6, 7, 8))), ("device_pages", 2))),
    Situation("a three-page prefetch retired over a page inserted meanwhile", "wt-prefetch-1r", (),
              _prefetch_retired_over_an_insert,
              overrides=(("requests", ((1, 2, 3), (1,), (5, 6, 7))), ("device_pages", 3), ("host_pages", 3),
                         ("faults", frozenset()))),
    Situation("a mirror-release plan of two pages for a one-page deficit, another candidate left", "wt-mirror-1r", (),
              _plan_past_its_deficit, overrides=(("requests", ((1, 2), (3,))), ("device_pages", 3), ("host_pages", 3),
                                                 ("host_free_target", 1), ("faults", frozenset()))),
    Situation("an insert short of CP lane 1 only, two lanes over four pages", "cp-planner-lanes-2r", (),
              _lane_short_insert, _lane_short,
              overrides=(("requests", ((1, 2), (1, 5), (1, 6))), ("device_pages", 4))),
)


def stall_under_default_timeouts() -> str:
    """wt-2r on gloo with every timeout left at its default; rank 1 SIGSTOPped before a
    writing_check round. Rank 0 waits the default collective timeout in the round and
    fails; the driver waits the grace for rank 1 and names it stalled."""
    from tiercheck.impl.hicache.errors import RemoteRankError
    from tiercheck.impl.hicache.gloo import GlooHiCache

    cfg = model_file.load("wt-2r").config
    group = GlooHiCache(impl_config(cfg), cfg.ranks)
    try:
        group.writing_check()  # the ranks are up and answer
        os.kill(group._procs[1].pid, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            group.writing_check()
            return "writing_check returned with rank 1 stopped"
        except RemoteRankError as exc:
            msg, waited = str(exc), time.monotonic() - t0
    finally:
        group.close()
    grace = DEFAULT_COLLECTIVE_TIMEOUT + 5.0
    if f"stalled in writing_check: no answer {grace:g}s after rank 0 failed" not in msg:
        return f"the stall report does not give the default grace ({grace:g}s): {msg[:200]}"
    if waited < DEFAULT_COLLECTIVE_TIMEOUT + grace:  # a timeout may fire late under load, never early
        return f"rank 1 named stalled after {waited:.1f}s, before the default timeout and grace ({DEFAULT_COLLECTIVE_TIMEOUT + grace:g}s)"
    alive = [p.name for p in group._procs if p.is_alive()]
    return f"rank processes {alive} still alive after close()" if alive else ""


def device_page_corrupted() -> str:
    """wt-1r: request 0 inserted (device resident), its first device page overwritten:
    the self-check must name the device pool's page."""
    cfg = model_file.load("wt-1r").config
    driver = ReferenceDriver(cfg)
    try:
        driver.group.insert(list(cfg.requests[0]))
        before = driver.group.verify()
        if before:
            return f"before the fault: {before}"
        rank = driver.group.ranks[0]
        node = next(n for n in rank.tree.nodes() if n.dev == "resident")
        rank.device_pool.page(node.dev_slots[0]).fill_(7.25)
        problems = driver.group.verify()
    finally:
        driver.close()
    named = [p for p in problems if "wrong bytes in the device pool: page" in p]
    return "" if named else f"a device page overwritten under a resident node is not reported: {problems}"


def host_slot_freed_under_its_owner() -> str:
    """wt-1r: request 0 inserted and written to the host, the node's first host slot
    freed in the pool behind the node's back: the self-check names it once, as a use
    after free."""
    cfg = model_file.load("wt-1r").config
    driver = ReferenceDriver(cfg)
    try:
        driver.group.insert(list(cfg.requests[0]))
        driver.group.write_dma_done(0)
        driver.group.writing_check()
        rank = driver.group.ranks[0]
        node = next((n for n in rank.tree.nodes() if n.host == "resident"), None)
        if node is None or driver.group.verify():
            return f"before the fault: no host copy, or {driver.group.verify()}"
        slot = node.host_slots[0]
        rank.host_pool.free([slot])
        problems = driver.group.verify()
    finally:
        driver.close()
    free_owned = [p for p in problems if "owned but free (use after free)" in p]
    leaks = [p for p in problems if "(leak)" in p]
    if not free_owned or leaks:
        return f"a host slot freed under its owner is not reported as a use after free (only): {problems}"
    return ""


def scenarios():
    return [("a stopped peer under the default timeouts", stall_under_default_timeouts),
            ("a device page overwritten under a resident node", device_page_corrupted),
            ("a host slot freed under its owner", host_slot_freed_under_its_owner),
            ("a stopped rank 0 beside a failed rank 1", lambda: verdict_faults.stall_beside_a_long_failure(stopped=0))]

