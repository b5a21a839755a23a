"""The whole audit: every inductiveness obligation (target x action) and the consensus
theorems, run over a small process pool, with the Markdown and JSON reports.

Bounds (docs/proofs.md): ranks, counters, capacities and the feature flags are
unbounded/symbolic; the page universe is every forest of at most ``pages`` pages (the
transitive closure of the parent relation is not first-order, so pages are bounded).
With ``unbounded``, the obligations the page-sorted encoding covers
(proofs.epr_obligations.covered) are proved for forests of any size instead, the rest
bounded; each result says which (``Result.pages``: "any" or "<=N").
"""

from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Dict, List, NamedTuple

from . import cores, host_slots
from .consensus import THEOREMS, run_theorem
from .obligations import ACTION_NAMES, CASES, SPLIT_FLAGS, UNDECIDED_NOTE, Result, prove_action, targets_for
from .strengthen import STRENGTHENING

DEFAULT_PAGES = 2
# Costliest first, so a pool of two balances.
_ORDER = ["insert", "evict", "prefetch_from_storage", "check_prefetch_progress", "drain_storage_control_queues"]


class Audit(NamedTuple):
    variants: tuple
    pages: int
    workers: int
    obligations: List[Result]
    theorems: list
    wall: float
    cpu: float
    unbounded: bool = False
    queries: int = 0  # the page-sorted solver queries made (proofs.cores)
    from_core: int = 0  # of them, decided from a stored unsat core

    @property
    def failed(self):
        return [r for r in self.obligations if r.status != "proved"]

    def theorems_ok(self) -> bool:
        return all(t.status in ("proved", "exhibited") for t in self.theorems)


def _job(args):
    action, case, variants, pages, targets, fix = args
    # A collection first: a forked child inherits the parent's garbage-collector state, so
    # without it the collections that free z3 terms (whose ids z3 then reuses) came at
    # points set by whatever the parent had allocated, and the same job's effort moved
    # with them (tests/proofs/test_proofs_job_effort.py: 6.8 or 4.1 million resource
    # units). After it, each job's effort is the same in the audit, in
    # benchmarks/prove_profile.py and on every run.
    gc.collect()
    cores.take()  # nothing the parent counted
    t0 = time.process_time()
    if targets == (host_slots.NAME,):  # slot_ownership's host half, slots on
        r = (host_slots.frame_result(action) if host_slots.frame(action)
             else host_slots.prove(action, frozenset(variants), pages, dict(fix), cases=(case,))._replace(pages=f"<={pages}"))
        return [r._replace(cti={k: v for k, v in (r.cti or {}).items() if not k.startswith("_")} or None)], \
            time.process_time() - t0, cores.take()
    if case in UNBOUNDED_KINDS:
        from .epr_obligations import prove_action as prove_unbounded

        results = prove_unbounded(action, targets, frozenset(variants), dict(fix) or None)
    else:
        results = [r._replace(pages=f"<={pages}")
                   for r in prove_action(action, targets, variants=frozenset(variants), k=pages, cases=(case,),
                                         fix=dict(fix))]
    out = []
    for r in results:
        cti = r.cti
        if cti is not None:
            cti = {k: v for k, v in cti.items() if not k.startswith("_")}
        out.append(r._replace(cti=cti))
    # the third: how many queries a stored core decided, and (recording) the cores learned
    return out, time.process_time() - t0, cores.take()


def measured_job(args):
    """``_job`` and the z3 resource units it took (benchmarks/prove_profile.py)."""
    from .limits import resource_units

    r0 = resource_units()
    results, cpu, info = _job(args)
    return results, cpu, resource_units() - r0, info


UNBOUNDED = "unbounded"  # the job kind of an action's page-sorted obligations
# insert's page-sorted obligations with insert_evicts on, the queue targets apart
# (proofs.epr_queue_sched): the costliest part of the audit, split so that a pool of two
# runs its parts side by side (unbounded_jobs)
UNBOUNDED_QUEUES = "unbounded-queues"
UNBOUNDED_KINDS = (UNBOUNDED, UNBOUNDED_QUEUES)


