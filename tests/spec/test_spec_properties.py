"""Every property on hand-built states: one that satisfies it, one that violates it."""

from __future__ import annotations

from spec_helpers import model, node, page, run

from tiercheck.spec.action import act
from tiercheck.spec.properties import (
    counter_sanity,
    durable_only_when_acked,
    eviction_obligations,
    host_channel_obligations,
    locked_never_evicted,
    no_collective_hang,
    no_ghost,
    no_use_after_free,
    rank_agreement,
    release_safety,
    slot_conservation,
)
from tiercheck.spec.state import ABSENT, HOST_RESIDENT, LOADING, WRITING
from tiercheck.spec.tree import set_node


def _with_node(s, m, tokens, rank=0, **fields):
    e = page(m, *tokens)
    ranks = list(s.ranks)
    rs = ranks[rank]
    ranks[rank] = set_node(rs, e, rs.nodes[e]._replace(**fields))
    return s._replace(ranks=tuple(ranks))


def _with_rank(s, rank=0, **fields):
    ranks = list(s.ranks)
    ranks[rank] = ranks[rank]._replace(**fields)
    return s._replace(ranks=tuple(ranks))


def _staged(m):
    return run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))


def test_no_ghost():
    m = model()
    s = _staged(m)
    assert no_ghost(m, s) is None
    assert "no usable copy" in no_ghost(m, _with_node(s, m, (1, 2), dev=ABSENT, host=ABSENT))
    assert "no usable copy" in no_ghost(m, _with_node(s, m, (1, 2), dev=LOADING, host=ABSENT))


def test_no_use_after_free_covers_each_kind_of_copy():
    m = model(storage=True)
    s = run(m, ("insert", {"req": 0}))  # D->H in flight
    assert no_use_after_free(m, s) is None
    assert "D->H" in no_use_after_free(m, _with_node(s, m, (1, 2), host=ABSENT))
    s = _staged(m)  # H->L3 in flight
    assert "H->L3" in no_use_after_free(m, _with_node(s, m, (1, 2), host=ABSENT))
    s = run(m, ("evict", {"node": page(m, 1, 2)}), ("load_back", {"node": page(m, 1, 2)}),
            state=run(m, ("storage_backup_done", {"rank": 0, "pages": 2}), ("drain_storage_control_queues", {}), state=s))
    assert no_use_after_free(m, s) is None
    assert "H->D" in no_use_after_free(m, _with_node(s, m, (1, 2), host=ABSENT))
    assert no_use_after_free(m, run(m, ("load_dma_done", {"rank": 0}), state=s)) is None


def test_slot_conservation_catches_leaks_and_double_frees():
    m = model()
    s = _staged(m)
    assert slot_conservation(m, s) is None
    assert "host free" in slot_conservation(m, _with_rank(s, host_free=1))  # double free
    assert "device free" in slot_conservation(m, _with_rank(s, dev_free=0))  # leak
    assert "host free" in slot_conservation(m, _with_rank(s, relq=(1,)))  # queued and free


def test_durable_only_when_acked_compares_with_what_the_store_really_took():
    m = model(storage=True, mirror_release=True, faults={"partial_storage"})
    s = run(m, ("storage_backup_done", {"rank": 0, "pages": 1}), state=_staged(m))
    a = act("drain_storage_control_queues")
    t = m.next_state(s, a)
    assert durable_only_when_acked(m, s, a, t) is None
    forged = _with_rank(t, durable=t.ranks[0].durable | 1 << page(m, 1, 2))
    assert "no storage write stored it" in durable_only_when_acked(m, s, a, forged)
    # A durable mark appearing outside a drain is never acked.
    assert durable_only_when_acked(m, s, act("insert", req=1), _with_rank(s, durable=1)) is not None


def test_release_safety_judges_each_dropped_mirror():
    m = model(storage=True, mirror_release=True)
    s = run(m, ("storage_backup_done", {"rank": 0, "pages": 2}), ("drain_storage_control_queues", {}), state=_staged(m))
    a = act("drain_storage_control_queues")
    t = m.next_state(s, a)
    assert node(m, t, 1, 2).host == ABSENT and release_safety(m, s, a, t) is None
    assert "locked" in release_safety(m, s, a, _with_node(t, m, (1, 2), lock=1))
    assert "host-referenced" in release_safety(m, s, a, _with_node(t, m, (1, 2), href=1))
    # durable before the step or after it (a bounded LRU may evict the mark in the step)
    assert release_safety(m, s, a, _with_rank(t, durable=0)) is None
    assert "not every page durable" in release_safety(m, _with_rank(s, durable=0), a, _with_rank(t, durable=0))


def test_release_safety_judges_a_prefetch_anchor_as_the_reclaim_saw_it():
    """The unbounded proofs' finding (models/library/wb-reclaim-prefetch-1r): the prefetch
    protects its anchor 1/2 before its fallback evict_host, so the second reclaim pass
    takes the device leaf 1/2/3; the allocation fails and 1/2 is released again."""
    m = model(requests=((1, 2, 3), (1, 2, 7, 8)), device_pages=4, host_pages=3, policy="write_back",
              storage=True, prefetch=True, duplicate_reclaim=True)
    drain = ("drain_storage_control_queues", {})
    s = run(m, ("insert", {"req": 0}), ("evict", {"node": page(m, 1, 2, 3)}), ("insert", {"req": 1}),
            ("storage_backup_done", {"rank": 0, "pages": 3}), drain, ("evict", {"node": page(m, 1, 2, 7, 8)}),
            ("storage_backup_done", {"rank": 0, "pages": 2}), drain, ("evict", {"node": page(m, 1, 2)}),
            ("insert", {"req": 0}), ("evict", {"node": page(m, 1, 2, 3)}), ("insert", {"req": 0}),
            ("storage_backup_done", {"rank": 0, "pages": 2}), ("storage_backup_done", {"rank": 0, "pages": 1}),
            drain)
    a = act("prefetch_from_storage", req=1)
    t = m.next_state(s, a)
    assert node(m, t, 1, 2, 3).host == ABSENT and not t.ranks[0].pq  # reclaimed, allocation failed
    assert node(m, t, 1, 2).href == 0 and node(m, t, 1, 2).host == HOST_RESIDENT
    assert release_safety(m, s, a, t) is None
    # The same drop by a step that holds no reference on 1/2: the first pass should have taken it.
    assert "while 1/2 was reclaimable" in release_safety(m, s, act("evict", node=page(m, 1, 2, 3)), t)


