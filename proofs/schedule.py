"""The order in which the audit hands its jobs to the process pool: longest first.

A pool of W workers that takes jobs in list order finishes, with the jobs sorted by
decreasing cost, within 4/3 of the best possible makespan (Graham's LPT bound); in the
order the actions happen to be listed a costly job picked up last leaves the other
worker idle for its whole length. Costs are estimates: the CPU seconds of each job
measured by ``benchmarks/prove_profile.py --write`` (proofs/audit_costs.py, one entry per
job key), and for a job not measured yet (a new action, obligations moved from the
bounded to the page-sorted encoding) a default per target of its kind. The order
changes no result, only when each one is computed.
"""

from __future__ import annotations

from typing import Sequence, Tuple

# CPU seconds per target where a job has no measured cost: the bounded cases build and
# search the enumerated-page encoding, the page-sorted job one quantified formula per
# target (the medians of the measured jobs, rounded up).
DEFAULT_PER_TARGET = {"agree": 0.1, "diverged": 0.1, "unbounded": 0.05}


def job_key(action: str, kind: str, fix: Sequence[Tuple[str, object]] = ()) -> str:
    """The name of a job in the cost table: action, case or ``unbounded``, fixed flags."""
    return "/".join([action, kind, *(f"{k}={v}" for k, v in sorted(fix))])


def estimate(action: str, kind: str, targets: Sequence[str], fix=()) -> float:
    from .audit_costs import COSTS

    key = job_key(action, kind, fix)
    if key in COSTS:
        return COSTS[key]
    return DEFAULT_PER_TARGET.get(kind, 0.1) * max(1, len(targets))


def longest_first(jobs: list, key) -> list:
    """``jobs`` sorted by decreasing estimated cost (``key(job)`` -> (action, kind,
    targets, fix)); ties keep their order, so the order is deterministic."""
    return sorted(jobs, key=lambda j: -estimate(*key(j)))