def unbounded_jobs(action: str, variants, pages, mine) -> list:
    """The jobs of an action's page-sorted obligations ``mine``: one, or for an action
    proved in two parts (proofs.epr_sched_evict.parts) the part with its flag off, and
    the part with it on (its targets but the bounded ones there, BOUNDED_UNDER) in two,
    the queue targets apart. A target is proved for any pages when every part proves it
    (_merge)."""
    from .epr_obligations import BOUNDED_UNDER
    from .epr_queues import UQPROPS
    from .epr_sched_evict import UNDECIDED_ON

    if action not in BOUNDED_UNDER:
        return [(action, UNBOUNDED, variants, pages, tuple(mine), ())]
    flag = BOUNDED_UNDER[action]
    on = [t for t in mine if t not in UNDECIDED_ON[action]]
    out = [(action, UNBOUNDED, variants, pages, tuple(mine), ((flag, False),))]
    for kind, group in ((UNBOUNDED_QUEUES, [t for t in on if t in UQPROPS]),
                        (UNBOUNDED, [t for t in on if t not in UQPROPS])):
        out += [(action, kind, variants, pages, tuple(group), ((flag, True),))] if group else []
    return out


def audit_targets(action: str, unbounded: bool, slots: bool = False) -> List[str]:
    """The action's obligations: those of the bounded encoding, and with ``unbounded``
    also the properties only the page-sorted encoding has (slot_ownership's device half);
    with ``slots``, slot_ownership's host half (proofs/host_slots.py)."""
    targets = targets_for(action) + ([host_slots.NAME] if slots else [])
    if not unbounded:
        return targets
    from .epr_obligations import covered
    from .epr_properties import UPROPS

    return targets + [t for t in UPROPS if t not in targets and covered(t, action)]


def _jobs(names, variants, pages, unbounded, slots=False):
    """One job per (action, case of the pre-state): the two cases of an expensive action
    run side by side. With ``unbounded``, an action's covered targets are one more job;
    with ``slots``, the host half of slot_ownership (slots on) one per case, or one frame
    job for an action that writes nothing it reads."""
    from .obligations import targets_for

    out = []
    for a in names:
        if slots:
            slot_cases = CASES[:1] if a == "init" or host_slots.frame(a) else CASES
            out += [(a, c, variants, pages, (host_slots.NAME,), tuple(host_slots.FIX.items())) for c in slot_cases]
        targets = targets_for(a)
        if unbounded:
            from .epr_obligations import BOUNDED_UNDER, covered
            from .epr_sched_evict import UNDECIDED_ON

            mine = [t for t in audit_targets(a, True) if covered(t, a)]
            if mine:
                out += unbounded_jobs(a, variants, pages, mine)
            if a in BOUNDED_UNDER:  # proved there with the flag off: bounded with it on
                bounded = tuple(t for t in mine if t in targets and t in UNDECIDED_ON[a])
                out += [(a, c, variants, pages, bounded, ((BOUNDED_UNDER[a], True),)) for c in CASES if bounded]
            targets = [t for t in targets if not covered(t, a)]
            if not targets:
                continue
        for c in (CASES if a != "init" else CASES[:1]):
            out.append((a, c, variants, pages, tuple(targets), ()))
    return out


def prove_mixed(action: str, variants=(), pages: int = DEFAULT_PAGES, unbounded: bool = True) -> List[Result]:
    """One action's obligations as the audit proves them (in this process): covered
    ones for any number of pages when ``unbounded``, the rest bounded."""
    merged: Dict[str, Result] = {}
    for job in _jobs([action], tuple(sorted(variants)), pages, unbounded):
        for r in _job(job)[0]:
            merged[r.target] = _merge(merged[r.target], r) if r.target in merged else r
    return [merged[t] for t in audit_targets(action, unbounded) if t in merged]


