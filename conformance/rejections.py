"""What a rank's write-rejection counters must have counted in one step, from the spec.

``hicache_write_rejected_tokens_total{reason, stage}`` counts the tokens of host writes the
ranks did not start: a write-through staging (an insert's hit), a write-back eviction's
write, or a storage prefetch's host reservation whose agreed host allocation failed
(``host_alloc_failed``), or a staging the replicas disagree on (``rank_disagreement``).
None of it is spec state, but each is a function of the spec's step: the nodes the step
wants written on each rank (``insert_on_rank``; the eviction victim; the prefetch's missing
pages) and whether the spec's successor has them written. So the refinement mapping
extends to these counters too (tiercheck.conformance.counters checks them).

One stage is not determined by the states around a step: the write-back evictions an
insert or a load-back runs by itself (insert_evicts, load_back_evicts), each of which may
fail its write; that counter is left unchecked there (``unchecked``).
"""

from __future__ import annotations

from collections import Counter

from tiercheck.impl.hicache.metrics import rejected
from tiercheck.spec.prefetch import _anchor as prefetch_anchor
from tiercheck.spec.state import ABSENT, HOST_RESIDENT, is_device_leaf, node_len
from tiercheck.spec.write_path import _fits as insert_fits
from tiercheck.spec.write_path import _make_room as insert_make_room
from tiercheck.spec.write_path import insert_on_rank

HOST_ALLOC_FAILED, RANK_DISAGREEMENT = "host_alloc_failed", "rank_disagreement"
WRITE_THROUGH, WRITE_BACK, STORAGE_PREFETCH = "write_through", "write_back", "storage_prefetch"


def unchecked(model, action) -> frozenset:
    """The rejection counters a step of ``action`` may move in a way its states do not show."""
    cfg = model.cfg
    own = (action.name == "insert" and cfg.insert_evicts) or (action.name == "load_back" and cfg.load_back_evicts)
    if own and cfg.write_back:
        return frozenset({rejected(HOST_ALLOC_FAILED, WRITE_BACK)})
    return frozenset()


_NOT_GIVEN = object()


def rejections(model, before, action, after=_NOT_GIVEN) -> list:
    """Per rank, counter name -> the tokens the spec's step ``action`` from ``before``
    rejects (nothing for a step the spec disables: the implementation must not move).
    ``after``: the spec's successor (None: disabled) when the caller has it already."""
    if after is _NOT_GIVEN:
        after = model.next_state(before, action)
    out = [Counter() for _ in before.ranks]
    if after is None:
        return out
    if action.name == "insert" and not model.cfg.write_back:
        _insert(model, before, after, action, out)
    elif action.name == "evict" and model.cfg.write_back:
        _evict(model, before, after, action, out)
    elif action.name == "prefetch_from_storage" and not model.cfg.prefetch_at_hit:
        _prefetch(model, before, after, action, out)
    ps = model.cfg.page_size
    return [Counter({k: v * ps for k, v in c.items()}) for c in out]


def _written(rs, end) -> bool:
    n = rs.nodes[end] if end < len(rs.nodes) else None
    return n is not None and n.host != ABSENT


def _insert(model, before, after, action, out) -> None:
    """write_backup of the nodes the insert's hits want staged, in the same order on every
    rank: where the ranks want different nodes (or one has none) nobody stages and each
    that wanted one rejects it; else a node left unwritten failed its host allocation."""
    ranks = before.ranks
    if model.cfg.insert_evicts and not insert_fits(model, ranks, action["req"]):
        ranks = insert_make_room(model, before, action)
        if not insert_fits(model, ranks, action["req"]):
            return  # it evicted and still lacks room: the request waits, nothing staged
    walked = [insert_on_rank(model, rs, action["req"]) for rs in ranks]
    wanted = [w for _rs, w in walked]
    agree = not model.cfg.has("partial-backup-leak")  # the bug: no agreement, each rank on its own
    for i in range(max(len(w) for w in wanted)):
        ends = [w[i] if i < len(w) else None for w in wanted]
        end = next(e for e in ends if e is not None)
        reason = RANK_DISAGREEMENT if agree and any(e != end for e in ends) else HOST_ALLOC_FAILED
        for r, (e, (rs, _w)) in enumerate(zip(ends, walked)):
            if e is not None and not _written(after.ranks[r], e):
                out[r][rejected(reason, WRITE_THROUGH)] += node_len(model.pages, rs, e)


def _evict(model, before, after, action, out) -> None:
    """write_back: the victim's write (when some rank's copy lacks a host copy) gets agreed
    host room or is rejected on every rank, by the first such rank's size (each rank on
    its own under partial-backup-leak)."""
    e = action["node"]
    needs = [rs.nodes[e] is not None and is_device_leaf(model.pages, rs, e) and rs.nodes[e].host == ABSENT
             for rs in before.ranks]
    if not any(needs):
        return
    ok = [_ok(after.ranks[r], e) for r in range(len(needs))]
    if model.cfg.has("partial-backup-leak"):
        for r, rs in enumerate(before.ranks):
            if needs[r] and not ok[r]:
                out[r][rejected(HOST_ALLOC_FAILED, WRITE_BACK)] += node_len(model.pages, rs, e)
        return
    holder = needs.index(True)
    if not ok[holder]:
        need = node_len(model.pages, before.ranks[holder], e)
        for c in out:
            c[rejected(HOST_ALLOC_FAILED, WRITE_BACK)] += need


def _ok(rs, e) -> bool:
    n = rs.nodes[e] if e < len(rs.nodes) else None
    return n is not None and n.host == HOST_RESIDENT


def _prefetch(model, before, after, action, out) -> None:
    """The prefetch's host reservation for the request's missing pages: a rank that
    started no prefetch had its allocation fail."""
    k, _anchor = prefetch_anchor(model, before.ranks[0], action["req"])
    n = len(model.pages.request_pages[action["req"]]) - k
    for r, (b, a) in enumerate(zip(before.ranks, after.ranks)):
        if len(a.pq) == len(b.pq):
            out[r][rejected(HOST_ALLOC_FAILED, STORAGE_PREFETCH)] += n
