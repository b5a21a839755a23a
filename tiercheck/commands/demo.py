"""tiercheck demo: a shared-prefix workload on the reference HiCache (write_through,
embedded file store, mirror release on), printing SGLang's metrics and verifying bytes."""

from __future__ import annotations

from tiercheck.impl import demo

NAME = "demo"
HELP = "run a shared-prefix workload on the reference HiCache and print its metrics"


def add_arguments(p):
    demo.add_arguments(p)


def run(args) -> int:
    return demo.run(args)
