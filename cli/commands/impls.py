"""tiercheck impls: the implementations `--impl NAME` can drive, and who registered them."""

from __future__ import annotations

from tiercheck.conformance.adapters import GROUP, registered

NAME = "impls"
HELP = f"list the implementations registered in the entry-point group {GROUP}"


def add_arguments(p):
    pass


def run(args) -> int:
    impls = registered()
    rows = [(name, impls[name].description(), f"{impls[name].origin} ({impls[name].target})") for name in sorted(impls)]
    width = max((len(r[0]) for r in rows), default=0)
    for name, description, origin in rows:
        print(f"{name:<{width}}  {description}\n{'':<{width}}  from {origin}")
    print(f"{len(rows)} registered; any other: --impl package.module:factory")
    return 0