def _merge(old: Result, new: Result) -> Result:
    """A target is proved when it is proved in every case of the pre-state."""
    worse = old if old.status != "proved" else new
    pages = old.pages if old.pages != "any" else new.pages  # bounded if any part is
    return worse._replace(seconds=old.seconds + new.seconds, pages=pages)


def _theorems(_):
    t0 = time.process_time()
    return [run_theorem(t) for t in THEOREMS], time.process_time() - t0


def forked_pool(workers: int):
    """A pool that runs each job in a process of its own, forked from this one (also
    with one worker). z3's quantifier instantiation depends on the terms made before in
    the process (their order and names): in a worker that ran other jobs first, a job
    cost up to 4x what it costs in a fresh process, and its cost depended on which jobs
    the pool had handed that worker. A fork costs milliseconds (docs/proofs.md, "Cost of
    the audit")."""
    return mp.get_context("fork").Pool(max(1, workers), maxtasksperchild=1)


def run_audit(variants=(), pages: int = DEFAULT_PAGES, workers: int = 2, actions=None, unbounded=False,
              slots=False) -> Audit:
    """``slots``: also slot_ownership's host half (slot identities on; not in the default
    audit, which it would make about a fifth costlier: docs/proofs.md)."""
    t0 = time.perf_counter()
    names = list(actions or ACTION_NAMES)
    names.sort(key=lambda a: _ORDER.index(a) if a in _ORDER else len(_ORDER))
    jobs = _jobs(names, tuple(sorted(variants)), pages, unbounded, slots)
    cpu = 0.0
    from .schedule import longest_first

    # longest first (proofs.schedule); merged below in the jobs' own order, as before
    run = longest_first(list(range(len(jobs))), lambda i: (jobs[i][0], jobs[i][1], jobs[i][4], jobs[i][5]))
    with forked_pool(workers) as pool:
        th_async = pool.apply_async(_theorems, (None,))
        done = pool.map(_job, [jobs[i] for i in run], chunksize=1)
        theorems, c = th_async.get()
    parts = [None] * len(jobs)
    for i, part in zip(run, done):
        parts[i] = part
    cpu += c
    by_action: Dict[str, Dict[str, Result]] = {}
    queries = from_core = 0
    for (a, *_rest), (rs, c, info) in zip(jobs, parts):
        cpu += c
        queries, from_core = queries + info["queries"], from_core + info["from_core"]
        merged = by_action.setdefault(a, {})
        for r in rs:
            merged[r.target] = _merge(merged[r.target], r) if r.target in merged else r
    order = {a: audit_targets(a, unbounded, slots) for a in by_action}
    ordered = [by_action[a][t] for a in ACTION_NAMES if a in by_action for t in order[a] if t in by_action[a]]
    return Audit(tuple(sorted(variants)), pages, workers, ordered, theorems, time.perf_counter() - t0, cpu, unbounded,
                 queries, from_core)


# --- reports ----------------------------------------------------------------------------


def table_lines(audit: Audit) -> List[str]:
    w = max(len(r.target) for r in audit.obligations)
    wa = max(len(r.action) for r in audit.obligations)
    lines = [f"{'obligation':<{w}}  {'action':<{wa}}  {'pages':<5}  {'result':<7}  seconds"]
    for r in audit.obligations:
        lines.append(f"{r.target:<{w}}  {r.action:<{wa}}  {r.pages:<5}  {r.status:<7}  {r.seconds:7.2f}")
    return lines


