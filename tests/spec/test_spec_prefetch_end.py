"""How a prefetch ends (spec/prefetch_end.py): the timeout policy's vote, the vote's
terminated half, and revoke retired by the drain round; each against its bug variant."""

from __future__ import annotations

import pytest

from spec_helpers import model, run

from tiercheck.spec.action import act
from tiercheck.spec.prefetch_end import FREED, REVOKED, TERMINATED, TIMED_OUT, flags
from tiercheck.spec.properties import no_use_after_free


def _prefetching(m):
    """Page 3 backed up to storage and gone from the tree; its prefetch is in flight."""
    ranks = range(m.cfg.ranks)
    steps = [("insert", {"req": 1}), *[("write_dma_done", {"rank": r}) for r in ranks], ("writing_check", {}),
             ("evict", {"node": 2}), *[("storage_backup_done", {"rank": r, "pages": 1}) for r in ranks],
             ("drain_storage_control_queues", {}),
             ("insert", {"req": 0}), *[("write_dma_done", {"rank": r}) for r in ranks], ("writing_check", {}),
             ("evict", {"node": 1}), *[("storage_backup_done", {"rank": r, "pages": 2}) for r in ranks],
             ("drain_storage_control_queues", {}), ("prefetch_from_storage", {"req": 1})]
    s = run(m, *steps)
    assert all(rs.pq and rs.pflags == (0,) for rs in s.ranks)
    return s


def _config(**kw):
    return dict(requests=((1, 2), (3,)), device_pages=2, host_pages=2, storage=True, prefetch=True, **kw)


def test_timeout_terminates_once_every_rank_completed_or_timed_out():
    m = model(ranks=2, **_config(prefetch_stop="timeout"))
    s = run(m, ("prefetch_io", {"rank": 0, "op": 0}), state=_prefetching(m))
    check = act("check_prefetch_progress", op=0)
    assert m.next_state(s, check) == s  # rank 1 still reading, its timer has not fired
    s = run(m, ("prefetch_timeout", {"rank": 1, "op": 0}), state=s)
    assert flags(s.ranks[1], 0) == TIMED_OUT and flags(s.ranks[0], 0) == 0
    assert act("prefetch_timeout", rank=0, op=0) not in m.actions(s)  # rank 0's read completed
    t = m.next_state(s, check)
    assert not any(rs.pq or rs.pflags for rs in t.ranks) and not t.hung


def test_a_rank_local_timeout_without_the_vote_hangs():
    m = model(ranks=2, **_config(prefetch_stop="timeout", variants={"timeout-local-vote"}))
    s = run(m, ("prefetch_timeout", {"rank": 1, "op": 0}), state=_prefetching(m))
    assert m.next_state(s, act("check_prefetch_progress", op=0)).hung == "check_prefetch_progress"


def test_a_failed_read_ends_the_prefetch_through_the_terminated_half():
    for variants, ends in ((set(), True), ({"terminated-half-dropped"}, False)):
        m = model(**_config(prefetch_stop="wait_complete", prefetch_read_fail=True, variants=variants))
        s = run(m, ("prefetch_read_fails", {"rank": 0, "op": 0}), state=_prefetching(m))
        assert flags(s.ranks[0], 0) == TERMINATED and s.ranks[0].pdone == (0,)
        t = m.next_state(s, act("check_prefetch_progress", op=0))
        assert (not t.ranks[0].pq) == ends, variants


def test_revoke_is_retired_by_the_drain_once_the_read_settled():
    m = model(**_config(prefetch_revoke=True))
    s = _prefetching(m)
    free = s.ranks[0].host_free
    s = run(m, ("prefetch_revoke", {"op": 0}), state=s)
    assert flags(s.ranks[0], 0) == REVOKED | TERMINATED and s.ranks[0].host_free == free
    names = {a.name for a in m.actions(s)}
    assert "check_prefetch_progress" not in names and "drain_storage_control_queues" not in names
    s = run(m, ("prefetch_io", {"rank": 0, "op": 0}), ("drain_storage_control_queues", {}), state=s)
    assert not s.ranks[0].pq and not s.ranks[0].pflags and s.ranks[0].host_free == free + 1


def test_revoke_freeing_slots_under_an_in_flight_read_is_a_use_after_free():
    m = model(**_config(prefetch_revoke=True, variants={"revoke-frees-in-flight"}))
    s = run(m, ("prefetch_revoke", {"op": 0}), state=_prefetching(m))
    assert flags(s.ranks[0], 0) & FREED
    assert "into host slots already freed" in no_use_after_free(m, s)
    s = run(m, ("prefetch_io", {"rank": 0, "op": 0}), state=s)  # the read settled: nothing in flight
    assert no_use_after_free(m, s) is None


def test_the_twin_and_the_proofs_model_the_prefetch_endings():
    """tla/HiCache.tla exports them (tests/tla compares TLC's counts) and the z3 encoding
    accepts them (tests/proofs/test_proofs_resolution_fields.py proves them)."""
    from tiercheck.models import model_file, tla_export

    for name, line in (("wt-prefetch-revoke-1r", "PrefetchRevoke = TRUE"),
                       ("wt-prefetch-fail-1r", "PrefetchReadFail = TRUE"),
                       ("wt-prefetch-timeout-2r", 'PrefetchStop = "timeout"')):
        assert f"    {line}" in tla_export.render(model_file.load(name))[1], name
    from tiercheck.proofs.scope import OPTIONS, check_variant, refuse_out_of_scope

    assert not {"prefetch_revoke", "prefetch_read_fail"} & set(OPTIONS)
    for name in ("wt-prefetch-timeout-2r", "wt-prefetch-revoke-1r", "wt-prefetch-fail-1r"):
        refuse_out_of_scope(model_file.load(name).config)
    for variant in ("timeout-local-vote", "revoke-frees-in-flight"):
        check_variant(variant, unbounded=False)
