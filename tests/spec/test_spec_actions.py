"""Guard and effect of every spec action, on small hand-driven states."""

from __future__ import annotations

from spec_helpers import model, node, page, run

from tiercheck.spec.action import act
from tiercheck.spec.state import ABSENT, HOST_RESIDENT, LOADING, RESIDENT, WRITING


def test_pages_are_numbered_in_lexicographic_path_order():
    m = model(requests=((2, 1), (1, 3), (1, 2)))
    assert m.pages.paths == ((1,), (1, 2), (1, 3), (2,), (2, 1))
    assert m.pages.parent == (-1, 0, 0, -1, 3)
    assert m.pages.chain(0, 2) == (0, 2)


# --- insert --------------------------------------------------------------------------


def test_insert_adds_a_device_leaf_and_stages_it_under_write_through():
    m = model()
    s = run(m, ("insert", {"req": 0}))
    n = node(m, s, 1, 2)
    assert (n.dev, n.host, n.lock, n.hits) == (RESIDENT, WRITING, 1, 1)
    rs = s.ranks[0]
    assert (rs.dev_free, rs.host_free) == (1, 0)
    assert rs.wq == ((page(m, 1), page(m, 1, 2)),)


def test_insert_splits_at_the_divergence_page_and_both_halves_keep_the_write_lock():
    m = model(device_pages=4, host_pages=4)
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 1}))
    upper, lower, new = node(m, s, 1), node(m, s, 1, 2), node(m, s, 1, 3)
    assert upper.start == page(m, 1) and lower.start == page(m, 1, 2)
    assert upper.lock == lower.lock == 1  # the in-flight write covers both halves
    assert new.host == WRITING  # enough host room: the new leaf is staged too
    assert s.ranks[0].owner[page(m, 1)] == page(m, 1)


def test_insert_guard_needs_device_room_on_every_rank():
    m = model(device_pages=1)
    s = m.init_states()[0]
    assert act("insert", req=0) not in m.actions(s)


def test_selective_policy_stages_on_the_second_hit_only():
    m = model(policy="write_through_selective", host_pages=4)
    s = run(m, ("insert", {"req": 0}))
    assert node(m, s, 1, 2).host == ABSENT and node(m, s, 1, 2).hits == 1
    s = run(m, ("insert", {"req": 0}), state=s)
    assert node(m, s, 1, 2).host == WRITING and node(m, s, 1, 2).hits == 2


def test_write_back_never_stages_on_insert():
    m = model(policy="write_back")
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 0}))
    assert node(m, s, 1, 2).host == ABSENT and node(m, s, 1, 2).hits == 0


def test_host_alloc_failure_rejects_the_write_when_nothing_can_be_evicted():
    m = model(host_pages=1)
    s = run(m, ("insert", {"req": 0}))
    n = node(m, s, 1, 2)
    assert n.host == ABSENT and n.lock == 0 and s.ranks[0].host_free == 1


def test_insert_un_evicts_a_demoted_node():
    m = model(policy="write_back", host_pages=2)
    s = run(m, ("insert", {"req": 0}), ("evict", {"node": page(m, 1, 2)}))
    assert node(m, s, 1, 2).dev == ABSENT
    s = run(m, ("insert", {"req": 0}), state=s)
    assert node(m, s, 1, 2).dev == RESIDENT and node(m, s, 1, 2).host == HOST_RESIDENT


# --- D->H copies and writing_check -----------------------------------------------------


def test_writing_check_commits_the_min_finished_count_across_ranks():
    m = model(ranks=2)
    assert act("writing_check") not in m.actions(m.init_states()[0])  # nothing ongoing
    s = run(m, ("insert", {"req": 0}))
    assert m.next_state(s, act("writing_check")) == s  # nothing finished: MIN 0, no change
    s = run(m, ("write_dma_done", {"rank": 0}), state=s)
    assert m.next_state(s, act("writing_check")) == s  # rank 1 has not finished
    s = run(m, ("write_dma_done", {"rank": 1}), ("writing_check", {}), state=s)
    for r in (0, 1):
        n = node(m, s, 1, 2, rank=r)
        assert (n.host, n.lock) == (HOST_RESIDENT, 0)
        assert s.ranks[r].wq == () and s.ranks[r].wdone == 0


def test_write_dma_done_guard_stops_at_the_queue_length():
    m = model()
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}))
    assert act("write_dma_done", rank=0) not in m.actions(s)


def test_writing_check_starts_the_storage_backup_with_a_host_reference():
    m = model(storage=True)
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
    assert node(m, s, 1, 2).href == 1
    assert s.ranks[0].sq == ((page(m, 1), page(m, 1, 2)),)


def test_early_return_variant_hangs_the_rank_that_entered_the_collective():
    m = model(ranks=2, variants={"early-return-collective"})
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
    assert s.hung == "writing_check" and m.actions(s) == []


# --- evict ----------------------------------------------------------------------------


def _staged(m):
    return run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))


