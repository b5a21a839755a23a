"""Wall time of the proof audit with unbounded pages, from one run.

    python benchmarks/prove_unbounded.py                  # 2 workers
    python benchmarks/prove_unbounded.py --workers 1 --skip-bounded

Prints three lines: the unbounded obligations alone (every obligation that the
page-sorted encoding covers, proofs/epr_obligations.py, and the frame obligations,
proofs/epr_frame.py, for forests of any size), the
whole `tiercheck prove --unbounded` audit (covered obligations unbounded, the rest with
pages <= 2, plus the consensus theorems), and the machine's load average at the start
and end (the audit's CPU is shared with whatever else runs: compare runs of the same
invocation only). Exits 1 if an obligation is not proved.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def unbounded_only(workers: int):
    from tiercheck.proofs.epr_obligations import prove_all

    t0 = time.perf_counter()
    results = prove_all(workers=workers)
    return results, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--skip-bounded", action="store_true", help="only the unbounded obligations")
    args = p.parse_args(argv)
    load0 = os.getloadavg()
    results, wall = unbounded_only(args.workers)
    from tiercheck.proofs.epr_frame import frame

    ok = sum(r.status == "proved" for r in results)
    actions = len({r.action for r in results})
    frames = sum(frame(r.target, r.action) for r in results)
    print(f"unbounded obligations: {ok}/{len(results)} proved over {actions} actions (init included), "
          f"forests of any size ({frames} of them frame obligations), {wall:.1f}s wall on {args.workers} worker(s)")
    bad = len(results) - ok
    for r in results:
        if r.status != "proved":
            print(f"  not proved: {r.target} under {r.action} ({r.status}, pages any)")
    if not args.skip_bounded:
        from tiercheck.proofs.audit import run_audit

        audit = run_audit(workers=args.workers, unbounded=True)
        n_any = sum(r.pages == "any" for r in audit.obligations)
        print(f"tiercheck prove --unbounded: {len(audit.obligations) - len(audit.failed)}/{len(audit.obligations)} "
              f"proved ({n_any} for any number of pages, the rest pages <= {audit.pages}), "
              f"{audit.wall:.1f}s wall on {audit.workers} worker(s), {audit.cpu:.1f}s cpu")
        bad += len(audit.failed)
        for r in audit.failed:
            print(f"  not proved: {r.target} under {r.action} ({r.status}, pages {r.pages})")
    load1 = os.getloadavg()
    print(f"load average (1 min) {load0[0]:.1f} at start, {load1[0]:.1f} at end; {os.cpu_count()} cores visible")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
