"""Action coverage: how often each action was enabled and taken, and which ones a model
never exercises.

An action that is never enabled is a hole in the model: whatever the spec says about it
was never checked. Some actions cannot apply to a configuration at all (prefetch without
prefetch, a fault that is off); those are "not applicable", not holes. Only relevant
actions that were never enabled are flagged.

Counts are per step of the explored graph: "enabled" counts (state, action) pairs whose
guard held, "taken" those that changed the state (the rest are stuttering steps, e.g. a
sync round in which nothing had finished). Under symmetry reduction they are counts over
the representatives.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional


def not_applicable(cfg, name: str) -> Optional[str]:
    """Why action ``name`` cannot occur under ``cfg`` (None when it can)."""
    if name in ("prefetch_from_storage", "prefetch_io", "check_prefetch_progress"):
        return None if cfg.prefetch and cfg.storage else "prefetch is off"
    if name in ("storage_backup_done", "drain_storage_control_queues"):
        return None if cfg.storage else "no storage tier"
    if name == "store_lose":
        return None if cfg.fault("store_loss") else "fault store_loss is off"
    if name == "registry_skew":
        return None if cfg.fault("registry_skew") else "fault registry_skew is off"
    if name == "local_access":
        return None if cfg.cp_planner or cfg.lru else "neither the CP planner nor victim_order = \"lru\" is on"
    if name in ("lock_request", "unlock_request"):
        return None if cfg.request_locks else "request_locks is off"
    if name == "prefetch_timeout":
        return None if cfg.prefetch_stop == "timeout" else "prefetch_stop is not timeout"
    if name == "prefetch_read_fails":
        return None if cfg.prefetch_read_fail else "prefetch_read_fail is off"
    if name == "prefetch_revoke":
        return None if cfg.prefetch_revoke else "prefetch_revoke is off"
    if name == "write_dma_done" and cfg.write_back:
        return "write_back stages inside evict (the copy and its check are blocking)"
    if name == "writing_check" and cfg.write_back:
        if cfg.duplicate_reclaim and cfg.ranks > 1:
            return None  # the fused ready-count round carries the reclaim digest
        return "write_back stages inside evict (the copy and its check are blocking)"
    return None


class Row(NamedTuple):
    action: str
    kind: str
    enabled: int
    taken: int
    status: str  # "ok" | "never enabled" | "never taken" | "n/a: <why>"


def table(model, coverage: Dict[str, List[int]]) -> List[Row]:
    rows = []
    for name in model.action_names():
        enabled, taken = coverage.get(name, (0, 0))
        why = not_applicable(model.cfg, name)
        if why:
            status = f"n/a: {why}"
        elif not enabled:
            status = "never enabled"
        elif not taken:
            status = "never taken"
        else:
            status = "ok"
        rows.append(Row(name, model.action_kind(name), enabled, taken, status))
    return rows


def never_enabled(model, coverage) -> List[str]:
    """Relevant actions that were never enabled."""
    return [r.action for r in table(model, coverage) if r.status == "never enabled"]


def format_table(rows: List[Row]) -> List[str]:
    w = max(len(r.action) for r in rows)
    lines = [f"  {'action':<{w}}  {'kind':<10}  {'enabled':>10}  {'taken':>10}  status"]
    for r in rows:
        lines.append(f"  {r.action:<{w}}  {r.kind:<10}  {r.enabled:>10,}  {r.taken:>10,}  {r.status}")
    return lines
