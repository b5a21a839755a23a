"""The bug variants the implementation can switch on, by the names of domain.md section 5.

The implementation must not import the specification, so the names are listed here again;
tests/impl/test_hicache_variants.py checks that this list equals tiercheck.spec.variants.VARIANTS.
Each variant changes only the code path the bug changes: grep ``has("<name>")``.
"""

from __future__ import annotations

from tiercheck.errors import UserError
from tiercheck.impl.cp.tiebreak import KNOWN_VARIANTS as PLANNER_VARIANTS

VARIANT_NAMES = frozenset(
    {
        "host-starvation",
        "durable-on-ack",
        "release-busy",
        "release-no-consensus",
        "split-during-backup",
        "reclaim-demote-leaf",
        "reclaim-during-loadback",
        "split-drops-pending-mark",
        "digest-unchecked",
        "early-return-collective",
        "partial-backup-leak",
        "prefetch-double-free",
        "failed-batch-acked",
        "negated-pair-overflow",
        "orphan-host-subtree",
        "page-ceil-match",
        "lru-local-clock",
        "split-slice-off-by-one",
        "split-write-lock-leak",
        "durable-evicted-while-planned",
        "prefetch-vote-skipped",
        "terminated-half-dropped",
        "timeout-local-vote",
        "revoke-frees-in-flight",
        "lru-evicts-locked-parent",
        "load-back-evicts-chain-unlocked",
    }
) | PLANNER_VARIANTS  # the CP load-back planner's (planner-local-tiebreak), bound in cp_load.py


def check_variants(names) -> frozenset:
    if isinstance(names, str):
        names = [names]
    try:
        names = frozenset(names)
    except TypeError:
        raise UserError(f"variants must be a list of variant names, got {names!r}") from None
    if not all(isinstance(n, str) for n in names):
        raise UserError(f"variants must be variant names (strings), got {sorted(map(repr, names))}")
    unknown = sorted(names - VARIANT_NAMES)
    if unknown:
        raise UserError(
            f"unknown variant {unknown[0]!r} (known: {', '.join(sorted(VARIANT_NAMES))})"
        )
    return names
