"""Path coverage of upstream SGLang HiCache: which protocol code paths a run reached.

A conformance run that finds nothing is only evidence if it exercised the code. Each entry
below names one upstream function (module, class, method) that carries one protocol path
(a branch of the domain model: a split, a rejected backup, a host-leaf eviction, a
duplicate reclaim...). ``install()`` wraps them at class level with call counters (the
wrapped code runs unchanged); ``counts()`` reads them. Counters are per process, so each
gloo rank reports its own.
"""

from __future__ import annotations

import functools

URC = "sglang.srt.mem_cache.unified_radix_cache:UnifiedRadixCache"
UTC = "sglang.srt.mem_cache.unified_cache.unified_tree_core:UnifiedTreeCore"

# (name, "module:Class", method, what the path is)
PATHS = (
    ("insert", URC, "insert", "insert walk"),
    ("match_prefix", URC, "match_prefix", "prefix match"),
    ("split", UTC, "_split_node", "node split (insert or match)"),
    ("unevict_on_insert", UTC, "_unevict_node_on_insert", "insert adopts fresh slots for an evicted node"),
    ("backup_kv", URC, "_execute_and_commit_kv_backup", "D->H backup chain"),
    ("backup_one", URC, "_execute_kv_backup", "one D->H admission (host pool check)"),
    ("evict_host", URC, "evict_host", "host eviction for admission"),
    ("evict_host_leaf", UTC, "_evict_host_leaf", "a host-only leaf freed"),
    ("reclaim_duplicates", UTC, "_reclaim_full_host_duplicates", "write_back duplicate reclaim walk"),
    ("release_duplicate", UTC, "_release_full_host_duplicate", "a host duplicate released (digest)"),
    ("evict", URC, "evict", "device eviction"),
    ("demote", UTC, "_demote", "backed device leaf demoted to host-only"),
    ("delete_unbacked", UTC, "_delete_unbacked_device_leaf", "unbacked device leaf deleted"),
    ("drop_subtree_no_host", UTC, "drop_subtree_no_host", "write_back victim dropped after a rejected backup"),
    ("writing_check", URC, "writing_check", "D->H acks committed"),
    ("finish_write_through", UTC, "finish_write_through", "one D->H ack finished on a node"),
    ("load_back", URC, "load_back", "H->D load-back"),
    ("commit_load_back", UTC, "commit_load_back", "load-back committed (pending marks)"),
    ("loading_check", URC, "loading_check", "H->D acks committed"),
    ("finish_load_back", UTC, "finish_load_back", "one load-back finished"),
    ("ready_count_round", URC, "_sync_hicache_ready_counts", "fused MIN round (acks, queues, digest)"),
    ("write_backup_storage", URC, "write_backup_storage", "H->L3 backup started"),
    ("drain_storage", URC, "_drain_storage_control_queues_impl", "storage queues drained"),
)

HRC = "sglang.srt.mem_cache.hiradix_cache:HiRadixCache"
# The same paths in HiRadixCache (core_hrc): one class carries tree and protocol.
HRC_PATHS = (
    ("insert", HRC, "insert", "insert walk"),
    ("match_prefix", HRC, "match_prefix", "prefix match"),
    ("split", HRC, "_split_node", "node split (insert or match)"),
    ("backup_one", HRC, "write_backup", "one D->H admission (host pool check)"),
    ("evict_host", HRC, "evict_host", "host eviction for admission"),
    ("evict", HRC, "evict", "device eviction"),
    ("demote", HRC, "_evict_backuped", "backed device leaf demoted to host-only"),
    ("delete_unbacked", HRC, "_evict_regular", "unbacked device leaf deleted"),
    ("writing_check", HRC, "writing_check", "D->H acks committed"),
    ("finish_write_through", HRC, "_finish_write_through_ack", "one D->H ack finished on a node"),
    ("load_back", HRC, "load_back", "H->D load-back"),
    ("loading_check", HRC, "loading_check", "H->D acks committed"),
)

def _refused(result) -> bool:
    """None, or a false count/flag (HiRadixCache returns 0 / None; a tensor is a success)."""
    return result is None or (not hasattr(result, "numel") and not result)


# Outcomes worth telling apart: name -> (path it refines, predicate on the return value).
OUTCOMES = {
    "backup_rejected": ("backup_one", _refused, "host admission rejected the backup (starvation)"),
    "evict_host_freed_nothing": ("evict_host", lambda r: not r, "host eviction found no victim"),
    "load_back_refused": ("load_back", _refused, "load-back refused (pending/short)"),
}

_COUNTS: dict = {}
_INSTALLED: list = []
_ABSENT: list = []  # paths this release does not have (reported as None, never as 0)
_TABLE: list = [PATHS]  # the table install() wrapped


def install(table=PATHS) -> None:
    """Wrap every path of ``table`` once per process (idempotent)."""
    if _INSTALLED:
        return
    import importlib

    _TABLE[0] = table
    for name, where, method, _what in table:
        mod, cls_name = where.split(":")
        cls = getattr(importlib.import_module(mod), cls_name)
        orig = getattr(cls, method, None)
        if orig is None:
            _ABSENT.append(name)
            continue

        outcomes = [(o, pred) for o, (base, pred, _) in OUTCOMES.items() if base == name]

        def wrapper(*args, __orig=orig, __name=name, __outcomes=outcomes, **kwargs):
            _COUNTS[__name] = _COUNTS.get(__name, 0) + 1
            result = __orig(*args, **kwargs)
            for outcome, pred in __outcomes:
                if pred(result):
                    _COUNTS[outcome] = _COUNTS.get(outcome, 0) + 1
            return result

        setattr(cls, method, functools.wraps(orig)(wrapper))
        _INSTALLED.append(name)


def counts() -> dict:
    names = [name for name, *_ in _TABLE[0]] + list(OUTCOMES)
    absent = set(_ABSENT) | {o for o, (base, *_r) in OUTCOMES.items() if base in _ABSENT}
    return {name: None if name in absent else _COUNTS.get(name, 0) for name in names}


def describe(name: str) -> str:
    for n, _where, _method, what in _TABLE[0]:
        if n == name:
            return what
    return OUTCOMES[name][2]


def reset() -> None:
    _COUNTS.clear()
