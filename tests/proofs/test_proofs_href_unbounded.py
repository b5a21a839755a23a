"""href_accounting and prefetch_queue for any number of pages (proofs.epr_href,
proofs.epr_prefetch): their page-sorted forms and hypotheses agree with the spec and
the bounded encoding on reachable states and notice a broken count or prefetch, every
explicit step of a covered action is a behaviour of the encoding with the backups and
prefetches named by pages (and a wrong successor is not), the obligations are proved,
and split-during-backup fails href_accounting with a finite CTI."""

import pytest

from tiercheck.proofs.agreement import concrete_ctx, lift
from tiercheck.proofs.epr_href import ACTIONS
from tiercheck.proofs.epr_prefetch import ACTIONS as PREFETCH_ACTIONS
from tiercheck.proofs.epr_href_agreement import admits, values
from tiercheck.proofs.epr_obligations import covered, prove_action
from tiercheck.proofs.formula import value
from tiercheck.proofs.strengthen import STRENGTHENING

from .proof_helpers import model, reachable

BOTH = {"href_accounting": True, "href_pages": True, "prefetch_queue": True}


def _bounded(m, s, name="href_accounting"):
    ctx = concrete_ctx(m)
    return value(ctx.space, STRENGTHENING[name].fn(ctx, lift(ctx, m, s)))


def _busy(s):
    return any(rs.sq or rs.pq for rs in s.ranks)


# wb-reclaim-prefetch-1r: anchored prefetches (its anchored states also in the tests below)
@pytest.mark.parametrize("name", ["wt-storage-1r", pytest.param("wb-reclaim-prefetch-1r", marks=pytest.mark.slow)])
def test_href_invariant_agrees_on_reachable_states(name):
    m = model(name)
    busy = [s for s in reachable(m, 600) if _busy(s)][::25]
    assert len(busy) >= 3
    for s in busy:
        for r in range(m.cfg.ranks):
            assert values(m, s, r) == BOTH, s


def _with_href(s, e, delta):
    rs = s.ranks[0]
    nodes = tuple(n._replace(href=n.href + delta) if i == e else n for i, n in enumerate(rs.nodes))
    return s._replace(ranks=(rs._replace(nodes=nodes),) + s.ranks[1:])


@pytest.mark.parametrize("name,field", [("wt-storage-1r", "sq"), ("wb-reclaim-prefetch-1r", "pq")])
def test_href_invariant_notices_a_count_off_by_one(name, field):
    m = model(name)
    anchored = lambda rs: rs.sq if field == "sq" else [op for op in rs.pq if op[1] >= 0]
    s = next(s for s in reachable(m, 1500) if anchored(s.ranks[0]))
    rs = s.ranks[0]
    e = rs.owner[rs.sq[0][1]] if field == "sq" else anchored(rs)[0][1]
    assert e >= 0 and values(m, s, 0)["href_accounting"] is True
    for delta in (-1, 1):
        bad = _with_href(s, e, delta)
        assert values(m, bad, 0)["href_accounting"] is False
        assert _bounded(m, bad) is False


@pytest.mark.parametrize("name", ["wt-storage-1r", "wb-reclaim-prefetch-1r", "wt-prefetch-revoke-1r",
                                  pytest.param("wb-storage-1r", marks=pytest.mark.slow),
                                  pytest.param("wt-prefetch-fail-1r", marks=pytest.mark.slow),
                                  pytest.param("wt-prefetch-endings-2r", marks=pytest.mark.slow)])
def test_href_steps_admitted(name, per_action=1, cap=800):
    """Breadth-first: up to ``per_action`` explicit steps of each covered action that
    change something, with a backup or prefetch queued before or after, are behaviours."""
    m = model(name)
    done = {}
    for s in reachable(m, cap):
        for a, t in m.successors(s):
            if (a.name in ACTIONS or a.name in PREFETCH_ACTIONS) and t != s and (_busy(s) or _busy(t)) \
                    and done.get(a.name, 0) < per_action:
                for r in range(m.cfg.ranks):
                    assert admits(m, s, a, t, r), (name, a, r)
                done[a.name] = done.get(a.name, 0) + 1
    assert len(done) >= 3 and set(done) & {"writing_check", "prefetch_from_storage"}, done


