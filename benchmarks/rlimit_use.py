"""The z3 resource use (``rlimit count``) of each check that proofs/limits.py bounds,
measured over one audit, to size those limits (docs/proofs.md, "Resource limits
everywhere").

    python benchmarks/rlimit_use.py              # tiercheck prove --unbounded's audit
    python benchmarks/rlimit_use.py --bounded    # tiercheck prove's (pages <= 2)
    python benchmarks/rlimit_use.py --pytest tests/proofs/test_x.py   # the calls tests make

z3's "rlimit count" statistic is the context's running total, and a limit applies to
the count a call adds; so each call is charged the count added since the previous call
in its process (an upper bound: work between calls is charged to the next one). Prints,
per call site, the number of calls and the largest and total use.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile

import z3

def _count(sol) -> int:
    from tiercheck.proofs.limits import resource_units

    return resource_units()  # the context's running total, which every solver's statistics report


def _outer(f) -> str:
    """"case_vacuity.<fn>/" where the call is a case-vacuity check's (through obligations.solve);
    "evicts-on/" where it is a page-sorted obligation's with the step's own eviction on."""
    while f is not None:
        if f.f_code.co_filename.endswith("case_vacuity.py"):
            return f"case_vacuity.{f.f_code.co_name}/"
        if f.f_code.co_filename.endswith("epr_obligations.py") and f.f_code.co_name == "prove_action":
            return "evicts-on/" if f.f_locals.get("on") else ""
        f = f.f_back
    return ""


def install(out_dir: str):
    """Wrap z3.Solver.check: one line per call, "site use", in out_dir/<pid>."""
    orig = z3.Solver.check
    last = {}

    def check(self, *a, **k):
        f = sys._getframe(1)
        site = (os.path.splitext(os.path.basename(f.f_code.co_filename))[0], f.f_code.co_name)
        outer = _outer(f)
        res = orig(self, *a, **k)
        now = _count(self)
        use = now - last.get(os.getpid(), 0)
        last[os.getpid()] = now
        if "z3" not in site[0]:  # z3's own wrappers (z3.solve, ...) excluded
            with open(os.path.join(out_dir, str(os.getpid())), "a") as fh:
                fh.write(f"{outer}{site[0]}.{site[1]} {use}\n")
        return res

    z3.Solver.check = check


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bounded", action="store_true", help="the bounded audit (tiercheck prove)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--stored-cores", action="store_true",
                   help="decide queries from their stored unsat cores first, as the audit does "
                        "(default: every query whole, the use the limits must cover)")
    p.add_argument("--pytest", nargs=argparse.REMAINDER, help="instead of an audit: these pytest arguments")
    args = p.parse_args(argv)
    out_dir = tempfile.mkdtemp(prefix="rlimit_use")
    install(out_dir)
    if not args.stored_cores:
        from tiercheck.proofs import cores

        cores.set_table({})  # the limits bound the whole queries, which a stale core falls back to
    if args.pytest is not None:
        import pytest

        print(f"pytest exit {pytest.main(['-q', *args.pytest])}")
    else:
        from tiercheck.proofs.audit import run_audit

        audit = run_audit(workers=args.workers, unbounded=not args.bounded)
        print(f"audit: {len(audit.obligations) - len(audit.failed)}/{len(audit.obligations)} proved, "
              f"{audit.wall:.1f}s wall, {audit.cpu:.1f}s cpu")
    uses = collections.defaultdict(list)
    for name in os.listdir(out_dir):
        for line in open(os.path.join(out_dir, name)):
            site, use = line.split()
            uses[site].append(int(use))
    for site, xs in sorted(uses.items()):
        print(f"{site:32} {len(xs):6} calls  max {max(xs):>12,}  total {sum(xs):>14,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
