"""tiercheck demo: a shared-prefix workload on the reference HiCache (write_through,
embedded file store, mirror release on), printing SGLang's metrics and verifying bytes."""

from __future__ import annotations

from tiercheck.impl import demo_args

NAME = "demo"
HELP = "run a shared-prefix workload on the reference HiCache and print its metrics"


def add_arguments(p):
    demo_args.add_arguments(p)


def run(args) -> int:
    from tiercheck.impl import demo  # torch: only when the demo runs

    return demo.run(args)
