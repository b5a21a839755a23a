"""Counting through a step's own eviction (make_room), over the page sort.

proofs.epr_sched_evict.make_room takes, on one rank, in the order its encoding builds
them: the reclaimed duplicates ``rec`` (host copies dropped), the device victims ``vic``
(the staged ones ``writes`` given a host copy, the others demoted or deleted), and the
set ``gone`` that leaves the tree (the deleted victims, their host-only subtrees, the
LRU host victims). The spec's counters move where its code does (spec/eviction.py
_demote, _delete; spec/host_eviction.py): dev_free by each victim's pages, host_free up
by the reclaimed and the removed host copies and down by the staged ones. So make_room's
counters are stated here, and tied to the held sets by the balance instances of
proofs.epr_counting (``balance``), one per part of make_room whose freed and taken sets
are disjoint (a reclaimed victim may be staged again, and a staged one may leave with
the LRU victims, so one instance over the whole of make_room would be wrong):

- the device pool, across make_room: freed, the victims' pages;
- the host pool, up to the victims (``v2``): freed, the reclaimed nodes' pages; taken,
  the staged victims' pages (the spec's allocation's amount: ``peer_amount``);
- the host pool, across the removal: freed, the pages of the nodes that go with a host
  copy. Under orphan-host-subtree the subtree below a deleted victim leaves the tree
  with its host slots kept (spec/eviction.py _delete): those pages leave the held set
  with a credit of 0, so the counter is off by their number and slot_conservation fails
  (the variant's bug, found with a concrete forest).

The host allocations succeeded only where they fit (allocate_host's ok): each leaves
host_free >= 0 and what follows only frees, so host_free >= 0 after make_room. The
request locks are not touched (the hold's lock is taken and dropped, the victims and
what goes are unlocked: lock 0, and a node's count is over the live nodes at or below
it, which a removal of unlocked nodes cannot change). The insert after make_room is
counted from the view it leaves (epr_actions.effect: ``count_base``), its ledger
entries only where the request fits (count.branch), its guard only there too.
"""

from __future__ import annotations

from typing import Callable

import z3

from ..spec.state import ABSENT
from . import epr_counting as count
from .paged import Paged


def room(u, v: Paged, out: Paged, v1: Paged, v2: Paged, rec: Callable, vic: Callable, writes: Callable,
         gone: Callable, kept: Callable) -> Paged:
    """``out`` (the view after make_room and its slot step) with its counters: ``v``
    before make_room, ``v1`` after the reclaim, ``v2`` after the victims, ``kept(x)``: a
    node that goes with its host slots not given back (orphan-host-subtree; else never)."""
    pages = count.node_pages
    n_vic = count.size(u, pages(v1, vic), "room_victims")
    n_rec = count.size(u, pages(v, rec), "room_reclaimed")
    n_wr = count.size(u, pages(v1, writes), "room_staged")
    hosted = lambda x: z3.And(gone(x), v2.host(x) != ABSENT)
    n_gone = count.size(u, pages(v2, lambda x: z3.And(hosted(x), z3.Not(kept(x)))), "room_gone")
    wr = count.peer_amount(u, True, "room_need")(n_wr)
    Entry = count.Entry
    count._fact(
        u,
        count.balance(u, v, out, "dev_free", [Entry("dev_free", +1, pages(v1, vic), n_vic)]),
        count.balance(u, v, v2, "host_free", [Entry("host_free", +1, pages(v, rec), n_rec),
                                              Entry("host_free", -1, pages(v1, writes), n_wr)]),
        count.balance(u, v2, out, "host_free", [
            Entry("host_free", +1, pages(v2, lambda x: z3.And(hosted(x), z3.Not(kept(x)))), n_gone),
            Entry("host_free", +1, pages(v2, lambda x: z3.And(hosted(x), kept(x))), z3.IntVal(0))]))
    out = out.update(dev_free=v.dev_free + n_vic, host_free=v.host_free + n_rec - wr + n_gone)
    count._fact(u, out.host_free >= 0)  # every allocation fit; the rest frees
    return out