def summary_line(audit: Audit) -> str:
    n = len(audit.obligations)
    ok = n - len(audit.failed)
    th = sum(t.status in ("proved", "exhibited") for t in audit.theorems)
    n_any = sum(r.pages == "any" for r in audit.obligations)
    n_out = sum(r.status == "inconclusive" for r in audit.obligations)
    pages = (f"{n_any} for any number of pages, {n - n_any} with pages <= {audit.pages}{not_applicable(audit)}"
             if audit.unbounded else f"pages <= {audit.pages}")
    return (f"{ok}/{n} obligations proved, {th}/{len(audit.theorems)} consensus theorems as expected; "
            f"{audit.wall:.1f}s wall on {audit.workers} worker(s) ({audit.cpu:.1f}s cpu, "
            f"{os.cpu_count()} cores visible), {pages}, ranks and counters unbounded"
            + (f"; variants {', '.join(audit.variants)}" if audit.variants else "")
            + (f"; {audit.from_core}/{audit.queries} solver queries decided from a stored unsat core"
               if audit.queries else "")
            + (f"; {n_out} inconclusive (out of z3's resource limit, not proved)" if n_out else "")
            + (f"; {UNDECIDED_NOTE}" if any(r.action in SPLIT_FLAGS for r in audit.obligations) else ""))


def not_applicable(audit: Audit) -> str:
    """The obligations with no counterpart for any number of pages (proved bounded only,
    and said so, never counted as proved for any pages), with the reason."""
    from .epr_obligations import NOT_APPLICABLE

    parts = [f"{sum(r.target == t for r in audit.obligations)} of them {t}: not applicable for any pages ({why})"
             for t, why in NOT_APPLICABLE.items() if any(r.target == t for r in audit.obligations)]
    return f" ({'; '.join(parts)})" if parts else ""


def to_json(audit: Audit) -> dict:
    return {
        "variants": list(audit.variants),
        "bounds": {"pages": audit.pages, "unbounded_pages": audit.unbounded,
                   **({"not_applicable_for_any_pages": _na_reasons()} if audit.unbounded else {}), "ranks": "any (uninterpreted sort)", "counters": "unbounded integers",
                   "config": "symbolic feature flags, capacities and targets (default options only)"},
        "wall_seconds": round(audit.wall, 3),
        "cpu_seconds": round(audit.cpu, 3),
        "workers": audit.workers,
        "solver_queries": {"all": audit.queries, "from_stored_core": audit.from_core},
        "obligations": [
            {"obligation": r.target, "action": r.action, "pages": r.pages, "result": r.status,
             "seconds": round(r.seconds, 3),
             **({"cti": r.cti} if r.cti else {})}
            for r in audit.obligations
        ],
        "strengthening": {s.name: s.meaning for s in STRENGTHENING.values()},
        "theorems": [t._asdict() for t in audit.theorems],
    }


def _na_reasons() -> dict:
    from .epr_obligations import NOT_APPLICABLE

    return dict(NOT_APPLICABLE)


def to_markdown(audit: Audit) -> str:
    from .cti import format_cti

    out = ["# tiercheck prove: audit", "", summary_line(audit), ""]
    out += ["## Obligations", "", "pages: `any` = proved for page forests of every size (proofs/forest.py), "
            "`<=N` = for every forest of at most N pages.", "",
            "| obligation | action | pages | result | seconds |", "|---|---|---|---|---|"]
    out += [f"| {r.target} | {r.action} | {r.pages} | {r.status} | {r.seconds:.2f} |" for r in audit.obligations]
    out += ["", "## Strengthening invariants", ""]
    out += [f"- **{s.name}**: {s.meaning}" for s in STRENGTHENING.values()]
    out += ["", "## Consensus theorems (64-bit unless stated)", "", "| theorem | claim | result | seconds |",
            "|---|---|---|---|"]
    out += [f"| {t.name} | {t.claim} | {t.status} | {t.seconds:.2f} |" for t in audit.theorems]
    for t in audit.theorems:
        if t.detail:
            out += ["", f"{t.name}: {t.detail}"]
    fails = [r for r in audit.failed if r.cti]
    if fails:
        out += ["", "## Counterexamples to induction", ""]
        for r in fails:
            out += [f"### {r.target} / {r.action}", "", "```"] + format_cti(r.cti) + ["```", ""]
    return "\n".join(out) + "\n"


def write_reports(audit: Audit, directory) -> List[Path]:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    md, js = d / "proofs.md", d / "proofs.json"
    md.write_text(to_markdown(audit))
    js.write_text(json.dumps(to_json(audit), indent=1, default=str))
    return [md, js]
