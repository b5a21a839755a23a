"""tiercheck sglang starvation: seed 000's host-pool starvation measured on upstream SGLang.

Run with an SGLang lane's interpreter (the cache objects are SGLang's own). Prints the
table of docs/findings/sglang-starvation.md: baseline, controls, and with ``--patch
mirror-release`` the patched arm (the patch must be applied to the lane first:
``python -m tiercheck.conformance.sglang_workload.patch apply mirror-release``).
"""

from __future__ import annotations

import argparse
import json
import sys

from tiercheck.errors import UserError

HELP = "host-pool starvation on upstream SGLang (baseline, controls, --patch mirror-release)"


def add_arguments(p) -> None:
    p.add_argument("--shape", choices=("plain", "hot", "both"), default="both", help="traffic shape")
    p.add_argument("--patch", choices=("mirror-release",), help="also run the patched arm")
    p.add_argument("--device-tokens", type=int, default=1024, help="device pool (page size 1)")
    p.add_argument("--host-ratio", type=float, default=0.25, help="host pool / device pool of the baseline")
    p.add_argument("--sessions", type=int, default=32, help="sessions per round (2 rounds)")
    p.add_argument("--only", action="append", help="run only arms whose name contains this (repeatable)")
    p.add_argument("--plot-dir", help="write one host-occupancy PNG per shape here")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")


def run(args) -> int:
    try:
        import sglang  # noqa: F401
    except ImportError:
        raise UserError("sglang starvation needs an SGLang lane's interpreter (sglang is not importable)")
    if args.device_tokens < 64 or not 0 < args.host_ratio:
        raise UserError("sglang starvation: --device-tokens must be >= 64 and --host-ratio positive")
    from tiercheck.conformance.sglang_workload.arms import run_all
    from tiercheck.conformance.sglang_workload.table import format_table, precondition

    shapes = ("plain", "hot") if args.shape == "both" else (args.shape,)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    results = run_all(shapes, args.device_tokens, args.host_ratio, args.sessions,
                      patched=args.patch == "mirror-release", only=args.only, log=log)
    print(format_table(results, f"SGLang host-pool starvation ({args.sessions} sessions x 2 rounds, "
                                f"device pool {args.device_tokens} tokens, page size 1, concurrency 2)"))
    print("\nPrecondition (write-out: under 50% starves, 50-95% partly, from 95% ok):")
    print("\n".join(precondition(results)))
    bad = [r for r in results if r.problems]
    if args.plot_dir:
        _plots(results, shapes, args.plot_dir)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([_row(r) for r in results], f, indent=1)
    return 1 if bad else 0


def _plots(results, shapes, out_dir) -> None:
    import os

    from tiercheck.impl.workload.plot import PlotUnavailable, plot_occupancy

    os.makedirs(out_dir, exist_ok=True)
    for shape in shapes:
        views = [r.plot_view() for r in results if r.shape == shape and not r.error
                 and ("baseline" in r.arm.name or "patched" in r.arm.name or "1x" in r.arm.name)]
        path = os.path.join(out_dir, f"sglang-starvation-{shape}.png")
        try:
            plot_occupancy(views, path, f"SGLang 0.5.23 host pool, {shape} traffic")
            print(f"plot: {path}")
        except PlotUnavailable as exc:
            print(f"no plot: {exc}", file=sys.stderr)


def _row(r) -> dict:
    c = r.counters
    out = {"shape": r.shape, "arm": r.arm.name, "error": r.error, "host": r.host_capacity,
           "device": r.arm.setup.device_tokens, "problems": r.problems, "wall_s": round(r.wall_s, 2)}
    if c is not None:
        out.update({k: v for k, v in vars(c).items() if k != "occupancy"},
                   write_out_pct=r.write_out_pct, stored_pct=r.stored_pct,
                   released_tokens=r.released_tokens)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tiercheck sglang starvation", description=HELP)
    add_arguments(p)
    try:
        return run(p.parse_args(argv))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
