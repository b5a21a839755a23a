"""Where the proof audit spends its CPU: every job of `tiercheck prove --unbounded` run
one after another, each in a process of its own as the audit runs it, with its CPU seconds.

    python benchmarks/prove_profile.py                 # the table, costliest first
    python benchmarks/prove_profile.py --write         # also regenerate proofs/audit_costs.py
    python benchmarks/prove_profile.py --write-cores   # regenerate proofs/cores.json
    python benchmarks/prove_profile.py --bounded       # the audit without --unbounded
    python benchmarks/prove_profile.py --actions writing_check loading_check   # those actions' jobs only

A job is one action's obligations in one case of the pre-state (bounded: ``agree`` or
``diverged``, with the flags it fixes) or its page-sorted obligations (``unbounded``).
Beside the CPU seconds, z3's resource units (its ``rlimit count``): the work, within about 1%
from run to run, where the seconds move with the machine (docs/proofs.md, session 16).
``--write`` stores the figures that proofs/schedule.py orders the pool's jobs by
(longest first); the figures change no result. ``--write-cores`` decides every query whole
and stores the unsat cores that the audit then tries first (proofs/cores.py); the last
column counts the queries a stored core decided.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tiercheck.proofs.cores import RECORD_ENV

COSTS = Path(__file__).resolve().parent.parent / "proofs" / "audit_costs.py"
CORES_TABLE = Path(__file__).resolve().parent.parent / "proofs" / "cores.json"


def profile(unbounded: bool, pages: int, actions=None):
    from tiercheck.proofs.audit import _jobs, _theorems, forked_pool, measured_job
    from tiercheck.proofs.obligations import ACTION_NAMES
    from tiercheck.proofs.schedule import job_key

    rows, learned = [], {}
    jobs = _jobs(list(actions or ACTION_NAMES), (), pages, unbounded)
    with forked_pool(1) as pool:  # each job in a fresh process, as the audit runs it
        if not actions:
            rows.append(("theorems", pool.apply(_theorems, (None,))[1], 0, 0, 0))
        done = pool.map(measured_job, jobs, chunksize=1)
    for job, (results, cpu, units, info) in zip(jobs, done):
        action, kind, _v, _p, targets, fix = job
        bad = [r for r in results if r.status != "proved"]
        if bad:
            raise SystemExit(f"{job_key(action, kind, fix)}: not proved: {[r.target for r in bad]}")
        rows.append((job_key(action, kind, fix), cpu, len(targets), units, info["from_core"]))
        learned.update(info["learned"])
    return rows, learned


def write_costs(rows) -> None:
    lines = ['"""CPU seconds per audit job, measured by benchmarks/prove_profile.py --write (each',
             "in a fresh process, one after another); proofs/schedule.py orders the pool's jobs by them.",
             'Regenerate after moving obligations between jobs; a job missing here gets a default."""',
             "", "COSTS = {"]
    lines += [f"    {k!r}: {c:.2f}," for k, c, *_rest in sorted(rows, key=lambda r: r[0]) if k != "theorems"]
    lines += ["}", ""]
    COSTS.write_text("\n".join(lines))


def write_cores(learned) -> None:
    from tiercheck.proofs.cores import write

    write(learned, CORES_TABLE)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="regenerate proofs/audit_costs.py")
    p.add_argument("--write-cores", action="store_true",
                   help="regenerate proofs/cores.json: every query decided whole, its unsat core stored")
    p.add_argument("--bounded", action="store_true", help="the bounded audit (no --unbounded)")
    p.add_argument("--pages", type=int, default=2)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--actions", nargs="+", metavar="ACTION", help="only these actions' jobs (no --write)")
    args = p.parse_args(argv)
    load0 = os.getloadavg()[0]
    if args.actions and (args.write or args.write_cores):
        p.error("--write and --write-cores need every job (no --actions)")
    if args.write_cores:
        os.environ[RECORD_ENV] = "1"  # inherited by the forked jobs (proofs.cores)
    from tiercheck.proofs.obligations import ACTION_NAMES

    unknown = sorted(set(args.actions or ()) - set(ACTION_NAMES))
    if unknown:
        p.error(f"unknown action(s): {', '.join(unknown)}")
    rows, learned = profile(not args.bounded, args.pages, args.actions)
    total = sum(r[1] for r in rows)
    units = sum(r[3] for r in rows)
    print(f"{'job':52s} {'targets':>7s} {'cpu s':>7s} {'share':>6s} {'z3 units (M)':>13s} {'from core':>9s}")
    for k, c, n, w, hits in sorted(rows, key=lambda r: -r[1])[:args.top]:
        print(f"{k:52s} {n:7d} {c:7.2f} {100 * c / total:5.1f}% {w / 1e6:13.1f} {hits:9d}")
    print(f"{len(rows)} jobs, {total:.1f} CPU-s and {units / 1e6:.1f} million z3 resource units in all "
          f"(the units are the same on every run; the seconds move with the machine); "
          f"load average (1 min) {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    if args.write_cores:
        write_cores(learned)
        print(f"wrote {len(learned)} unsat cores to {CORES_TABLE.relative_to(CORES_TABLE.parent.parent)}")
    if args.write:
        write_costs(rows)
        print(f"wrote {COSTS.relative_to(COSTS.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
