"""The conformance suite as one test command, for mutation testing (benchmarks/mutation.py):
the default campaign (`tiercheck conform --impl reference`, every default model) within
a budget, then every shipped generated tour (tests/generated/*/tour.json) replayed on the
reference implementation. Exit 0: conforms; 1: a disagreement (the mutant is killed).

    python benchmarks/mutation_suite.py [--budget SECONDS] [--seed S] [--tours-only]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tiercheck.conformance import defaults, machine
from tiercheck.conformance.adapters import driver_factory
from tiercheck.conformance.generated import load_tour
from tiercheck.conformance.runner import replay

TOURS = Path(__file__).resolve().parent.parent / "tests" / "generated"


def tours_agree() -> bool:
    for path in sorted(TOURS.glob("*/tour.json")):
        mf, traces = load_tour(path)
        for k, (actions, probes) in enumerate(traces):
            driver = driver_factory("reference", mf.config)()
            try:
                mm = replay(driver, actions, expect_disabled=probes).mismatch
            finally:
                driver.close()
            if mm is not None:
                print(f"{path.parent.name} trace {k}: {mm.message}")
                return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tours-only", action="store_true")
    args = ap.parse_args(argv)
    if not args.tours_only:
        res = defaults.run_campaign(lambda cfg: driver_factory("reference", cfg), args.budget, seed=args.seed,
                                    shrink_budget=5.0)
        failed = [r for r in res.values() if r.failure]
        if failed:
            print(failed[0].failure)
            return 1
    return 0 if tours_agree() else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except machine.ConformanceFailure as exc:  # pragma: no cover -- run_campaign catches these
        print(exc)
        sys.exit(1)