def test_rank_agreement_excuses_only_a_divergence_the_next_check_catches():
    m = model(ranks=2)
    s = _staged(model(ranks=1))  # build on one rank, then duplicate
    s2 = s._replace(ranks=s.ranks * 2, store=s.store * 2)
    m2 = model(ranks=2)
    assert rank_agreement(m2, s2) is None
    diverged = _with_node(s2, m2, (1, 2), rank=1, lock=1)
    assert "differs" in rank_agreement(m2, diverged)
    assert rank_agreement(m2, diverged._replace(halted="x")) is None
    wb = model(ranks=2, policy="write_back", duplicate_reclaim=True)
    pending = _with_rank(diverged, rank=0, digest=(page(m, 1),))
    assert rank_agreement(wb, pending) is None  # the digests differ: the next round halts
    unchecked = model(ranks=2, policy="write_back", duplicate_reclaim=True, variants={"digest-unchecked"})
    assert "differs" in rank_agreement(unchecked, pending)


def test_counter_sanity_and_locked_never_evicted():
    m = model()
    s = run(m, ("insert", {"req": 0}))
    assert counter_sanity(m, s) is None
    assert "lock_ref -1" in counter_sanity(m, _with_node(s, m, (1, 2), lock=-1))
    evicted = _with_node(s, m, (1, 2), dev=ABSENT)
    assert "while lock_ref=1" in locked_never_evicted(m, s, act("evict", node=page(m, 1, 2)), evicted)
    assert locked_never_evicted(m, s, act("insert", req=0), s) is None


def test_no_collective_hang():
    m = model(ranks=2)
    s = m.init_states()[0]
    assert no_collective_hang(m, s) is None
    assert "writing_check" in no_collective_hang(m, s._replace(hung="writing_check"))


def test_progress_obligations():
    m = model(storage=True, mirror_release=True)
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 1}), ("write_dma_done", {"rank": 0}), ("writing_check", {}),
            ("storage_backup_done", {"rank": 0, "pages": 2}))
    assert host_channel_obligations(m, s) == ()  # mirrors still referenced by the backup
    s = run(m, ("drain_storage_control_queues", {}), state=s)
    assert host_channel_obligations(m, s) == (page(m, 1, 3),)
    assert eviction_obligations(m, s) == ("evict",)
    assert eviction_obligations(m, m.init_states()[0]) == ()


# --- duplicate reclaim and split inheritance (seed 001) --------------------------------


def test_reclaim_spares_evictable_leaves_in_the_first_pass():
    m = model(requests=((1,), (1, 2), (1, 2, 3)), policy="write_back", duplicate_reclaim=True, host_pages=2)
    s = run(m, ("insert", {"req": 1}), ("evict", {"node": page(m, 1, 2)}), ("insert", {"req": 0}), ("insert", {"req": 2}))
    # 1 and 1/2 are duplicates (device + host); 1/2/3 is a non-backed device leaf.
    assert node(m, s, 1).host == HOST_RESIDENT and node(m, s, 1, 2).host == HOST_RESIDENT
    s = run(m, ("evict", {"node": page(m, 1, 2, 3)}), state=s)
    # The host pool was full: reclaim took a registered duplicate, not an evictable leaf.
    assert node(m, s, 1, 2, 3).host == HOST_RESIDENT
    assert [node(m, s, 1).host, node(m, s, 1, 2).host].count(ABSENT) == 1


def test_split_passes_the_backup_reference_and_the_pending_mark_to_the_new_half():
    m = model(policy="write_back", storage=True, duplicate_reclaim=True)
    s = run(m, ("insert", {"req": 0}), ("evict", {"node": page(m, 1, 2)}), ("insert", {"req": 1}))
    assert node(m, s, 1).href == 1 and node(m, s, 1, 2).href == 1  # both read by the H->L3 copy
    bad = model(policy="write_back", storage=True, duplicate_reclaim=True, variants={"split-during-backup"})
    s = run(bad, ("insert", {"req": 0}), ("evict", {"node": page(m, 1, 2)}), ("insert", {"req": 1}))
    assert node(bad, s, 1).href == 0
    m = model(policy="write_back", duplicate_reclaim=True)
    s = run(m, ("insert", {"req": 0}), ("evict", {"node": page(m, 1, 2)}), ("load_back", {"node": page(m, 1, 2)}),
            ("insert", {"req": 1}))
    assert node(m, s, 1).lbp and node(m, s, 1, 2).lbp
    assert node(m, s, 1).dev == LOADING


def test_prefetch_guard_needs_the_next_page_in_storage():
    m = model(storage=True, prefetch=True)
    assert not any(a.name == "prefetch_from_storage" for a in m.actions(m.init_states()[0]))


def test_write_writing_state_is_not_backed_up_for_hit_count():
    m = model(host_pages=4)
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 0}))
    assert node(m, s, 1, 2).host == WRITING and len(s.ranks[0].wq) == 1  # no second write
