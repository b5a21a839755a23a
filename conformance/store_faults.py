"""A store fault armed through the group's test API, against the spec's partial backup.

``HiCacheGroup.storage_fault(rank, method, ...)`` arms a FaultyBackend hook on one rank
(the API the storage and Mooncake tests use to make a batch fail partway). No spec trace
goes through it: the spec's fault ``partial_storage`` is a step parameter
(``storage_backup_done(rank, pages=k)``, the first k pages reached the store). Here the
two meet: a store batch armed to fail from its second page, then the rank's backup run
in full, must give the spec's state after ``storage_backup_done(pages=1)``, one failed
page counted; and the API refuses a rank whose store is not a FaultyBackend, and a fault
it does not know. And a store that cannot answer whether it holds a durable page (its
exists query errors) has not lost it: the rank's self-check must not say so (unknown is
not absent), while a page the store really dropped is reported.
"""

from __future__ import annotations

from tiercheck.impl.hicache.errors import ProtocolError
from tiercheck.impl.hicache.metrics import STORAGE_FAILED_PAGES
from tiercheck.impl.storage import FaultyBackend, codes, rank_key
from tiercheck.models import model_file
from tiercheck.spec.model import Model

from .compare import describe_difference, observable
from .reference import ReferenceDriver
from .runner import replay
from .situations import before_last_step, first_path


def _partial_of_two(m, s, a, t) -> bool:
    """storage_backup_done on rank 0 storing 1 page of a 2-page backup."""
    if a.name != "storage_backup_done" or a["rank"] != 0 or a["pages"] != 1:
        return False
    rs = s.ranks[0]
    return len(m.pages.chain(*rs.sq[len(rs.sdone)])) == 2


def _refusals(group) -> str:
    """The API on a plain store, and an unknown fault: each refused ("" when both are)."""
    try:
        group.storage_fault(0, "fail_all", codes.TRANSFER_FAIL)
        return "storage_fault armed a store that is not a FaultyBackend"
    except ProtocolError as exc:
        if "storage faults need a FaultyBackend" not in str(exc):
            return f"storage_fault on a plain store is refused with another reason: {exc}"
    return ""


def failed_batch_is_a_partial_backup() -> str:
    """wt-storage-1r: the shortest trace to a partial backup of a 2-page node, its last
    step replaced by the armed store fault and a full storage_backup_done."""
    cfg = model_file.load("wt-storage-1r").config
    with before_last_step(cfg, _partial_of_two) as (model, trace, driver, out):
        if out.mismatch is not None:
            return f"before the backup: {out.mismatch.message}"
        group = driver.group
        problem = _refusals(group)
        if problem:
            return problem
        rank = group.ranks[0]
        rank.backend = rank.backup_worker.backend = FaultyBackend(rank.backend)
        try:
            group.storage_fault(0, "no_such_fault")
            return "storage_fault accepted an unknown fault"
        except ValueError:
            pass
        group.storage_fault(0, "fail_from", 1, codes.NO_AVAILABLE_HANDLE)
        failed = group.metrics()[0].get(STORAGE_FAILED_PAGES, 0)
        group.storage_backup_done(0)  # every page the store takes
        failed = group.metrics()[0].get(STORAGE_FAILED_PAGES, 0) - failed
        want, got = observable(model.next_state(out.states[-1], trace[-1])), observable(driver.state())
        problems = describe_difference(model, want, got) if got != want else driver.verify()
    if problems:
        return f"a store batch failing from its second page is not the spec's {trace[-1]}: {problems[0]}"
    return "" if failed == 1 else f"{STORAGE_FAILED_PAGES} went up by {failed}, 1 page failed"


def _marked_durable(m, s, a, t) -> bool:
    """A step that marks a page durable on rank 0 (its backup acked, mirror_release)."""
    return t.ranks[0].durable & ~s.ranks[0].durable != 0


def unanswered_exists_is_not_a_loss() -> str:
    """wt-mirror-1r: the shortest trace to a durable page, then the store's exists query
    failing on rank 0 (-1, unknown): the self-check must not call the page missing; then
    the page dropped from the store for real: it must."""
    cfg = model_file.load("wt-mirror-1r").config
    model = Model(cfg)
    driver = ReferenceDriver(cfg)
    try:
        out = replay(driver, first_path(model, lambda s, a, t: _marked_durable(model, s, a, t)))
        if out.mismatch is not None:
            return f"before the fault: {out.mismatch.message}"
        rank = driver.group.ranks[0]
        rank.backend = rank.backup_worker.backend = store = FaultyBackend(rank.backend)
        store.fail_all(codes.RPC_FAIL, ops=("exists",))
        unknown = [p for p in driver.verify() if "not in the store" in p]
        store.clear()
        store.evict([rank_key(h, rank.source_rank) for h in rank.durable])
        lost = [p for p in driver.verify() if "not in the store" in p]
    finally:
        driver.close()
    if unknown:
        return f"a store that cannot answer exists is taken for one that lost the page: {unknown[0]}"
    return "" if lost else "a durable page dropped from the store is not reported missing"
