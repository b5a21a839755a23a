"""Every safety variant of the registry fails at least one obligation, with a CTI."""

import pytest

from tiercheck.proofs.obligations import prove_action
from tiercheck.proofs.scope import LIVENESS_ONLY, OUT_OF_SCOPE_VARIANTS
from tiercheck.spec.variants import VARIANTS

from .test_proofs_correct import KNOWN_OPEN

# Where each bug shows first (the action whose effect the variant changes); the test
# falls back to every action if that one proves.
FIRST = {
    "durable-on-ack": "drain_storage_control_queues",
    "release-busy": "drain_storage_control_queues",
    "release-no-consensus": "drain_storage_control_queues",
    "split-during-backup": "insert",
    "reclaim-demote-leaf": "evict",
    "reclaim-during-loadback": "insert",
    "split-drops-pending-mark": "insert",
    "digest-unchecked": "writing_check",
    "early-return-collective": "writing_check",
    "partial-backup-leak": "insert",
    "prefetch-double-free": "check_prefetch_progress",
    "failed-batch-acked": "storage_backup_done",
    "orphan-host-subtree": "evict",
}


# negated-pair-overflow lives in the w-bit wire arithmetic: its inductive obligations (exact
# mod-2^w digest folding under symbolic victims) do not finish in time, so the variant is
# exhibited by the bit-vector theorem instead (docs/proofs.md).
BY_THEOREM = {"negated-pair-overflow": "overflow_witness"}


def test_registry_is_classified():
    for name in VARIANTS:
        assert name in FIRST or name in BY_THEOREM or name in LIVENESS_ONLY or name in OUT_OF_SCOPE_VARIANTS, name


def test_overflow_variant_exhibited_by_theorem():
    from tiercheck.proofs.consensus import THEOREMS, run_theorem

    th = next(t for t in THEOREMS if t.name == BY_THEOREM["negated-pair-overflow"])
    r = run_theorem(th)
    assert r.status == "exhibited" and "-9223372036854775808" in r.detail


# The pages an obligation needs to show the bug: reclaim-demote-leaf needs a non-leaf
# duplicate above an evictable leaf, which a 2-page forest cannot hold (release_safety
# under evict fails at 3 pages; the evict obligations take ~2.5 min there).
PAGES = {"reclaim-demote-leaf": 3}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIRST))
def test_variant_fails_an_obligation_with_cti(name):
    from tiercheck.proofs.obligations import ACTION_NAMES

    order = [FIRST[name]] + [a for a in ACTION_NAMES if a != FIRST[name]]
    for action in order:
        failed = [r for r in prove_action(action, variants=frozenset({name}), k=PAGES.get(name, 2))
                  if r.status == "failed" and (r.target, action) not in KNOWN_OPEN]
        if failed:
            r = failed[0]
            assert r.cti is not None and r.cti["pre"] is not None or action == "init"
            assert r.cti["post"]["ranks"], r
            return
    pytest.fail(f"variant {name}: every obligation proved")