def test_evict_demotes_a_backed_up_leaf():
    m = model()
    s = run(m, ("evict", {"node": page(m, 1, 2)}), state=_staged(m))
    n = node(m, s, 1, 2)
    assert (n.dev, n.host) == (ABSENT, HOST_RESIDENT) and s.ranks[0].dev_free == 3


def test_evict_is_not_offered_for_a_locked_node():
    m = model()
    s = run(m, ("insert", {"req": 0}))  # write lock held until writing_check
    assert not any(a.name == "evict" for a in m.actions(s))


def test_evict_deletes_a_non_backed_leaf_under_write_through_and_prunes_host_only_children():
    m = model(requests=((1, 2), (1, 2, 3)), host_pages=1)
    # 1/2 is not backed (host too small for two pages); 1/2/3 is backed, then demoted.
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 1}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
    assert node(m, s, 1, 2).host == ABSENT and node(m, s, 1, 2, 3).host == HOST_RESIDENT
    s = run(m, ("evict", {"node": page(m, 1, 2, 3)}), ("evict", {"node": page(m, 1, 2)}), state=s)
    rs = s.ranks[0]
    assert all(n is None for n in rs.nodes)
    assert (rs.dev_free, rs.host_free) == (3, 1)


def test_orphan_variant_leaks_the_host_slots_of_the_detached_subtree():
    m = model(requests=((1, 2), (1, 2, 3)), host_pages=1, variants={"orphan-host-subtree"})
    s = run(m, ("insert", {"req": 0}), ("insert", {"req": 1}), ("write_dma_done", {"rank": 0}), ("writing_check", {}),
            ("evict", {"node": page(m, 1, 2, 3)}), ("evict", {"node": page(m, 1, 2)}))
    assert s.ranks[0].host_free == 0 and all(n is None for n in s.ranks[0].nodes)


def test_write_back_eviction_stages_then_demotes():
    m = model(policy="write_back", storage=True)
    s = run(m, ("insert", {"req": 0}), ("evict", {"node": page(m, 1, 2)}))
    n = node(m, s, 1, 2)
    assert (n.dev, n.host, n.href) == (ABSENT, HOST_RESIDENT, 1)
    assert s.ranks[0].sq == ((page(m, 1), page(m, 1, 2)),)


# --- load_back / loading_check ------------------------------------------------------------


def test_load_back_marks_loading_locks_the_path_and_loading_check_finishes_it():
    m = model()
    s = run(m, ("evict", {"node": page(m, 1, 2)}), ("load_back", {"node": page(m, 1, 2)}), state=_staged(m))
    n = node(m, s, 1, 2)
    assert (n.dev, n.lbp, n.lock) == (LOADING, True, 1)
    assert s.ranks[0].lq == ((page(m, 1), page(m, 1, 2)),)
    assert m.next_state(s, act("loading_check")) == s  # the copy has not finished
    s = run(m, ("load_dma_done", {"rank": 0}), ("loading_check", {}), state=s)
    n = node(m, s, 1, 2)
    assert (n.dev, n.lbp, n.lock) == (RESIDENT, False, 0) and s.ranks[0].lq == ()


def test_load_back_guard_needs_device_room():
    m = model(requests=((1, 2), (3, 4)), device_pages=2)
    s = run(m, ("evict", {"node": page(m, 1, 2)}), ("insert", {"req": 1}), state=_staged(m))
    assert act("load_back", node=page(m, 1, 2)) not in m.actions(s)


# --- storage ----------------------------------------------------------------------------


def _backed_up(m, pages_stored=2):
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
    return run(m, ("storage_backup_done", {"rank": 0, "pages": pages_stored}), state=s)


def test_partial_storage_offers_every_prefix_and_stores_only_it():
    m = model(storage=True, faults={"partial_storage"})
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("writing_check", {}))
    offered = {a["pages"] for a in m.actions(s) if a.name == "storage_backup_done"}
    assert offered == {0, 1, 2}
    s = run(m, ("storage_backup_done", {"rank": 0, "pages": 1}), state=s)
    assert s.store[0] == 1 << page(m, 1)
    assert s.ranks[0].sdone[0].reported == 1


def test_drain_releases_the_host_reference_and_marks_only_the_completed_prefix_durable():
    m = model(storage=True, mirror_release=True, faults={"partial_storage"})
    s = run(m, ("drain_storage_control_queues", {}), state=_backed_up(m, 1))
    rs = s.ranks[0]
    assert node(m, s, 1, 2).href == 0
    assert rs.durable == 1 << page(m, 1)
    assert rs.sq == () and rs.sdone == ()


def test_mirror_release_prepares_under_pressure_and_commits_on_the_next_round():
    m = model(storage=True, mirror_release=True)
    s = run(m, ("drain_storage_control_queues", {}), state=_backed_up(m))
    assert s.ranks[0].plan == (page(m, 1, 2),)  # prepared, nothing released yet
    assert node(m, s, 1, 2).host == HOST_RESIDENT
    s = run(m, ("drain_storage_control_queues", {}), state=s)
    n = node(m, s, 1, 2)
    assert (n.host, n.rel, n.dev) == (ABSENT, True, RESIDENT)
    assert s.ranks[0].host_free == 2


