"""Pinned state-space sizes and verdicts of the shipped models (one table, shared by the
tests that run every shipped model).

A change here is a change of the spec's semantics or of a model file, never of the
checker. models/library/sglang/ is another lane's (SGLang 0.5.23 options) and is pinned
by its own tests; the checker's tests still run those models (coverage, symmetry) under
``-m slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tiercheck.models import model_file

LIBRARY = Path(model_file.LIBRARY)
OTHER_LANES = ("sglang",)  # folders of models/library pinned elsewhere
FAST = 2000  # models with fewer distinct states run by default

# name -> (distinct states, transitions): every enabled (state, action) pair of an
# expanded state, stuttering steps included.
CORRECT = {
    "cp-planner-2r": (31913, 180684),
    "lru-2r": (835, 4713),
    "paged-1r": (48, 185),
    "request-locks-1r": (585, 3668),
    "request-locks-2r": (601, 3492),
    "slots-1r": (777, 4152),
    "slots-prefetch-1r": (385, 1776),
    "cp-planner-ancestors-1r": (11972, 70440),
    "cp-planner-lanes-2r": (10592, 48553),
    "cp-planner-lru-1r": (1123, 5961),
    "wb-1r": (92, 379),
    # 4838 -> 4980 transitions: an idle drain round ages the durable marks (seed 000 drains
    # every iteration; the spec skipped idle rounds, found by auto-mode conformance).
    "wt-durable-lru-1r": (1006, 4980),
    "wb-2r": (176, 819),
    "wb-reclaim-1r": (247, 1268),
    "wb-reclaim-2r": (1174, 8021),
    "wb-reclaim-storage-1r": (7072, 43662),
    "wb-evicts-2r": (376, 3275),
    "wb-reclaim-evicts-1r": (2390, 15420),
    "wt-evicts-1r": (55, 208),
    "request-locks-evicts-1r": (206, 1143),
    "wb-reclaim-prefetch-1r": (1696, 8547),
    "wb-storage-1r": (934, 5301),
    "wt-1r": (99, 426),
    "wt-2r": (227, 1170),
    "wt-alloc-2r": (290, 2619),
    "wt-mirror-1r": (10502, 59560),
    # The >= 10^6-state 2-rank model (slow=true in its file).
    "wt-mirror-2r": (1169398, 8210612),
    "wt-mirror-mla-2r": (37920, 259362),
    "wt-mirror-prefetch-1r": (702, 3102),
    "wt-mirror-sym4-2r": (26352, 178616),
    "wt-prefetch-1r": (7380, 43676),
    "wt-prefetch-2r": (471, 2621),
    "wt-prefetch-wait-2r": (399, 2251),
    "wt-prefetch-timeout-2r": (1047, 6845),
    "wt-prefetch-fail-1r": (205, 920),
    "wt-prefetch-revoke-1r": (231, 1056),
    "wt-prefetch-endings-2r": (7073, 51861),
    "wt-storage-1r": (2461, 16664),
    "wt-storage-2r": (58245, 407078),
    "wts-1r": (182, 806),
    "wts-2r": (422, 2214),
    "wts-mirror-1r": (8804, 51740),
}

# name -> (distinct states, properties violated among the model's default properties)
EXPECTED = {
    "variants/digest-unchecked": (22389, {"eviction_progress", "rank_agreement", "slot_conservation"}),
    "variants/durable-evicted-while-planned": (54997, {"rank_agreement"}),
    "variants/durable-on-ack": (15636, {"durable_only_when_acked"}),
    "variants/early-return-collective": (13, {"no_collective_hang"}),
    "variants/failed-batch-acked": (15636, {"durable_only_when_acked"}),
    "variants/host-starvation": (463, {"host_channel", "host_channel_fair"}),
    "variants/lru-local-clock": (3001, {"rank_agreement"}),
    "variants/load-back-evicts-chain-unlocked": (52, {"no_use_after_free", "slot_conservation"}),
    "variants/lru-evicts-locked-parent": (57, {"counter_sanity", "locked_never_evicted", "no_use_after_free",
                                               "slot_conservation"}),
    "variants/negated-pair-overflow": (11347, {"eviction_progress", "rank_agreement", "slot_conservation"}),
    "variants/orphan-host-subtree": (14, {"slot_conservation"}),
    "variants/page-ceil-match": (14, {"prefix_closed", "slot_conservation"}),
    "variants/partial-backup-leak": (19, {"rank_agreement"}),
    "variants/planner-local-tiebreak": (46581, {"planner_determinism", "rank_agreement"}),
    "variants/prefetch-double-free": (2513, {"eviction_progress", "slot_conservation"}),
    "variants/prefetch-vote-skipped": (487, {"no_collective_hang"}),
    "variants/terminated-half-dropped": (161, {"prefetch_progress"}),
    "variants/timeout-local-vote": (1239, {"no_collective_hang"}),
    "variants/revoke-frees-in-flight": (899, {"no_use_after_free"}),
    "variants/reclaim-demote-leaf": (181, {"release_safety"}),
    "variants/reclaim-during-loadback": (277, {"no_ghost", "no_use_after_free", "release_safety"}),
    "variants/release-busy": (2985, {"release_safety"}),
    "variants/release-no-consensus": (323, {"rank_agreement"}),
    "variants/split-slice-off-by-one": (46, {"slot_ownership"}),
    "variants/split-drops-pending-mark": (195, {"no_ghost", "no_use_after_free"}),
    "variants/split-during-backup": (4220, {"no_use_after_free"}),
    "variants/split-write-lock-leak": (138, {"lock_release"}),
    "findings/mirror-pinned-after-failed-backup": (11296, {"host_channel"}),
    "findings/age-gate-restage-starves-backup": (1006, {"host_channel_fair"}),
    "findings/mirror-pinned-after-prefetch": (208, {"host_channel"}),  # docs/random-models.md
    # Seed 004 as shipped (spec/shipped.py): every model switches on all its behaviours;
    # `tiercheck attribute` says which one breaks what.
    "seed004/wt-alloc-2r": (19, {"rank_agreement"}),
    "seed004/wt-orphan-1r": (14, {"slot_conservation"}),
    "seed004/wt-split-1r": (138, {"lock_release"}),
    "seed004/wt-storage-1r": (591, {"host_channel", "host_channel_fair"}),
}


def shipped_names():
    """Every model file under models/library, as a name relative to it."""
    return sorted(str(p.relative_to(LIBRARY).with_suffix("")) for p in LIBRARY.rglob("*.toml"))


def other_lane(name: str) -> bool:
    return name.split("/")[0] in OTHER_LANES


def size(name: str):
    """Pinned distinct states (None when pinned elsewhere)."""
    pin = CORRECT.get(name) or EXPECTED.get(name)
    return pin[0] if pin else None


def params(names, fast: int = FAST):
    """pytest params: models below ``fast`` pinned states run by default, the rest (and
    the other lanes' models) under -m slow."""
    out = []
    for n in names:
        sz = size(n)
        slow = sz is None or sz >= fast
        out.append(pytest.param(n, marks=pytest.mark.slow if slow else (), id=n))
    return out


def correct_names():
    """Shipped models that claim their default properties hold (no expect_violation)."""
    return [n for n in shipped_names() if not model_file.load(n).expect_violation]
