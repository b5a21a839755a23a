"""Seed 000's results table and seed 001's duplicate reclaim on the reference HiCache, in
one go: mirror release off vs on (file store, Mooncake, two engines on one store) with the
seed's figures beside ours and the flag-off drain-round overhead, then write_back
duplicate reclaim off vs on. Writes the host-pool occupancy plots to docs/img/ (when
matplotlib is installed) and exits non-zero if a direction of the seed is not reproduced.

    python benchmarks/seed_table.py [--scale full|small] [--backend file|mooncake|both]
                                    [--img-dir docs/img] [--json out.json]

The same tables one at a time: tiercheck bench seed-table / tiercheck bench reclaim.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tiercheck.errors import UserError
from tiercheck.impl.workload import seedtable as stb
from tiercheck.impl.workload.arms import reclaim_setup, seed_setup
from tiercheck.impl.workload.plot import PlotUnavailable, plot_occupancy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _plot(arms, path, title) -> None:
    try:
        print(f"plot: {plot_occupancy(arms, path, title)}")
    except PlotUnavailable as exc:
        print(f"plot: skipped, {exc}", file=sys.stderr)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", choices=("full", "small"), default="full")
    p.add_argument("--backend", choices=("file", "mooncake", "both"), default="both")
    p.add_argument("--img-dir", default=os.path.join(ROOT, "docs", "img"))
    p.add_argument("--json", help="write the directions and overhead as JSON")
    args = p.parse_args(argv)
    try:
        if not os.path.isdir(args.img_dir):
            raise UserError(f"--img-dir {args.img_dir} does not exist")
        log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        backends = ("file", "mooncake") if args.backend == "both" else (args.backend,)
        two = "mooncake" if "mooncake" in backends else "file"  # the seed: one shared mooncake
        t = stb.run_seed_table(seed_setup(args.scale), backends, two, log=log)
        print(stb.format_seed_table(t))
        (b, off, on), = t.pairs(1)[:1]
        _plot([off, on], os.path.join(args.img_dir, "host-occupancy.png"),
              "Host-pool occupancy, mirror release off vs on (seed 000 load)")
        twos = t.pairs(2)
        if twos:
            _plot([twos[0][1], twos[0][2]], os.path.join(args.img_dir, "host-occupancy-two-engines.png"),
                  "Host-pool occupancy, two engines on one store (engine 2 from the warm round on)")
        print()
        r = stb.run_reclaim_table(reclaim_setup(args.scale), log=log)
        print(stb.format_reclaim_table(r))
        _plot([r.off, r.on], os.path.join(args.img_dir, "host-occupancy-reclaim.png"),
              "Host-pool occupancy, write_back duplicate reclaim off vs on")
        dirs = stb.directions(t) + stb.reclaim_directions(r)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"directions": dirs, "overhead": t.overhead}, f, indent=1, default=str)
        return 0 if all(ok for _, ok, _ in dirs) else 1
    except UserError as exc:
        print(f"seed_table: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
