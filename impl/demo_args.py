"""The demo's command-line arguments, apart from the demo so that building the `tiercheck`
parser does not import torch."""

from __future__ import annotations

import argparse

from tiercheck.errors import UserError
from tiercheck.inputs import int_in


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sessions", type=int_in(1, 4096), default=16)
    p.add_argument("--groups", type=int_in(1, 1024), default=4, help="distinct shared prefixes")
    p.add_argument("--rounds", type=int_in(1, 1000), default=2)
    p.add_argument("--prefix-pages", type=int_in(1, 4096), default=6)
    p.add_argument("--turn-pages", type=int_in(0, 4096), default=2)
    p.add_argument("--page-size", type=int_in(1, 4096), default=4)
    p.add_argument("--device-pages", type=int_in(1, 1 << 20), default=64)
    p.add_argument("--host-pages", type=int_in(1, 1 << 20), default=24)
    p.add_argument("--ranks", type=int_in(1, 8), default=1, help="TP ranks (lock-step threads)")
    p.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0)
    p.add_argument("--baseline", action="store_true",
                   help="also run the host-starvation baseline (seed 000's bug) for comparison")


def check_args(args) -> None:
    for name in ("sessions", "groups", "rounds", "prefix_pages", "page_size", "device_pages",
                 "host_pages", "ranks"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1")
    if args.turn_pages < 0:
        raise UserError("--turn-pages must be non-negative")
    longest = args.prefix_pages + args.rounds * args.turn_pages
    if longest > args.device_pages:
        raise UserError(f"a request of {longest} pages does not fit --device-pages {args.device_pages}")