def test_plan_mismatch_counts_and_fail_closes():
    m = model(ranks=2, requests=((1, 2),), device_pages=2, storage=True, mirror_release=True,
              faults={"partial_storage"}, fail_close_after=1)
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("write_dma_done", {"rank": 1}),
            ("writing_check", {}), ("storage_backup_done", {"rank": 0, "pages": 2}),
            ("storage_backup_done", {"rank": 1, "pages": 1}), ("drain_storage_control_queues", {}))
    assert s.ranks[0].plan != s.ranks[1].plan
    s = run(m, ("drain_storage_control_queues", {}), state=s)
    assert all(rs.closed and rs.plan == () for rs in s.ranks)
    assert all(node(m, s, 1, 2, rank=r).host == HOST_RESIDENT for r in (0, 1))


def test_release_no_consensus_variant_mutates_without_agreement():
    m = model(ranks=2, requests=((1, 2),), device_pages=2, storage=True, mirror_release=True,
              faults={"partial_storage"}, variants={"release-no-consensus"})
    s = run(m, ("insert", {"req": 0}), ("write_dma_done", {"rank": 0}), ("write_dma_done", {"rank": 1}),
            ("writing_check", {}), ("storage_backup_done", {"rank": 0, "pages": 2}),
            ("storage_backup_done", {"rank": 1, "pages": 1}), ("drain_storage_control_queues", {}))
    assert node(m, s, 1, 2, rank=0).host == ABSENT and node(m, s, 1, 2, rank=1).host == HOST_RESIDENT


def test_store_lose_needs_the_fault_and_a_held_key():
    m = model(storage=True, faults={"store_loss"})
    s = _backed_up(m)
    assert act("store_lose", rank=0, page=page(m, 1)) in m.actions(s)
    s = run(m, ("store_lose", {"rank": 0, "page": page(m, 1)}), state=s)
    assert s.store[0] == 1 << page(m, 1, 2)
    assert not any(a.name == "store_lose" for a in model(storage=True).actions(_backed_up(model(storage=True))))


# --- prefetch ---------------------------------------------------------------------------


def _evicted_to_storage(m):
    """Back 1/2 up, demote it, push it out of the host pool by staging 3, then back 3 up
    and demote it so that a prefetch's fallback eviction can make room."""
    s = run(m, ("drain_storage_control_queues", {}), ("evict", {"node": page(m, 1, 2)}), state=_backed_up(m))
    s = run(m, ("insert", {"req": 1}), state=s)
    assert s.ranks[0].owner[page(m, 1)] == -1  # only the store holds 1/2 now
    return run(m, ("write_dma_done", {"rank": 0}), ("writing_check", {}), ("storage_backup_done", {"rank": 0, "pages": 1}),
               ("drain_storage_control_queues", {}), ("evict", {"node": page(m, 3)}), state=s)


def test_prefetch_reserves_host_slots_and_inserts_what_every_rank_read():
    m = model(requests=((1, 2), (3,)), device_pages=2, storage=True, prefetch=True)
    s = _evicted_to_storage(m)
    enabled = [a for a in m.actions(s) if a.name == "prefetch_from_storage"]
    assert enabled, [str(a) for a in m.actions(s)]
    s = run(m, enabled[0], state=s)
    rs = s.ranks[0]
    assert rs.pq == ((0, -1, 0, 2),) and rs.pdone == (-1,)
    s = run(m, ("prefetch_io", {"rank": 0, "op": 0}), ("check_prefetch_progress", {"op": 0}), state=s)
    n = node(m, s, 1, 2)
    assert (n.dev, n.host) == (ABSENT, HOST_RESIDENT) and s.ranks[0].pq == ()


def test_check_prefetch_before_the_read_queues_the_whole_reservation_for_release():
    m = model(requests=((1, 2), (3,)), device_pages=2, storage=True, prefetch=True)
    s = _evicted_to_storage(m)
    a = next(a for a in m.actions(s) if a.name == "prefetch_from_storage")
    s = run(m, a, ("check_prefetch_progress", {"op": 0}), state=s)
    assert s.ranks[0].relq == (2,)
    s2 = run(m, ("drain_storage_control_queues", {}), state=s)
    assert s2.ranks[0].relq == () and s2.ranks[0].host_free == s.ranks[0].host_free + 2


def test_prefetch_double_free_variant_frees_the_tail_twice():
    m = model(requests=((1, 2), (3,)), device_pages=2, storage=True, prefetch=True,
              variants={"prefetch-double-free"})
    s = _evicted_to_storage(m)
    a = next(a for a in m.actions(s) if a.name == "prefetch_from_storage")
    s = run(m, a, ("check_prefetch_progress", {"op": 0}), state=s)
    rs = s.ranks[0]
    assert rs.relq == (2,) and rs.host_free == 2  # the tail is freed AND queued
    assert rs.host_free + sum(rs.relq) > m.cfg.host_pages
