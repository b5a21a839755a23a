"""tiercheck bench: the seed benchmarks on the reference HiCache.

    tiercheck bench seed-table   seed 000's table: mirror release off vs on, file store and
                                 Mooncake, two engines on one store, flag-off overhead
    tiercheck bench reclaim      seed 001: write_back duplicate reclaim off vs on
"""

from __future__ import annotations

import json
import os
import sys

from tiercheck.errors import UserError
from tiercheck.inputs import int_in, output_file, positive_float

NAME = "bench"
HELP = "reproduce the seeds' benchmark tables on the reference HiCache (seed-table, reclaim)"


def _common(p) -> None:
    p.add_argument("--scale", choices=("full", "small"), default="full",
                   help="full: 128 sessions (about 2 min); small: 32 sessions on quarter pools (seconds)")
    p.add_argument("--sessions", type=int_in(1, 4096), help="override the number of sessions")
    p.add_argument("--device-pages", type=int_in(1, 1 << 20), help="override the device pool (host = ratio x device)")
    p.add_argument("--host-ratio", type=positive_float(64), help="host pool / device pool (default 0.25)")
    p.add_argument("--ranks", type=int_in(1, 8), help="TP ranks (lock-step threads, default 1)")
    p.add_argument("--plot", metavar="PNG", help="write the host-pool occupancy plot here")
    p.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="bench", metavar="BENCH")
    s = sub.add_parser("seed-table", help="seed 000: mirror release off vs on, side by side with the seed")
    _common(s)
    s.add_argument("--backend", choices=("file", "mooncake", "both"), default="both",
                   help="storage of the single-engine arms (default both)")
    s.add_argument("--two-engine", choices=("file", "mooncake", "none"), default="mooncake",
                   help="storage of the two-engine arm (default mooncake, as in the seed; none: skip it)")
    s.add_argument("--no-overhead", action="store_true", help="skip the flag-off overhead measurement")
    r = sub.add_parser("reclaim", help="seed 001: write_back duplicate reclaim off vs on under host pressure")
    _common(r)


def _setup(args, preset):
    from dataclasses import replace

    changes = {}
    if args.device_pages is not None:
        changes["device_pages"] = args.device_pages
    if args.host_ratio is not None:
        changes["host_ratio"] = args.host_ratio
    if args.ranks is not None:
        changes["ranks"] = args.ranks
    setup = preset(args.scale)
    if args.sessions is not None:
        if args.sessions < 1:
            raise UserError(f"--sessions must be at least 1, got {args.sessions}")
        changes["load"] = replace(setup.load, sessions=args.sessions)
    return replace(setup, **changes) if changes else setup


def _plot(arms, path, title) -> None:
    from tiercheck.impl.workload.plot import PlotUnavailable, plot_occupancy

    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        plot_occupancy(arms, path, title)
        print(f"plot: {path}")
    except PlotUnavailable as exc:
        print(f"plot: skipped, {exc}", file=sys.stderr)


def _arm_json(a) -> dict:
    return {
        "name": a.name, "flag": a.flag, "backend": a.backend, "engines": a.engines,
        "written_pct": a.written_pct, "stored_pct": a.write_out_pct,
        "rejected": {f"{r}/{s}": v for (r, s), v in sorted(a.rejected().items())},
        "warm": {k: a.warm.pct(k) for k in ("device_hit", "host_hit", "storage_hit", "computed")},
        "wall_s": a.wall_s, "round_wall_s": [r.wall_s for r in a.rounds],
        "forward_s": a.forward_s, "problems": a.problems,
        "host_only_under_pressure": a.trace.mean_under_pressure("host_only") if a.trace else None,
        "mirror_under_pressure": a.trace.mean_under_pressure("mirror") if a.trace else None,
        "metrics": a.metrics,
    }


def _write_json(path, data) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(data, f, indent=1, default=str)
        print(f"json: {path}")


def run(args) -> int:
    from tiercheck.impl.workload import seedtable as stb
    from tiercheck.impl.workload.arms import reclaim_setup, seed_setup

    if args.bench not in ("seed-table", "reclaim"):
        raise UserError("bench: say which benchmark: seed-table or reclaim (tiercheck bench --help)")
    for opt in ("plot", "json"):  # checked before minutes of running, not after
        path = getattr(args, opt)
        if path:
            output_file(path, f"--{opt}")
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if args.bench == "seed-table":
        setup = _setup(args, seed_setup)
        backends = ("file", "mooncake") if args.backend == "both" else (args.backend,)
        two = None if args.two_engine == "none" else args.two_engine
        t = stb.run_seed_table(setup, backends, two, overhead=not args.no_overhead, log=log)
        print(stb.format_seed_table(t))
        pairs = t.pairs(1)
        _plot([a for _, off, on in pairs[:1] for a in (off, on)], args.plot,
              "Host-pool occupancy, mirror release off vs on (seed 000 load)")
        _write_json(args.json, {"arms": [_arm_json(a) for a in t.arms.values()],
                                "overhead": t.overhead,
                                "directions": stb.directions(t)})
        ok = all(d[1] for d in stb.directions(t) if "verify" in d[0])
        return 0 if ok else 1
    if args.bench == "reclaim":
        setup = _setup(args, reclaim_setup)
        t = stb.run_reclaim_table(setup, log=log)
        print(stb.format_reclaim_table(t))
        _plot([t.off, t.on], args.plot, "Host-pool occupancy, write_back duplicate reclaim off vs on")
        _write_json(args.json, {"arms": [_arm_json(t.off), _arm_json(t.on)],
                                "directions": stb.reclaim_directions(t)})
    return 0 if not (t.off.problems or t.on.problems) else 1
