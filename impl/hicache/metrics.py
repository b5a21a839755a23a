"""Metrics with SGLang's names and labels, kept per rank as plain counters.

Counters are cumulative tokens; the host-pool gauges are computed when read.
"""

from __future__ import annotations

import collections

WRITE_REJECTED = "sglang:hicache_write_rejected_tokens_total"
BACKUPED = "sglang:backuped_tokens_total"  # tokens the storage acks report written
PREFETCHED = "sglang:prefetched_tokens_total"  # storage hit tokens brought into the host pool
HOST_USED = "sglang:hicache_host_used_tokens"
HOST_TOTAL = "sglang:hicache_host_total_tokens"
# tiercheck's own (no SGLang counterpart).
HOST_WRITE = "tiercheck:host_write_tokens_total"  # D->H copies submitted
LOAD_BACK = "tiercheck:load_back_tokens_total"
DEVICE_EVICTED = "tiercheck:device_evicted_tokens_total"
HOST_EVICTED = "tiercheck:host_evicted_tokens_total"
MIRROR_RELEASED = "tiercheck:mirror_released_tokens_total"
DUP_RECLAIMED = "tiercheck:duplicate_reclaimed_tokens_total"
PLAN_MISMATCH = "tiercheck:release_plan_mismatch_total"
STORAGE_FAILED_PAGES = "tiercheck:storage_backup_failed_pages_total"
PREFETCH_ORPHANED = "tiercheck:prefetch_orphaned_tokens_total"
PREFETCH_COMPLETED = "tiercheck:prefetch_completed_tokens_total"  # the agreed (MIN) completions


def labelled(name: str, **labels) -> str:
    if not labels:
        return name
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def rejected(reason: str, stage: str) -> str:
    return labelled(WRITE_REJECTED, reason=reason, stage=stage)


class Metrics:
    def __init__(self) -> None:
        self.counters: collections.Counter = collections.Counter()

    def add(self, key: str, n: int = 1) -> None:
        if n:
            self.counters[key] += n

    def __getitem__(self, key: str) -> int:
        return self.counters[key]

    def as_dict(self, gauges: dict | None = None) -> dict:
        out = dict(self.counters)
        out.update(gauges or {})
        return dict(sorted(out.items()))
