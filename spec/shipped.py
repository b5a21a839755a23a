"""Named configurations of code as shipped: where a seed's code differs from tiercheck's
protocol, each difference is the bug variant that switches it on in the spec.

tiercheck's protocol (the default Config) is what the seeds should do: host allocation
agreed across ranks, every node a write covers unlocked on its ack, the split halves
inheriting what they need. A named configuration is a seed's code as it is, so the checker
can say which of its behaviours breaks which property (``tiercheck attribute``); its
models live in models/library/<name>/ and switch on exactly these variants.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Tuple


class Behaviour(NamedTuple):
    variant: str  # spec/variants.py
    code: str  # where the seed does it


SHIPPED: Dict[str, Tuple[Behaviour, ...]] = {
    "seed004": (
        Behaviour("split-write-lock-leak",
                  "_split_node copies lock_ref to the new upper half; writing_check -> "
                  "complete_write_ack_node -> dec_node_lock_ref unlocks the registered node only"),
        Behaviour("split-during-backup",
                  "_split_node gives the new half no host_ref_counter (only a pin's hold); the "
                  "storage ack (ongoing_backup[operation_id] = node) releases the registered node only"),
        Behaviour("partial-backup-leak",
                  "write_backup: each rank's cache_controller.write(), evict_host and one retry; "
                  "whether it succeeded is not agreed across ranks"),
        Behaviour("host-starvation",
                  "drain_storage_control_queues -> _drain_backup: a backup ack only calls "
                  "release_host; no host mirror is ever released"),
        Behaviour("orphan-host-subtree",
                  "_evict_regular -> _delete_leaf: a non-backed device leaf is deleted and its "
                  "host-only children are detached with their host slots"),
    ),
}


def variants_of(name: str) -> frozenset:
    return frozenset(b.variant for b in SHIPPED[name])