def test_a_step_that_loses_a_reference_is_not_admitted():
    """A successor of a step that starts a backup, with the node's host reference not
    taken, or with the backup missing from sq, is no behaviour."""
    m = model("wt-storage-1r")
    for s in reachable(m, 800):
        for a, t in m.successors(s):
            rt = t.ranks[0]
            if a.name != "writing_check" or len(rt.sq) <= len(s.ranks[0].sq):
                continue
            e = rt.owner[rt.sq[-1][1]]
            assert admits(m, s, a, t, 0)
            assert not admits(m, s, a, _with_href(t, e, -1), 0)
            dropped = t._replace(ranks=(rt._replace(sq=rt.sq[:-1]),) + t.ranks[1:])
            assert not admits(m, s, a, dropped, 0)
            return
    pytest.fail("no writing_check starting a backup")


def test_href_proved_for_any_pages():
    for action in ("writing_check", "evict", "drain_storage_control_queues", "prefetch_from_storage",
                   "check_prefetch_progress"):
        assert covered("href_accounting", action)
        (r,) = prove_action(action, targets=["href_accounting"])
        assert (r.status, r.pages) == ("proved", "any"), r


@pytest.mark.slow
def test_href_proved_for_any_pages_under_every_covered_action():
    for action in ACTIONS:
        (r,) = prove_action(action, targets=["href_accounting"])
        assert (r.status, r.pages) == ("proved", "any"), r


@pytest.mark.slow
def test_split_during_backup_fails_href_under_insert_with_a_finite_cti():
    (r,) = prove_action("insert", targets=["href_accounting"], variants=frozenset({"split-during-backup"}))
    assert r.status == "failed" and r.cti is not None and r.cti["forest"]["pages"] >= 2, r


@pytest.mark.slow
def test_split_during_backup_fails_href_under_lock_request():
    """The split's upper half loses its backup's reference (lock_request splits at the
    device match's end): a CTI over a finite forest."""
    (r,) = prove_action("lock_request", targets=["href_accounting"], variants=frozenset({"split-during-backup"}))
    assert r.status == "failed" and r.cti is not None and r.cti["forest"]["pages"] >= 2, r


def test_split_during_backup_fails_href_under_the_drain():
    """Under split-during-backup an ack releases only the node its backup was
    registered with, which the encoding does not follow: the references after the drain
    round are free there, and the obligation fails with a CTI (the variant's own bug
    shows under insert and lock_request above)."""
    (r,) = prove_action("drain_storage_control_queues", targets=["href_accounting"],
                        variants=frozenset({"split-during-backup"}))
    assert r.status == "failed" and r.cti is not None, r


def _with_op(s, i, **change):
    from tiercheck.spec.prefetch_end import FREED, REVOKED, TERMINATED

    rs = s.ranks[0]
    if "anchor_host" in change:
        e = rs.pq[i][1]
        nodes = tuple(n._replace(host=change["anchor_host"]) if j == e else n for j, n in enumerate(rs.nodes))
        rs = rs._replace(nodes=nodes)
    if "flags" in change:
        bits = {"revoked": REVOKED, "terminated": TERMINATED, "freed": FREED}
        f = list(rs.pflags)
        f[i] = sum(bits[b] for b in change["flags"])
        rs = rs._replace(pflags=tuple(f))
    return s._replace(ranks=(rs,) + s.ranks[1:])


@pytest.mark.parametrize("name,broken", [
    ("wb-reclaim-prefetch-1r", dict(anchor_host=0)),  # the anchor lost its host copy
    ("wt-prefetch-revoke-1r", dict(flags=("revoked",))),  # revoked, not terminated
    ("wt-prefetch-revoke-1r", dict(flags=("terminated", "freed"))),  # freed without the variant
])
def test_prefetch_queue_notices_a_broken_prefetch(name, broken):
    m = model(name)
    need_anchor = "anchor_host" in broken
    s = next(s for s in reachable(m, 1500) if s.ranks[0].pq and (not need_anchor or s.ranks[0].pq[0][1] >= 0))
    assert values(m, s, 0)["prefetch_queue"] is True
    bad = _with_op(s, 0, **broken)
    assert values(m, bad, 0)["prefetch_queue"] is False
    assert _bounded(m, bad, "prefetch_queue") is False


def test_prefetch_queue_proved_for_any_pages():
    for action in ("prefetch_from_storage", "prefetch_io", "prefetch_revoke", "evict", "drain_storage_control_queues"):
        assert covered("prefetch_queue", action)
        (r,) = prove_action(action, targets=["prefetch_queue"])
        assert (r.status, r.pages) == ("proved", "any"), r


@pytest.mark.slow
def test_prefetch_queue_proved_for_any_pages_under_every_covered_action():
    for action in PREFETCH_ACTIONS:
        (r,) = prove_action(action, targets=["prefetch_queue"])
        assert (r.status, r.pages) == ("proved", "any"), r
