"""The fault bounds of a conformance run, as command-line flags (replay, conform): how long
a rank waits at a sync point, and how long the driver waits for a rank's answer. A stalled
or dead rank then ends the run within a stated bound, naming the rank and sync point."""

from __future__ import annotations

from tiercheck.inputs import positive_float


def add_arguments(p) -> None:
    p.add_argument("--collective-timeout", type=positive_float(3600), default=None, metavar="S",
                   help="seconds a rank waits at a sync point for its peers (default: gloo 5, lock-step 30)")
    p.add_argument("--driver-timeout", type=positive_float(7 * 24 * 3600), default=None, metavar="S",
                   help="seconds the driver waits for a gloo rank's answer to one step "
                        "(default: 3 collective timeouts + 120)")


def timeouts(args) -> dict:
    out = {}
    if args.collective_timeout is not None:
        out["timeout"] = args.collective_timeout
    if args.driver_timeout is not None:
        out["driver_timeout"] = args.driver_timeout
    return out
