"""Which spec actions the SGLang adapter takes on this lane, model by model, and why not the rest.

For each model, a breadth-first search of the spec finds the shortest trace that ends
with each action (applied in a state where it is enabled); each such trace is replayed on
the lane's SGLang, compared with the spec at every step and its bytes verified. An action
no reachable state of the model enables gets the reason its features give (a feature off,
a fault not modelled). Run it in a lane:

    $(tiercheck lane python sglang==0.5.23) -m tiercheck sglang coverage [MODEL[:RANKS] ...]
"""

from __future__ import annotations

import time
from collections import deque

# Why a model's spec never enables an action, from its constants (first match wins).
NOT_IN_MODEL = (
    (("write_dma_done",), lambda c: c.write_back,
     "write_back: the D->H copy completes inside the evict step (blocking writing_check)"),
    (("storage_backup_done", "drain_storage_control_queues", "store_lose", "prefetch_from_storage",
      "prefetch_io", "check_prefetch_progress"), lambda c: not c.storage, "no storage tier (storage = false)"),
    (("prefetch_from_storage", "prefetch_io", "check_prefetch_progress"), lambda c: not c.prefetch,
     "no prefetch (prefetch = false)"),
    (("store_lose",), lambda c: not c.fault("store_loss"), "the store_loss fault is not modelled"),
    (("registry_skew",), lambda c: not c.fault("registry_skew"), "the registry_skew fault is not modelled"),
    (("local_access",), lambda c: not c.cp_planner, "CP planner only (not part of SGLang's HiCache)"),
    (("lock_request", "unlock_request"), lambda c: not c.request_locks,
     "request-lifetime locks are not modelled (request_locks = false)"),
    (("prefetch_timeout",), lambda c: c.prefetch_stop != "timeout", "the timeout stop policy is off"),
    (("prefetch_read_fails",), lambda c: not c.prefetch_read_fail, "prefetch read failures are not modelled"),
    (("prefetch_revoke",), lambda c: not c.prefetch_revoke, "prefetch revoke is not modelled"),
)


def why_not(cfg, name: str) -> str:
    for names, off, why in NOT_IN_MODEL:
        if name in names and off(cfg):
            return why
    return ""


def witnesses(model, limit: int = 300_000, budget: float = 120.0) -> dict:
    """Action name -> a shortest trace whose last step is that action (spec-enabled)."""
    init = model.init_states()[0]
    want = {name for name in model.action_names() if not why_not(model.cfg, name)}
    found, parent = {}, {init: None}
    queue = deque([init])
    stop = time.monotonic() + budget
    while queue and want - set(found) and len(parent) < limit and time.monotonic() < stop:
        s = queue.popleft()
        if not model.constraint(s):
            continue
        for a, t in model.successors(s):
            if a.name not in found:
                found[a.name] = _path(parent, s) + [a]
            if t not in parent:
                parent[t] = (s, a)
                queue.append(t)
    return found


def _path(parent, s) -> list:
    out = []
    while parent[s] is not None:
        s, a = parent[s]
        out.append(a)
    return out[::-1]


def model_coverage(cfg, backend: str) -> dict:
    """Per action: {"taken": steps of its witness} / {"disagrees": message} / {"why": reason}."""
    from tiercheck.conformance.runner import replay
    from tiercheck.errors import UserError
    from tiercheck.spec.model import Model

    from .driver import SGLangDriver, check_supported, require_lane

    model = Model(cfg)
    try:
        check_supported(cfg, require_lane())
    except UserError as exc:
        return {name: {"why": str(exc).split(": ", 1)[-1]} for name in model.action_names()}
    traces = witnesses(model)
    out = {}
    for name in model.action_names():
        trace = traces.get(name)
        if trace is None:
            out[name] = {"why": why_not(cfg, name) or "enabled in no reachable state of the model"}
            continue
        driver = SGLangDriver(cfg, backend=backend)
        try:
            result = replay(driver, trace)
        finally:
            driver.close()
        if result.mismatch is None:
            out[name] = {"taken": len(trace)}
        else:
            out[name] = {"disagrees": result.mismatch.message.splitlines()[0]}
    return out


def table(rows: dict, names) -> str:
    """Markdown, one row per model run: the actions taken (witness length), the ones that
    disagree, and the others grouped by the reason they are not taken."""
    lines = ["| model | taken (steps of its shortest witness) | disagrees | not taken: why |",
             "|---|---|---|---|"]
    for run, cells in rows.items():
        taken = [f"{n} ({cells[n]['taken']})" for n in names if "taken" in cells.get(n, {})]
        bad = [f"{n}: {cells[n]['disagrees']}" for n in names if "disagrees" in cells.get(n, {})]
        why: dict = {}
        for n in names:
            if "why" in cells.get(n, {}):
                why.setdefault(cells[n]["why"], []).append(n)
        lines.append(f"| {run} | {', '.join(taken)} | {'; '.join(bad) or '-'} | "
                     + "; ".join(f"{', '.join(ns)}: {reason}" for reason, ns in why.items()) + " |")
    return "\n".join(lines)


def main(refs) -> int:
    """``refs``: MODEL or MODEL:RANKS (default: every model of models/library/sglang)."""
    from dataclasses import replace

    from tiercheck.models import model_file
    from tiercheck.spec.model import Model

    if not refs:
        from pathlib import Path

        lib = Path(model_file.LIBRARY) / "sglang"
        refs = [f"sglang/{p.stem}" for p in sorted(lib.glob("*.toml"))]
    rows = {}
    names = None
    for ref in refs:
        name, _, ranks = ref.partition(":")
        cfg = model_file.load(name).config
        if ranks:
            cfg = replace(cfg, ranks=int(ranks))
        backend = "gloo" if cfg.ranks > 1 else "lockstep"
        label = f"{name.removeprefix('sglang/')}" + (f" ({cfg.ranks} ranks)" if ranks else "")
        t0 = time.monotonic()
        rows[label] = model_coverage(cfg, backend)
        names = names or Model(cfg).action_names()
        taken = sum("taken" in c for c in rows[label].values())
        print(f"{label}: {taken} actions taken, {time.monotonic() - t0:.0f} s", flush=True)
    print(table(rows, names))
    return 1 if any("disagrees" in c for r in rows.values() for c in r.values()) else 0
